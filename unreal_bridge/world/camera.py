"""A ray-cast pinhole camera: albedo RGB with Lambert sun shading, depth and segmentation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import NDArray

from .errors import WorldError
from .pose import Pose

if TYPE_CHECKING:
    from .world import World

__all__ = ["AMBIENT", "CameraImages", "CameraSpec", "camera_projection", "camera_rays", "project", "render"]

#: Fraction of the albedo lit by the sky alone (faces turned away from the sun).
AMBIENT = 0.35
_SKY_HORIZON = np.array([0.78, 0.85, 0.95])
_SKY_ZENITH = np.array([0.30, 0.50, 0.85])


@dataclass(frozen=True)
class CameraSpec:
    """A pinhole camera on the ego vehicle. ``fov_deg`` is horizontal; the optical axis is the mount's +x,
    image right is the mount's -y and image down its -z."""

    width: int = 640
    height: int = 360
    fov_deg: float = 90.0
    mount: Pose = field(default_factory=lambda: Pose.from_xyz_rpy(0.2, 0.0, 1.7))

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1:
            raise WorldError(f"CameraSpec: width and height must be >= 1, got {self.width}x{self.height}")
        if not 1.0 <= self.fov_deg <= 170.0:
            raise WorldError(f"CameraSpec.fov_deg must be in 1..170, got {self.fov_deg}")

    @property
    def focal_px(self) -> float:
        """Focal length in pixels."""
        return 0.5 * self.width / float(np.tan(np.radians(self.fov_deg) / 2))

    def intrinsics(self) -> NDArray[np.float64]:
        """The (3, 3) matrix K for the optical frame (z along the axis, x right, y down)."""
        f = self.focal_px
        return np.array([[f, 0.0, self.width / 2], [0.0, f, self.height / 2], [0.0, 0.0, 1.0]])


_MOUNT_TO_OPTICAL = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])


def camera_projection(camera: CameraSpec, sensor_mount: Pose) -> NDArray[np.float64]:
    """(3, 4) matrix: sensor-frame points (both mounts on the ego) -> ``camera`` pixels times depth."""
    sensor_to_cam = camera.mount.inverse().compose(sensor_mount).matrix()
    return camera.intrinsics() @ _MOUNT_TO_OPTICAL @ sensor_to_cam[:3, :]


def project(
    xyz: NDArray[np.floating], projection: NDArray[np.float64], width: int, height: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Pixel coordinates (u, v float64), depth and the inside-the-image flag of points (N, 3) under a
    (3, 4) projection. Inside: depth > 0 and 0 <= u < width, 0 <= v < height."""
    pts = np.asarray(xyz, dtype=np.float64)
    hom = pts @ projection[:, :3].T + projection[:, 3]
    depth = hom[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = hom[:, 0] / depth
        v = hom[:, 1] / depth
    inside = (depth > 0) & (u >= 0) & (u < width) & (v >= 0) & (v < height)
    return u, v, depth, inside


class CameraImages(NamedTuple):
    """rgb (H, W, 3) uint8; depth (H, W) float32 metres along the optical axis (inf = sky);
    segmentation (H, W) uint32 segment ids (0 = sky)."""

    rgb: NDArray[np.uint8]
    depth: NDArray[np.float32]
    segmentation: NDArray[np.uint32]


def camera_rays(camera: CameraSpec) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Unit ray directions (H*W, 3) in the camera mount frame through pixel centres (row-major), and the
    cosine of each ray to the optical axis (H*W,)."""
    f = camera.focal_px
    u = (np.arange(camera.width) + 0.5 - camera.width / 2) / f
    v = (np.arange(camera.height) + 0.5 - camera.height / 2) / f
    uu, vv = np.meshgrid(u, v)
    d = np.stack([np.ones_like(uu), -uu, -vv], axis=-1).reshape(-1, 3)
    norm = np.linalg.norm(d, axis=1)
    return d / norm[:, None], 1.0 / norm


def render(
    world: World, camera: CameraSpec, t: float, max_range: float = 1000.0, threads: int | None = None
) -> CameraImages:
    """Render ``camera`` in ``world`` at time t (one ray per pixel, nearest hit)."""
    dirs_cam, cos_axis = camera_rays(camera)
    pose = world.ego_pose(t).compose(camera.mount)
    dirs = pose.rotate(dirs_cam).astype(np.float32)
    origins = np.broadcast_to(pose.position.astype(np.float32), dirs.shape)
    hits = world.cast(origins, dirs, t, max_range, threads=threads)
    h, w = camera.height, camera.width
    hit = hits.object_index >= 0
    colors = np.array(
        [world.scene.material_colors.get(m, (0.5, 0.5, 0.5)) for m in world.material_names]
        or [(0.5, 0.5, 0.5)],
        dtype=np.float32,
    )
    sun = np.asarray(world.scene.sun_direction, dtype=np.float32)
    lambert = np.clip(hits.normal @ sun, 0.0, 1.0)
    shade = AMBIENT + (1.0 - AMBIENT) * lambert
    albedo = colors[np.where(hit, hits.material, 0)]
    elevation = np.clip(dirs[:, 2], 0.0, 1.0)[:, None]
    sky = (1.0 - elevation) * _SKY_HORIZON + elevation * _SKY_ZENITH
    rgb = np.where(hit[:, None], albedo * shade[:, None], sky)
    rgb8 = np.clip(rgb * 255.0 + 0.5, 0, 255).astype(np.uint8).reshape(h, w, 3)
    depth = np.where(hit, hits.distance * cos_axis, np.inf).astype(np.float32).reshape(h, w)
    return CameraImages(rgb8, depth, hits.segment.reshape(h, w))
