"""The LineTrace seed's rain test scene: a red sedan, a rock and a building in front of a VLP-16."""

from __future__ import annotations

import math

import numpy as np

from rt_lidar.unreal_bridge.world import Pose, Scene, StaticTrajectory
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.props import add_building, add_car, add_rock

__all__ = ["SENSOR_HEIGHT_M", "rain_test_scene"]

SENSOR_HEIGHT_M = 1.8


def rain_test_scene(
    car_m: float = 8.0,
    rock_m: float = 20.0,
    building_corner: tuple[float, float] = (45.0, 25.0),
    building_turn_deg: float = 45.0,
    wall: str = "brick",
    ground_m: float = 120.0,
    seed: int = 0,
) -> Scene:
    """A flat asphalt ground, a red sedan ``car_m`` ahead (side on), a rock ``rock_m`` ahead and to the
    right, and a 40 m wide, four-storey building (``wall`` material, brick by default: about 7 % at 905 nm)
    whose facade starts at ``building_corner`` and is turned ``building_turn_deg`` away from facing the
    sensor, so it spans about 51 m to 73 m: objects in the near (< 10 m), mid (10-50 m) and far
    (> 50 m) bands of the seed's experiment. The facade's returns run from ~2.6x the VLP-16's threshold
    down to below it, as the far objects of a real scene do."""
    rng = np.random.default_rng(seed)
    objs = []
    g = MeshBuilder()
    g.grid(-ground_m, ground_m, -ground_m, ground_m, 0.0, 10.0, "asphalt")
    objs.append(g.build("ground", 1, StaticTrajectory(Pose.identity())))
    car = MeshBuilder()
    add_car(car, "car_paint_red")
    objs.append(
        car.build("red_sedan", 2, StaticTrajectory(Pose.from_xyz_rpy(car_m, 1.0, 0.0, yaw=math.pi / 2)))
    )
    rock = MeshBuilder()
    add_rock(rock, rng)
    objs.append(rock.build("rock", 3, StaticTrajectory(Pose.from_xyz_rpy(rock_m, -3.0, 0.0))))
    bld = MeshBuilder()
    add_building(bld, 40.0, 15.0, 4, wall)
    bx, by = building_corner
    pose = Pose.from_xyz_rpy(bx, by, 0.0, yaw=-math.pi / 2 + math.radians(building_turn_deg))
    objs.append(bld.build("building", 4, StaticTrajectory(pose)))
    return Scene(objects=objs, sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, SENSOR_HEIGHT_M))
