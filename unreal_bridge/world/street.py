"""The default procedural street: road, markings, kerbs, sidewalks, glazed buildings, parked and moving
cars, street lights, signs, trees and rocks. Deterministic for a seed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import WorldError
from .geometry import MeshBuilder
from .pose import Pose
from .props import (
    CAR_LENGTH,
    CAR_WIDTH,
    add_building,
    add_car,
    add_rock,
    add_sign,
    add_street_light,
    add_tree,
)
from .scene import MeshObject, Scene
from .trajectory import ConstantVelocity, Looping, StaticTrajectory, Trajectory, WaypointTrajectory

__all__ = ["EGO_LANE_Y", "EGO_SPEED", "LANE_WIDTH", "LAYOUTS", "RESIDENTIAL", "street_scene"]

LANE_WIDTH = 3.5
EGO_LANE_Y = -LANE_WIDTH / 2  # right-hand traffic, driving towards +x
EGO_SPEED = 10.0
PARKING_Y = LANE_WIDTH + 1.1
KERB_Y = LANE_WIDTH + 2.2
SIDEWALK_Z = 0.15
FACADE_Y = 10.0
PAINTS = ("car_paint_red", "car_paint_white", "car_paint_black", "car_paint_silver")
PAINT_SHARES = (0.23, 0.36, 0.30, 0.11)
"""How often each paint is drawn. Of new cars sold worldwide 37 % are white and 17 % black (The
Economist, 'The art of reflection', 2018, from paint makers' colour-popularity surveys) and about 11 %
silver (the same surveys, as we recall them): silver is its own metallic paint (flakes under the coat);
dark grey and blue join black (carbon-black pigmented dark tones absorb the near infrared alike); the
coloured rest is red. (Before the metallic paint, silver joined white: 0.47.)"""
IR_WINDSCREEN_SHARE = 0.25
"""Share of cars with a NIR-reflective (silver-coated athermic) windscreen, ``car_glass_ir``: an option
or standard fit on many European makes (heated or solar-control 'climate' windscreens); set by hand,
no census of the fleet could be read here."""
PRIVACY_GLASS_SHARE = 0.5
"""Share of cars with factory privacy glass behind the B-pillar, ``car_glass_privacy`` ('standard on
the rear half of many new vehicles': SUVs, estates, people carriers); set by hand."""
LAYOUTS = ("demo", "residential")
"""The street's layouts: the demo's (parked cars with gaps, 2.85 m and 6.35 m beside the sensor's
path, a pulling-out and an oncoming car) and a residential street like KITTI's frame 000008."""


@dataclass(frozen=True)
class ResidentialLayout:
    """A residential street: cars parked nose to tail along both kerbs close to the one lane the sensor
    drives, a car ahead in it, no lane markings. Measured on KITTI's frame 000008 (HDL-64E, camera 2's
    crop; returns 0.2-1.8 m above the fitted road): the near parked cars' sides lie a median 2.06 m to
    the left of the sensor 2-5 m ahead (5th percentile 1.68 m) and 3.32 m to the right 5-8 m ahead; a
    car ahead at 12-14 m; non-ground returns within 10 m fill 24 % of the crop's rays, within 20 m 44 %
    (docs/realism.md, change 30). The street is centred on y = 0, the rows ``kerb_gap_m`` inside the
    kerbs."""

    left_gap_m: float = 2.0
    right_gap_m: float = 3.3
    kerb_gap_m: float = 0.2
    bumper_gap_m: tuple[float, float] = (0.5, 1.2)
    ahead_x_m: float = 14.0

    @property
    def row_y(self) -> float:
        """|y| of both rows' centre lines."""
        return (self.left_gap_m + self.right_gap_m) / 2 + CAR_WIDTH / 2

    @property
    def ego_y(self) -> float:
        """The sensor's path."""
        return -self.row_y + CAR_WIDTH / 2 + self.right_gap_m

    @property
    def kerb_y(self) -> float:
        """|y| of the kerbs."""
        return self.row_y + CAR_WIDTH / 2 + self.kerb_gap_m


RESIDENTIAL = ResidentialLayout()


class _Objects:
    """Collects MeshObjects with segment ids 1..255 in creation order."""

    def __init__(self) -> None:
        self.items: list[MeshObject] = []

    def add(
        self, b: MeshBuilder, name: str, pose: Pose | None = None, trajectory: Trajectory | None = None
    ) -> None:
        traj = trajectory if trajectory is not None else StaticTrajectory(pose or Pose.identity())
        self.items.append(b.build(name, 1 + len(self.items) % 255, traj))


GROUND_RUN_M = 170.0
"""How far the road's asphalt and the ground run past both ends of the street (issue 40: the road
horizon). A real street's road goes on past its last building; the rays behind the sensor at the
start of the drive meet road, not the ground's concrete (docs/realism.md, change 35)."""


def _road(objs: _Objects, x0: float, x1: float, kerb_y: float = KERB_Y, markings: bool = True) -> None:
    b = MeshBuilder()
    b.grid(x0, x1, -kerb_y, kerb_y, 0.0, 0.5, "asphalt")
    b.grid(x0 - GROUND_RUN_M, x0, -kerb_y, kerb_y, 0.0, 5.0, "asphalt")
    b.grid(x1, x1 + GROUND_RUN_M, -kerb_y, kerb_y, 0.0, 5.0, "asphalt")
    objs.add(b, "road")
    if markings:
        _markings(objs, x0, x1)
    _sidewalks_and_ground(objs, x0, x1, kerb_y)


def _markings(objs: _Objects, x0: float, x1: float) -> None:
    b = MeshBuilder()
    z, w = 0.004, 0.15
    for x in np.arange(x0, x1 - 3.0, 9.0):
        b.quad([(x, -w / 2, z), (x + 3.0, -w / 2, z), (x + 3.0, w / 2, z), (x, w / 2, z)], "lane_paint")
    for y in (-LANE_WIDTH, LANE_WIDTH):
        for x in np.arange(x0, x1, 10.0):
            xe = min(x + 10.0, x1)
            b.quad(
                [(x, y - w / 2, z), (xe, y - w / 2, z), (xe, y + w / 2, z), (x, y + w / 2, z)], "lane_paint"
            )
    objs.add(b, "lane_markings")


def _sidewalks_and_ground(objs: _Objects, x0: float, x1: float, kerb_y: float) -> None:
    for side, s in (("right", -1.0), ("left", 1.0)):
        b = MeshBuilder()
        b.box(((x0 + x1) / 2, s * (kerb_y + 0.075), SIDEWALK_Z / 2), (x1 - x0, 0.15, SIDEWALK_Z), "concrete")
        walk = FACADE_Y - kerb_y - 0.15
        b.box(
            ((x0 + x1) / 2, s * (kerb_y + 0.15 + walk / 2), SIDEWALK_Z / 2 - 0.005),
            (x1 - x0, walk, SIDEWALK_Z - 0.01),
            "concrete",
        )
        objs.add(b, f"sidewalk_{side}")
    b = MeshBuilder()
    # the ground runs GROUND_RUN_M past both ends of the street, so that rays behind and ahead find
    # ground at the ranges real streets give it (issue 40: the road horizon, docs/realism.md)
    b.box(((x0 + x1) / 2, 0.0, -0.03), (x1 - x0 + 2 * GROUND_RUN_M, 2 * (FACADE_Y + 30.0), 0.04), "concrete")
    objs.add(b, "ground")


def _buildings(objs: _Objects, rng: np.random.Generator, x0: float, x1: float) -> None:
    for side, s in (("right", -1.0), ("left", 1.0)):
        x, k = x0, 0
        while x < x1:
            width = float(rng.uniform(12.0, 24.0))
            depth = float(rng.uniform(10.0, 14.0))
            floors = int(rng.integers(3, 7))
            wall = "brick" if rng.random() < 0.5 else "building_plaster"
            b = MeshBuilder()
            add_building(b, width, depth, floors, wall)
            # local facade frame: y = 0 on the facade, +y into the building
            pose = (
                Pose.from_xyz_rpy(x, FACADE_Y, 0.0)
                if s > 0
                else Pose.from_xyz_rpy(x + width, -FACADE_Y, 0.0, yaw=np.pi)
            )
            objs.add(b, f"building_{side}_{k}", pose)
            x += width + float(rng.uniform(1.5, 4.0))
            k += 1


def _car(rng: np.random.Generator) -> MeshBuilder:
    """A car of the street: its paint and glazing drawn from ``rng`` at the shares above."""
    paint = PAINTS[int(rng.choice(len(PAINTS), p=PAINT_SHARES))]
    windscreen = "car_glass_ir" if rng.random() < IR_WINDSCREEN_SHARE else "car_glass"
    rear = "car_glass_privacy" if rng.random() < PRIVACY_GLASS_SHARE else "car_glass"
    b = MeshBuilder()
    add_car(b, paint, windscreen, rear)
    return b


def _parked_cars(objs: _Objects, rng: np.random.Generator, x0: float, x1: float, keep_free: float) -> None:
    for side, s in (("right", -1.0), ("left", 1.0)):
        x, k = x0, 0
        while x < x1:
            if not (s < 0 and abs(x - keep_free) < 8.0):
                yaw = 0.0 if s < 0 else np.pi
                objs.add(
                    _car(rng), f"car_parked_{side}_{k}", Pose.from_xyz_rpy(x, s * PARKING_Y, 0.0, yaw=yaw)
                )
                k += 1
            x += CAR_LENGTH + float(rng.uniform(0.8, 4.0))


def _residential_cars(objs: _Objects, rng: np.random.Generator, x0: float, x1: float, speed: float) -> None:
    lay = RESIDENTIAL
    for side, y, yaw in (("right", -lay.row_y, 0.0), ("left", lay.row_y, np.pi)):
        x, k = x0, 0
        while x < x1:
            objs.add(_car(rng), f"car_parked_{side}_{k}", Pose.from_xyz_rpy(x, y, 0.0, yaw=yaw))
            k += 1
            x += CAR_LENGTH + float(rng.uniform(*lay.bumper_gap_m))
    ahead = ConstantVelocity(Pose.from_xyz_rpy(lay.ahead_x_m, lay.ego_y, 0.0), (speed, 0.0, 0.0))
    objs.add(_car(rng), "car_moving_0", trajectory=ahead)


def _moving_cars(objs: _Objects, rng: np.random.Generator, length_m: float, pull_out_x: float) -> None:
    cars = [_car(rng) for _ in range(3)]
    ahead = ConstantVelocity(Pose.from_xyz_rpy(30.0, EGO_LANE_Y, 0.0), (8.0, 0.0, 0.0))
    objs.add(cars[0], "car_moving_0", trajectory=ahead)
    oncoming = ConstantVelocity(
        Pose.from_xyz_rpy(length_m - 20.0, -EGO_LANE_Y, 0.0, yaw=np.pi), (-11.0, 0.0, 0.0)
    )
    objs.add(cars[1], "car_moving_1", trajectory=oncoming)
    pull_out = WaypointTrajectory(
        times=[0.0, 2.0, 5.0, 60.0],
        positions=[
            (pull_out_x - 1.0, -PARKING_Y, 0.0),
            (pull_out_x, -PARKING_Y, 0.0),
            (pull_out_x + 12.0, EGO_LANE_Y, 0.0),
            (pull_out_x + 12.0 + 7.0 * 55.0, EGO_LANE_Y, 0.0),
        ],
    )
    objs.add(cars[2], "car_moving_2", trajectory=pull_out)


def _furniture(objs: _Objects, rng: np.random.Generator, x0: float, x1: float) -> None:
    for k, x in enumerate(np.arange(x0 + 5.0, x1, 30.0)):
        for side, s in (("right", -1.0), ("left", 1.0)):
            b = MeshBuilder()
            add_street_light(b, -s)
            objs.add(
                b,
                f"street_light_{side}_{k}",
                Pose.from_xyz_rpy(float(x) + 15.0 * (s > 0), s * 6.3, SIDEWALK_Z),
            )
    for k, x in enumerate(np.arange(x0 + 25.0, x1, 50.0)):
        b = MeshBuilder()
        add_sign(b)
        objs.add(b, f"sign_{k}", Pose.from_xyz_rpy(float(x), -6.7, SIDEWALK_Z))
    for side, s in (("right", -1.0), ("left", 1.0)):
        for k, x in enumerate(np.arange(x0 + 12.0, x1, 18.0)):
            b = MeshBuilder()
            add_tree(b, rng)
            jitter = float(rng.uniform(-2.0, 2.0))
            objs.add(b, f"tree_{side}_{k}", Pose.from_xyz_rpy(float(x) + jitter, s * 8.4, SIDEWALK_Z))
    for k in range(2):
        b = MeshBuilder()
        add_rock(b, rng)
        x = float(rng.uniform(x0 + 10.0, x1 - 10.0))
        s = 1.0 if k == 0 else -1.0
        yaw = float(rng.uniform(0, 2 * np.pi))
        objs.add(b, f"rock_{k}", Pose.from_xyz_rpy(x, s * 9.3, SIDEWALK_Z, yaw=yaw))


def street_scene(
    seed: int = 0,
    length_m: float = 200.0,
    ego_speed: float = EGO_SPEED,
    loop: bool = True,
    layout: str = "demo",
) -> Scene:
    """The default street, about ``length_m`` long along +x, ego driving in the right lane from x = 0.

    The ego starts at (0, -1.75, 0) heading +x at ``ego_speed`` m/s; the lidar sits 1.8 m above the ground.
    With ``loop`` the drive (ego and moving cars) replays each time the ego reaches ``length_m``.
    ``layout`` "residential" parks cars nose to tail along both sides of the ego's lane
    (:class:`ResidentialLayout`: the ego drives at y = ``RESIDENTIAL.ego_y``, a car ahead at the ego's
    speed); "demo" is the default street.
    """
    if layout not in LAYOUTS:
        raise WorldError(f"street layout '{layout}' unknown; known: {', '.join(LAYOUTS)}")
    rng = np.random.default_rng(seed)
    x0, x1 = -30.0, float(length_m) + 30.0
    pull_out_x = min(70.0, 0.4 * length_m)
    objs = _Objects()
    if layout == "residential":
        _road(objs, x0, x1, RESIDENTIAL.kerb_y, markings=False)
    else:
        _road(objs, x0, x1)
    _buildings(objs, rng, x0, x1)
    if layout == "residential":
        _residential_cars(objs, rng, x0 + 5.0, x1 - 5.0, ego_speed)
    else:
        _parked_cars(objs, rng, x0 + 5.0, x1 - 5.0, pull_out_x)
        _moving_cars(objs, rng, float(length_m), pull_out_x)
    _furniture(objs, rng, x0, x1)
    ego_y = RESIDENTIAL.ego_y if layout == "residential" else EGO_LANE_Y
    ego: Trajectory = ConstantVelocity(Pose.from_xyz_rpy(0.0, ego_y, 0.0), (ego_speed, 0.0, 0.0))
    if loop and ego_speed > 0:
        period = float(length_m) / ego_speed
        ego = Looping(ego, period)
        for obj in objs.items:
            if not isinstance(obj.trajectory, StaticTrajectory):
                obj.trajectory = Looping(obj.trajectory, period)
    return Scene(objects=objs.items, ego=ego, sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, 1.8))
