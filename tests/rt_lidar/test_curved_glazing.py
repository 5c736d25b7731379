"""Issue 40: car glazing is curved as real glazing is (unreal_bridge.world.car_glazing): across a windscreen
the normal turns, so beams meet it at different incidences (its Fresnel transmission follows) and its
mirror rays, the ghosts' paths, fan out instead of leaving in one direction."""

from __future__ import annotations

import numpy as np

from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.sensor.glazing import pane_transmission
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.scan_pattern import Firings
from rt_lidar.unreal_bridge.world import Pose, Scene, StaticTrajectory, World
from rt_lidar.unreal_bridge.world.car_glazing import (
    SIDE_RADIUS_M,
    WINDSCREEN_RADIUS_M,
    Y_LOW,
    Y_TOP,
    side_half_width,
)
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.props import add_car

NAMES = list(Scene(objects=[]).material_names)


def _car_world(mount_z: float = 1.17, yaw: float = np.pi) -> World:
    """A white car 8 m ahead turned ``yaw`` (pi: facing the sensor, its windscreen towards it), the sensor
    ``mount_z`` up."""
    b = MeshBuilder()
    add_car(b, "car_paint_white")
    car = b.build("car", 5, StaticTrajectory(Pose.from_xyz_rpy(8.0, 0.0, 0.0, yaw=yaw)))
    scene = Scene(
        objects=[car],
        material_names=NAMES,
        ego=StaticTrajectory(Pose.identity()),
        sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, mount_z),
    )
    return World(scene)


def test_the_side_glass_leans_in_and_bulges_out() -> None:
    t = np.linspace(0.0, 1.0, 11)
    y = side_half_width(t)
    assert y[0] == Y_LOW and y[-1] == Y_TOP
    chord_line = Y_LOW + (Y_TOP - Y_LOW) * t
    assert np.all(y[1:-1] > chord_line[1:-1])  # bulging outwards, on its arc
    assert 1.0 < SIDE_RADIUS_M < 2.0 and 2.0 <= WINDSCREEN_RADIUS_M <= 4.0


def test_a_windscreens_mirror_rays_fan_out_across_its_width() -> None:
    """Level parallel beams along the car's axis meet its windscreen across 1.2 m of its width: the
    facets' normals turn by +-13 deg there (a 2.5 m radius), so the mirror rays, sent up over the raked
    glass, leave over more than 30 deg of azimuth (14 deg apart at the ends) where a flat pane sends them
    all one way."""
    world = _car_world()
    y = np.linspace(-0.6, 0.6, 61)
    org = np.stack([np.zeros_like(y), y, np.full_like(y, 1.17)], 1).astype(np.float32)
    dirs = np.tile(np.array([[1.0, 0.0, 0.0]], np.float32), (len(y), 1))
    hits = world.cast(org, dirs, 0.0, 50.0)
    glass = hits.material == NAMES.index("car_glass")
    assert glass.all()
    n = hits.normal.astype(np.float64)
    mirror = dirs - 2.0 * np.sum(dirs * n, axis=1, keepdims=True) * n
    az = np.degrees(np.arctan2(mirror[:, 1], mirror[:, 0]))  # (up and on over the raked glass)
    assert az.max() - az.min() > 30.0
    assert np.degrees(np.arccos(np.clip(mirror[0] @ mirror[-1], -1.0, 1.0))) > 12.0
    assert np.all(np.diff(az) >= -1.0)  # turning steadily across the pane (a facet's two triangles: <1 deg)


def test_the_fresnel_transmission_follows_the_curved_panes_incidence() -> None:
    """A car turned 45 deg from the sensor's view: level beams fanned across its windscreen meet it at
    incidence cosines spread over more than 0.2 (0.32; a flat pane's would spread over ~0.06: the beams'
    own fan), and the caster's two-way transmission through it is at most the Fresnel pane's at each facet's
    own incidence (the caster reads the facets' normals)."""
    yaw = np.pi - np.pi / 4
    world = _car_world(yaw=yaw)
    az = np.linspace(0.0, 15.0, 61)
    n = len(az)
    firings = Firings(
        ring=np.zeros(n, np.uint16),
        t_ns=np.arange(n, dtype=np.int64) * 1000,
        azimuth_deg=az,
        elevation_deg=np.zeros(n),
        column=np.arange(n, dtype=np.int64),
    )
    trans = load_material_table().arrays(NAMES, 905.0).transmission
    hits = WorldSource(world, 100.0, trans).hits(firings, 0, n * 1000)
    a = np.radians(az)
    met = np.where(np.isfinite(hits.glass_range_m), hits.glass_range_m, 0.0)
    pos = met[:, None] * np.stack([np.cos(a), np.sin(a)], 1)  # where each beam met glass
    rel = pos - np.array([8.0, 0.0])
    x_car = rel[:, 0] * np.cos(yaw) + rel[:, 1] * np.sin(yaw)
    y_car = -rel[:, 0] * np.sin(yaw) + rel[:, 1] * np.cos(yaw)
    ws = (hits.glass_material == NAMES.index("car_glass")) & (x_car > 0.85) & (np.abs(y_car) < 0.78)
    assert ws.sum() > 20  # the windscreen's beams (not the front side window's)
    cos = hits.glass_cos[ws].astype(np.float64)
    assert cos.max() - cos.min() > 0.2
    one_way = pane_transmission(float(trans[NAMES.index("car_glass")]), cos)
    assert np.all(hits.glass_transmission[ws] <= one_way**2 * 1.001)
