"""Brick and render facades are rough surfaces: they keep their echo at grazing incidence (docs/realism.md,
change 32). A Lambertian facade (S = rho cos) seen along the street at 40-60 m (cos 0.07-0.1) fell below
the HDL-64E's threshold, and those rays were a sixth of the simulated far-object holes in KITTI's crop."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.hapke import monostatic_reflectance, road_lobes, single_scattering_albedo
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.unreal_bridge.world import Pose, Scene, StaticTrajectory
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder

FACADES = ("brick", "building_plaster")


@pytest.mark.parametrize("name", FACADES)
def test_facades_take_hapkes_rough_surface_lobes(name: str) -> None:
    table = load_material_table()
    b0 = table.materials[name]["opposition_b0"]
    assert b0 is not None
    rho = table.reflectance(name, 905.0)
    m = table.arrays([name], 905.0)
    assert (float(m.diffuse[0]), float(m.retro_gain[0])) == pytest.approx(road_lobes(rho, b0), rel=1e-5)
    assert float(m.retro_exponent[0]) == 0.0
    w = single_scattering_albedo(rho)
    grazing = float(m.diffuse[0]) * 0.1 + float(m.retro_gain[0])
    assert grazing == pytest.approx(float(monostatic_reflectance(0.1, w, b0)), rel=0.05)
    assert grazing > 2.5 * rho * 0.1  # a Lambertian facade's S at cos 0.1


def _wall_points(material: str) -> np.ndarray:
    """One HDL-64E scan (1.73 m up) of a 3 m high wall 20-60 m ahead whose face runs along the sensor's
    path 3.85 m to its right: the points of the wall."""
    names = list(Scene(objects=[]).material_names)
    b = MeshBuilder()
    b.box((40.0, 0.0, 1.5), (40.0, 0.3, 3.0), material)
    scene = Scene(
        objects=[b.build("wall", 7, StaticTrajectory(Pose.from_xyz_rpy(0.0, -4.0, 0.0)))],
        material_names=names,
        ego=StaticTrajectory(Pose.identity()),
        sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, 1.73),
    )
    pts = build_pipeline(load_preset("HDL-64E"), scene, seed=2).pipeline.scans(1)[0].points
    return pts[pts["segment"] == 7]


@pytest.mark.parametrize("name", FACADES)
def test_a_facade_along_the_street_returns_at_grazing_incidence(name: str) -> None:
    x = _wall_points(name)["x"]
    # 40-50 m: cos 0.08-0.1; Lambertian brick returned 0 points there, render 5 (now 70 each)
    assert ((x >= 40) & (x < 50)).sum() > 40
    # 30-40 m: Lambertian brick 64, render 133 (now 154 each)
    assert ((x >= 30) & (x < 40)).sum() > 120
