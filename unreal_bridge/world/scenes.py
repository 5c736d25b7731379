"""Tiny analytic scenes for tests and calibration, and the SCENES registry."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .errors import WorldError
from .geometry import MeshBuilder
from .pose import Pose
from .scene import MATERIAL_NAMES, Scene
from .street import street_scene
from .trajectory import StaticTrajectory

__all__ = ["SCENES", "SENSOR_HEIGHT", "glass_scene", "plane_scene", "targets_scene", "wall_scene"]

#: Sensor height above the ground (and above the ego origin) in the analytic scenes.
SENSOR_HEIGHT = 1.8


def _check_material(material: str) -> None:
    if material not in MATERIAL_NAMES:
        raise WorldError(f"unknown material {material!r}; known: {', '.join(MATERIAL_NAMES)}")


def _scene(builders: list[tuple[MeshBuilder, str, Pose]]) -> Scene:
    objects = [b.build(name, i + 1, StaticTrajectory(pose)) for i, (b, name, pose) in enumerate(builders)]
    return Scene(objects=objects, sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, SENSOR_HEIGHT))


def plane_scene(distance_m: float = 10.0, material: str = "concrete", size_m: float = 20.0) -> Scene:
    """One square plane (2 triangles) facing the sensor, perpendicular to its +x axis at ``distance_m``."""
    _check_material(material)
    if distance_m <= 0 or size_m <= 0:
        raise WorldError(f"plane_scene: distance_m and size_m must be > 0, got {distance_m}, {size_m}")
    h = size_m / 2
    b = MeshBuilder()
    b.quad([(0.0, h, -h), (0.0, -h, -h), (0.0, -h, h), (0.0, h, h)], material)
    return _scene([(b, "plane", Pose.from_xyz_rpy(distance_m, 0.0, SENSOR_HEIGHT))])


def wall_scene(
    distance_m: float = 10.0,
    material: str = "brick",
    width_m: float = 20.0,
    height_m: float = 10.0,
    thickness_m: float = 0.3,
    ground: bool = True,
) -> Scene:
    """A box wall whose front face is ``distance_m`` ahead of the sensor, optionally on an asphalt ground."""
    _check_material(material)
    if distance_m <= 0:
        raise WorldError(f"wall_scene: distance_m must be > 0, got {distance_m}")
    b = MeshBuilder()
    b.box((thickness_m / 2, 0.0, height_m / 2), (thickness_m, width_m, height_m), material)
    parts = [(b, "wall", Pose.from_xyz_rpy(distance_m, 0.0, 0.0))]
    if ground:
        g = MeshBuilder()
        g.grid(-5.0, distance_m + 10.0, -width_m, width_m, 0.0, 5.0, "asphalt")
        parts.append((g, "ground", Pose.identity()))
    return _scene(parts)


def targets_scene(
    materials: Sequence[str], distance_m: float = 20.0, panel_size_m: float = 1.0, gap_m: float = 0.5
) -> Scene:
    """Square panels of the given materials side by side (left to right as seen by the sensor), each
    centred ``distance_m`` from the sensor at its height and turned to face it. Panel k is named
    ``target_<k>_<material>`` and has segment id k + 1."""
    if not materials:
        raise WorldError("targets_scene: materials is empty")
    for m in materials:
        _check_material(m)
    if distance_m <= panel_size_m:
        raise WorldError(
            f"targets_scene: distance_m ({distance_m}) must exceed panel_size_m ({panel_size_m})"
        )
    n = len(materials)
    step = (panel_size_m + gap_m) / distance_m
    parts = []
    h = panel_size_m / 2
    for k, m in enumerate(materials):
        az = ((n - 1) / 2 - k) * step  # k = 0 is leftmost (+y)
        b = MeshBuilder()
        b.quad([(0.0, h, -h), (0.0, -h, -h), (0.0, -h, h), (0.0, h, h)], m)
        pose = Pose.from_xyz_rpy(distance_m * np.cos(az), distance_m * np.sin(az), SENSOR_HEIGHT, yaw=az)
        parts.append((b, f"target_{k}_{m}", pose))
    return _scene(parts)


def glass_scene(distance_m: float = 5.0, size_m: float = 2.0) -> Scene:
    """A single glass pane facing the sensor at ``distance_m`` with nothing behind it."""
    return plane_scene(distance_m, "glass", size_m)


#: The named scene's materials left to right: a dark, a mid and a bright diffuse target, then the two
#: retro-reflective sheetings, glass and chrome (reflectivity and range-walk checks at a glance).
DEFAULT_TARGETS: tuple[str, ...] = (
    "asphalt",
    "concrete",
    "car_paint_white",
    "plate_sheeting",
    "sign_sheeting",
    "glass",
    "chrome",
)


def _seedless(factory: Callable[[], Scene]) -> Callable[..., Scene]:
    """A named scene without random parts: ``seed`` is accepted (every scene is built with one) and unused."""

    def build(seed: int = 0) -> Scene:
        del seed
        return factory()

    build.__doc__ = factory.__doc__
    return build


#: Scenes by the name ``--scene`` takes: each is built as ``SCENES[name](seed=...)``.
SCENES: dict[str, Callable[..., Scene]] = {
    "street": street_scene,
    "plane": _seedless(plane_scene),
    "wall": _seedless(wall_scene),
    "targets": _seedless(lambda: targets_scene(DEFAULT_TARGETS)),
    "glass": _seedless(glass_scene),
}
