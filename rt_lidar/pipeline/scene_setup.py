"""A scene built from a :class:`~rt_lidar.config.SceneSetup`: its seed, a street's length and ego speed,
a mesh file as one named object, the ego's motion and the sensor's mount (what a dataset run sets).

The dataset writer and ``rt-lidar demo --config RUN/config.json`` build a run's world here, so a
dataset run re-runs to the same scans."""

from __future__ import annotations

import numpy as np

from rt_lidar.config import EgoConfig, MountConfig, SceneSetup
from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.scene_files import read_mesh_scene
from rt_lidar.unreal_bridge.world import (
    SCENES,
    ConstantVelocity,
    Pose,
    Scene,
    StaticTrajectory,
    Trajectory,
    WaypointTrajectory,
    street_scene,
)
from rt_lidar.unreal_bridge.world.street import EGO_SPEED

__all__ = ["ego_trajectory", "mount_pose", "setup_scene"]

STREET_LENGTH_M = 200.0
"""``street_scene``'s default length."""


def mount_pose(m: MountConfig) -> Pose:
    """The mount as an ego <- sensor :class:`Pose`."""
    r, p, y = np.radians(m.rpy_deg)
    return Pose.from_xyz_rpy(*m.xyz, roll=float(r), pitch=float(p), yaw=float(y))


def ego_trajectory(e: EgoConfig) -> Trajectory:
    """The ego's motion of ``e``."""
    yaw = float(np.radians(e.yaw_deg))
    start = Pose.from_xyz_rpy(*e.start, yaw=yaw)
    if e.kind == "static":
        return StaticTrajectory(start)
    if e.kind == "constant_velocity":
        v = (e.speed_mps * np.cos(yaw), e.speed_mps * np.sin(yaw), 0.0)
        return ConstantVelocity(start, v, yaw_rate=float(np.radians(e.yaw_rate_deg_s)))
    return WaypointTrajectory(e.times, e.positions)


def setup_scene(name: str, seed: int, setup: SceneSetup) -> Scene:
    """The scene ``name`` (a ``SCENES`` name, or a mesh file's path with ``setup.mesh_name``) of the
    run's ``seed``, set up as ``setup`` says."""
    scene_seed = seed if setup.seed is None else setup.seed
    if setup.mesh_name is not None:
        objects = read_mesh_scene(
            name, "scene", name=setup.mesh_name, material=setup.material, segment_id=1, y_up=setup.y_up
        )
        scene = Scene(objects=objects)
    elif name == "street":
        length = STREET_LENGTH_M if setup.length_m is None else setup.length_m
        speed = EGO_SPEED if setup.ego_speed is None else setup.ego_speed
        scene = street_scene(scene_seed, length, speed)
    elif setup.length_m is not None or setup.ego_speed is not None:
        raise ConfigError(f"scene_setup: length_m and ego_speed apply to the street only, not '{name}'")
    elif name in SCENES:
        scene = SCENES[name](seed=scene_seed)
    else:
        known = ", ".join(sorted(SCENES))
        raise ConfigError(f"scene_setup: unknown scene '{name}'; known: {known} (a mesh needs mesh_name)")
    if setup.ego is not None:
        scene.ego = ego_trajectory(setup.ego)
    if setup.mount is not None:
        scene.sensor_mount = mount_pose(setup.mount)
    return scene
