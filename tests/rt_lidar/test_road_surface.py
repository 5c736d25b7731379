"""The street's road as real streets have it (docs/realism.md, change 35): asphalt all round the sensor,
past both ends of the street, and asphalt's macroscopic roughness (Hapke 1984) in its grazing echo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.hapke import monostatic_reflectance, road_lobes, single_scattering_albedo
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.unreal_bridge.world import street_scene
from rt_lidar.unreal_bridge.world.street import GROUND_RUN_M, LAYOUTS


def _asphalt_cover(layout: str, y: float, length_m: float) -> list[tuple[float, float]]:
    """Merged x-intervals of the road's asphalt faces that reach the line at ``y``."""
    scene = street_scene(seed=1, length_m=length_m, layout=layout)
    asphalt = scene.material_names.index("asphalt")
    spans = []
    for obj in scene.objects:
        if obj.name != "road":
            continue
        tri = obj.vertices[obj.faces[obj.face_material == asphalt]]
        keep = (tri[:, :, 1].min(axis=1) <= y) & (tri[:, :, 1].max(axis=1) >= y)
        spans += list(zip(tri[keep, :, 0].min(axis=1), tri[keep, :, 0].max(axis=1), strict=True))
    merged: list[tuple[float, float]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1] + 1e-3:
            merged[-1] = (merged[-1][0], max(merged[-1][1], float(hi)))
        else:
            merged.append((float(lo), float(hi)))
    return merged


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_roads_asphalt_runs_past_both_ends_of_the_street(layout: str) -> None:
    # before change 35 the asphalt ended 30 m behind the start (x = -30) and 30 m past the end; the
    # ground beyond was the concrete slab, which decided the whole-turn horizon behind the sensor
    length = 200.0
    cover = _asphalt_cover(layout, -1.75, length)
    assert len(cover) == 1
    assert cover[0][0] <= -30.0 - GROUND_RUN_M + 1e-3
    assert cover[0][1] >= length + 30.0 + GROUND_RUN_M - 1e-3
    assert GROUND_RUN_M >= 150.0  # past every preset's road horizon


def test_the_ground_behind_the_start_of_the_drive_is_road() -> None:
    scene = street_scene(seed=1, ego_speed=0.0)
    road_id = next(o.segment_id for o in scene.objects if o.name == "road")
    pts = build_pipeline(load_preset("VLP-32C"), scene, seed=1).pipeline.scans(1)[0].points
    behind = pts[(pts["x"] < -35.0) & (pts["x"] > -80.0) & (np.abs(pts["y"]) < 4.0) & (pts["z"] < -1.5)]
    assert behind.size > 20
    assert np.mean(behind["segment"] == road_id) > 0.9  # was the ground's concrete


def test_macroscopic_roughness_lifts_the_grazing_echo_only() -> None:
    w = single_scattering_albedo(0.28)
    mu = np.cos(np.radians([30.0, 60.0, 80.0, 88.0]))
    smooth = monostatic_reflectance(mu, w, 0.0)
    rough = monostatic_reflectance(mu, w, 0.0, 20.0)
    assert np.array_equal(monostatic_reflectance(mu, w, 0.0, 0.0), smooth)
    assert rough[1] / smooth[1] == pytest.approx(1.0, abs=0.01)  # 60 deg: no shadow at phase angle 0
    assert 1.12 < rough[2] / smooth[2] < 1.25  # 80 deg: the lit facets face the beam more steeply
    assert 1.3 < rough[3] / smooth[3] < 1.45  # 88 deg (Hapke 1984 with theta-bar 20 deg: x1.37)
    rougher = monostatic_reflectance(mu, w, 0.0, 30.0)
    assert rougher[3] > rough[3]
    # head-on the tilted facets are seen at a slant: H at chi = 1 / sqrt(1 + pi tan^2 theta-bar)
    chi = 1.0 / np.sqrt(1.0 + np.pi * np.tan(np.radians(20.0)) ** 2)
    assert monostatic_reflectance(1.0, w, 0.0, 20.0) == pytest.approx(monostatic_reflectance(chi, w, 0.0))


def test_a_tables_roughness_reaches_the_echo_lobes(tmp_path: Path) -> None:
    # the table's asphalt keeps theta-bar 0 (change 35: the real scans' fall-off allows no brighter grazing
    # road); a table that gives it 20 deg gets Hapke's rough lobes, brighter at grazing incidence
    src = Path(__file__).resolve().parents[2] / "sensor_presets" / "materials.toml"
    text = src.read_text()
    assert "roughness_deg = 0.0\n" in text  # asphalt's
    path = tmp_path / "rough.toml"
    path.write_text(text.replace("roughness_deg = 0.0\n", "roughness_deg = 20.0\n", 1))
    table, rough_table = load_material_table(), load_material_table(path)
    rho = table.reflectance("asphalt", 905.0)
    smooth, rough = table.arrays(["asphalt"], 905.0), rough_table.arrays(["asphalt"], 905.0)
    assert (float(smooth.diffuse[0]), float(smooth.retro_gain[0])) == pytest.approx(
        road_lobes(rho, 0.0), rel=1e-5
    )
    want = road_lobes(rho, 0.0, roughness_deg=20.0)
    assert (float(rough.diffuse[0]), float(rough.retro_gain[0])) == pytest.approx(want, rel=1e-5)
    assert float(rough.retro_gain[0]) > 1.2 * float(smooth.retro_gain[0])  # the part kept at grazing


def test_roughness_needs_hapkes_model(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parents[2] / "sensor_presets" / "materials.toml"
    text = src.read_text().replace(
        "[materials.lane_paint]\n", "[materials.lane_paint]\nroughness_deg = 20.0\n", 1
    )
    bad = tmp_path / "m.toml"
    bad.write_text(text)
    with pytest.raises(ConfigError, match="roughness_deg without opposition_b0"):
        load_material_table(bad)
