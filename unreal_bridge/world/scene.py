"""Scene data: triangle meshes with per-face materials, segment ids and trajectories."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from .errors import WorldError
from .pose import Pose
from .trajectory import StaticTrajectory, Trajectory

__all__ = [
    "DEFAULT_SUN_DIRECTION",
    "MATERIAL_COLORS",
    "MATERIAL_NAMES",
    "MeshObject",
    "Scene",
    "stable_segment_id",
]

#: Material names the built-in scenes use; the physics side maps each to a reflectance / BRDF.
MATERIAL_NAMES: tuple[str, ...] = (
    "asphalt",
    "lane_paint",
    "concrete",
    "brick",
    "car_paint_red",
    "car_paint_white",
    "car_paint_black",
    "glass",
    "chrome",
    "plate_sheeting",
    "sign_sheeting",
    "vegetation",
    "bark",
    "metal_pole",
    "rubber",
    "building_plaster",
    "rock",
    "interior",
    "car_glass",
    "car_glass_ir",
    "car_glass_privacy",
    "car_interior",
    "car_paint_silver",
)

#: Display albedo (linear RGB 0..1) per material, for the camera renderer only.
MATERIAL_COLORS: dict[str, tuple[float, float, float]] = {
    "asphalt": (0.12, 0.12, 0.13),
    "lane_paint": (0.85, 0.85, 0.80),
    "concrete": (0.55, 0.54, 0.52),
    "brick": (0.55, 0.25, 0.18),
    "car_paint_red": (0.70, 0.05, 0.05),
    "car_paint_white": (0.88, 0.88, 0.90),
    "car_paint_black": (0.04, 0.04, 0.05),
    "glass": (0.20, 0.28, 0.32),
    "chrome": (0.75, 0.75, 0.78),
    "plate_sheeting": (0.92, 0.92, 0.88),
    "sign_sheeting": (0.10, 0.35, 0.75),
    "vegetation": (0.15, 0.40, 0.12),
    "bark": (0.30, 0.20, 0.12),
    "metal_pole": (0.45, 0.46, 0.48),
    "rubber": (0.05, 0.05, 0.05),
    "building_plaster": (0.80, 0.76, 0.66),
    "rock": (0.42, 0.40, 0.37),
    "interior": (0.06, 0.06, 0.07),
    "car_glass": (0.12, 0.18, 0.18),
    "car_glass_ir": (0.14, 0.16, 0.20),
    "car_glass_privacy": (0.05, 0.06, 0.07),
    "car_interior": (0.04, 0.04, 0.045),
    "car_paint_silver": (0.62, 0.63, 0.66),
}

DEFAULT_SUN_DIRECTION: tuple[float, float, float] = (0.4, 0.3, 0.866)


def stable_segment_id(name: str) -> int:
    """A deterministic AirSim-style segment id in 1..255 from an object name (CRC-32 based)."""
    return 1 + zlib.crc32(name.encode("utf-8")) % 255


@dataclass
class MeshObject:
    """One triangle mesh in its own object frame, posed in the world by its trajectory.

    ``face_material`` indexes ``Scene.material_names``; ``segment_id`` is 1..255 (0 means nothing).
    """

    name: str
    vertices: NDArray[np.float32]
    faces: NDArray[np.int32]
    face_material: NDArray[np.int16]
    segment_id: int
    trajectory: Trajectory = field(default_factory=StaticTrajectory)

    def __post_init__(self) -> None:
        self.vertices = np.ascontiguousarray(self.vertices, dtype=np.float32)
        self.faces = np.ascontiguousarray(self.faces, dtype=np.int32)
        self.face_material = np.ascontiguousarray(self.face_material, dtype=np.int16).reshape(-1)
        where = f"MeshObject {self.name!r}"
        if self.vertices.ndim != 2 or self.vertices.shape[1] != 3:
            raise WorldError(f"{where}: vertices must be (V, 3), got {self.vertices.shape}")
        if self.faces.ndim != 2 or self.faces.shape[1] != 3:
            raise WorldError(f"{where}: faces must be (F, 3), got {self.faces.shape}")
        if self.face_material.shape[0] != self.faces.shape[0]:
            raise WorldError(
                f"{where}: face_material has {self.face_material.shape[0]} entries "
                f"for {self.faces.shape[0]} faces"
            )
        if self.faces.size and (self.faces.min() < 0 or self.faces.max() >= self.vertices.shape[0]):
            raise WorldError(f"{where}: faces index vertices outside 0..{self.vertices.shape[0] - 1}")
        if not np.all(np.isfinite(self.vertices)):
            raise WorldError(f"{where}: vertices contain NaN or inf")
        if not 0 <= int(self.segment_id) <= 255:
            raise WorldError(f"{where}: segment_id must be 0..255, got {self.segment_id}")
        self.segment_id = int(self.segment_id)

    @property
    def is_static(self) -> bool:
        """True when the trajectory is a :class:`StaticTrajectory`."""
        return isinstance(self.trajectory, StaticTrajectory)

    @property
    def triangle_count(self) -> int:
        """Number of faces."""
        return int(self.faces.shape[0])


def _default_ego() -> Trajectory:
    return StaticTrajectory()


@dataclass
class Scene:
    """Objects, the material table, the ego trajectory, the sensor mount and the lighting."""

    objects: list[MeshObject]
    material_names: list[str] = field(default_factory=lambda: list(MATERIAL_NAMES))
    ego: Trajectory = field(default_factory=_default_ego)
    sensor_mount: Pose = field(default_factory=lambda: Pose.from_xyz_rpy(0.0, 0.0, 1.8))
    sun_direction: NDArray[np.float64] = field(default_factory=lambda: np.array(DEFAULT_SUN_DIRECTION))
    material_colors: dict[str, tuple[float, float, float]] = field(
        default_factory=lambda: dict(MATERIAL_COLORS)
    )

    def __post_init__(self) -> None:
        sun = np.asarray(self.sun_direction, dtype=np.float64).reshape(-1)
        norm = float(np.linalg.norm(sun)) if sun.shape == (3,) else 0.0
        if sun.shape != (3,) or not np.isfinite(norm) or norm < 1e-9:
            raise WorldError(f"Scene.sun_direction must be a non-zero 3-vector, got {self.sun_direction!r}")
        self.sun_direction = sun / norm
        n_mat = len(self.material_names)
        names: set[str] = set()
        for obj in self.objects:
            if obj.name in names:
                raise WorldError(f"Scene: duplicate object name {obj.name!r}")
            names.add(obj.name)
            fm = obj.face_material
            if fm.size and (fm.min() < 0 or fm.max() >= n_mat):
                raise WorldError(
                    f"Scene: object {obj.name!r} uses material index {int(fm.max())} outside the "
                    f"{n_mat} material_names"
                )

    @property
    def triangle_count(self) -> int:
        """Total faces over all objects."""
        return sum(o.triangle_count for o in self.objects)

    def material_index(self, name: str) -> int:
        """Index of a material name in ``material_names``; WorldError if absent."""
        try:
            return self.material_names.index(name)
        except ValueError:
            raise WorldError(
                f"Scene: unknown material {name!r}; known: {', '.join(self.material_names)}"
            ) from None
