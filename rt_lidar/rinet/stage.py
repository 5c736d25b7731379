"""The RINet pipeline stage: drop and re-intensify the points the camera sees.

Per scan: the camera image (the bridge's ``simGetImages`` or the embedded renderer) goes through the
model; the scan's points are projected into the image; where the predicted drop probability at a
point's pixel exceeds the threshold the point is dropped, elsewhere it takes the learned intensity
(mask intensity in [0, 1] times the preset's ``intensity_max``). Points outside the camera keep the
physics result. Take the image at :meth:`RinetStage.camera_time_ns` so that the camera sees the scene
when the sweep crosses its view.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from rt_lidar.pipeline.assembler import CameraView, Scan
from rt_lidar.rinet.masks import project
from rt_lidar.rinet.runtime import RinetRuntime, load_runtime
from rt_lidar.unreal_bridge.world import CameraSpec, Pose
from rt_lidar.unreal_bridge.world.camera import camera_projection

__all__ = ["RinetStage", "StageStats", "airsim_camera_post", "camera_projection", "rgb_from_airsim"]


def rgb_from_airsim(image: object) -> np.ndarray:
    """(H, W, 3) uint8 RGB from an AirSim image (``FluImage``: PNG bytes, or raw BGR when uncompressed)."""
    data = bytes(getattr(image, "data_uint8", b""))
    w, h = int(getattr(image, "width", 0)), int(getattr(image, "height", 0))
    if not data:
        raise ValueError("AirSim image has no uint8 data (ask with pixels_as_float=False)")
    if getattr(image, "compress", False) or data[:4] == b"\x89PNG":
        with Image.open(io.BytesIO(data)) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8)
    ch = len(data) // max(w * h, 1)
    if w * h * ch != len(data) or ch not in (3, 4):
        raise ValueError(f"AirSim image: {len(data)} bytes do not make {w}x{h} pixels of 3 or 4 channels")
    bgr = np.frombuffer(data, np.uint8).reshape(h, w, ch)
    return np.ascontiguousarray(bgr[:, :, 2::-1])


@dataclass
class StageStats:
    """What the stage did to the last scan."""

    in_view: int = 0
    dropped: int = 0
    reintensified: int = 0
    infer_ms: float = 0.0
    runtime: str = ""
    provider: str = ""


class RinetStage:
    """Learned raydrop and intensity for the points a camera sees."""

    def __init__(
        self,
        model_path: str | Path | None,
        camera: CameraSpec,
        sensor_mount: Pose,
        *,
        intensity_max: float = 255.0,
        drop_threshold: float = 0.5,
        runtime: str | RinetRuntime = "auto",
    ) -> None:
        self.runtime = load_runtime(model_path, runtime) if isinstance(runtime, str) else runtime
        self.camera = camera
        self.sensor_mount = sensor_mount
        self.intensity_max = float(intensity_max)
        self.drop_threshold = float(drop_threshold)
        scale = np.diag([self.runtime.width / camera.width, self.runtime.height / camera.height, 1.0])
        self.projection = scale @ camera_projection(camera, sensor_mount)
        self.last = StageStats()

    def camera_time_ns(self, scan: Scan) -> int:
        """Absolute time (ns) to take the image: when the sweep's points in view were fired (the scan
        start if none is in view)."""
        pts = scan.points
        if pts.size == 0:
            return scan.start_ns
        xyz = np.stack([pts["x"], pts["y"], pts["z"]], axis=1)
        inside = project(xyz, self.projection, self.runtime.width, self.runtime.height)[3]
        return scan.start_ns + (int(np.median(pts["t"][inside])) if inside.any() else 0)

    def apply(self, scan: Scan, rgb: np.ndarray, time_ns: int | None = None) -> Scan:
        """The scan with the camera-seen points dropped or re-intensified; ``rgb`` (H, W, 3) uint8, taken
        at sim time ``time_ns``. The scan carries the image and the model's mask (``scan.camera``)."""
        res = self.runtime.infer(rgb)
        w, h = self.runtime.width, self.runtime.height
        pts = scan.points
        xyz = np.stack([pts["x"], pts["y"], pts["z"]], axis=1)
        u, v, _, inside = project(xyz, self.projection, w, h)
        idx = np.nonzero(inside)[0]
        ui, vi = u[idx].astype(np.int64), v[idx].astype(np.int64)
        drop = res.drop_prob[0, 0][vi, ui] > self.drop_threshold
        keep = np.ones(pts.size, bool)
        keep[idx[drop]] = False
        out = pts.copy()
        seen = idx[~drop]
        out["intensity"][seen] = res.intensity[0, 0][vi[~drop], ui[~drop]] * np.float32(self.intensity_max)
        out = out[keep]
        n_drop = int(drop.sum())
        self.last = StageStats(
            int(idx.size),
            n_drop,
            int(seen.size),
            self.runtime.last_ms,
            self.runtime.name,
            self.runtime.provider,
        )
        drop_px = res.drop_prob[0, 0] > self.drop_threshold
        mask = np.where(drop_px, np.float32(0.0), res.intensity[0, 0]).astype(np.float32)
        view = CameraView(rgb, mask, int(time_ns) if time_ns is not None else int(scan.start_ns))
        return dataclasses.replace(scan, points=out, dropped=scan.dropped + n_drop, camera=view)


def airsim_camera_post(stage: RinetStage, client: Any, vehicle_name: str = "") -> Callable[[Scan], Scan]:
    """A scan hook that applies ``stage`` with the scene image of camera "0" fetched over the bridge
    (``client``: an :class:`rt_lidar.unreal_bridge.AirSimClient`)."""
    from rt_lidar.unreal_bridge import ImageRequest

    def post(scan: Scan) -> Scan:
        (image,) = client.sim_get_images([ImageRequest("0", 0, False, False)], vehicle_name)
        return stage.apply(scan, rgb_from_airsim(image))

    return post
