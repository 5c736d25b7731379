"""Small analytic scenes for the pipeline tests, built from public world types."""

from __future__ import annotations

import numpy as np

from rt_lidar.unreal_bridge.world import ConstantVelocity, MeshObject, Pose, Scene, StaticTrajectory


def quad(center: tuple[float, float, float], u: tuple[float, float, float], v: tuple[float, float, float]):
    """Vertices and faces of a rectangle at ``center`` spanned by half-edge vectors ``u`` and ``v``."""
    c, uu, vv = np.array(center), np.array(u), np.array(v)
    verts = np.array([c - uu - vv, c + uu - vv, c + uu + vv, c - uu + vv], np.float32)
    faces = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    return verts, faces


def panel(name: str, material: str, names: list[str], center, u, v, seg: int) -> MeshObject:
    """A one-material rectangle as a static mesh object."""
    verts, faces = quad(center, u, v)
    return MeshObject(name, verts, faces, np.full(len(faces), names.index(material), np.int16), seg)


def wall_scene(distance_m: float, material: str = "concrete", ego_speed: float = 0.0) -> Scene:
    """A 400 m x 200 m wall facing the sensor (normal -x) at ``distance_m`` ahead of its start position."""
    base = Scene(objects=[])
    names = list(base.material_names)
    wall = panel("wall", material, names, (distance_m, 0.0, 0.0), (0, 200.0, 0), (0, 0, 100.0), 7)
    start = Pose.identity()
    ego = ConstantVelocity(start, np.array([ego_speed, 0.0, 0.0])) if ego_speed else StaticTrajectory(start)
    return Scene(objects=[wall], material_names=names, ego=ego, sensor_mount=Pose.identity())


def targets_scene(materials: list[str], distance_m: float, width_m: float = 1.0) -> Scene:
    """Panels of the given materials side by side (along y) facing the sensor at ``distance_m``."""
    base = Scene(objects=[])
    names = list(base.material_names)
    objs = []
    for i, mat in enumerate(materials):
        y = (i - (len(materials) - 1) / 2) * (width_m * 1.5)
        objs.append(
            panel(f"target_{mat}", mat, names, (distance_m, y, 0.0), (0, width_m / 2, 0), (0, 0, 2.0), 10 + i)
        )
    return Scene(
        objects=objs,
        material_names=names,
        ego=StaticTrajectory(Pose.identity()),
        sensor_mount=Pose.identity(),
    )


def glass_scene(distance_m: float) -> Scene:
    """A glass pane in front of the sensor, with nothing behind it."""
    base = Scene(objects=[])
    names = list(base.material_names)
    pane = panel("pane", "glass", names, (distance_m, 0.0, 0.0), (0, 5.0, 0), (0, 0, 5.0), 3)
    return Scene(
        objects=[pane],
        material_names=names,
        ego=StaticTrajectory(Pose.identity()),
        sensor_mount=Pose.identity(),
    )
