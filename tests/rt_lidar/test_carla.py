"""CARLA's semantic lidar as hits: buffers laid out as the ``carla`` package documents them (no CARLA server
runs here), made by sweeping our world as CARLA sweeps; the frame and weather conversions against the
real ``carla`` package's types (its own peer venv); the one-line error without it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from peers import ROOT, run_peer_json

from rt_lidar.bridge.carla import (
    SEMANTIC_DETECTION,
    CarlaLidarSetup,
    carla_rotation_to_quaternion,
    carla_tag_materials,
    carla_weather_to_config,
    decode_semantic_lidar,
    hits_from_carla,
)
from rt_lidar.bridge.carla_world import MATERIAL_TAGS, semantic_lidar_tick
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge.world import World, street_scene
from rt_lidar.unreal_bridge.world.pose import quat_rotate

NAMES = load_material_table().names


def run_peer(script: str, *args: str) -> object:
    return run_peer_json("carla", ["-c", script, *args])


def test_decode_reads_the_documented_layout_and_turns_y_over_once():
    det = np.zeros(3, SEMANTIC_DETECTION)
    det["x"], det["y"], det["z"] = [10.0, 0.0, 3.0], [0.0, 5.0, -4.0], [1.0, 0.0, -1.0]
    det["cos_inc_angle"] = [0.9, 0.5, 0.25]
    det["object_idx"], det["object_tag"] = [7, 8, 9], [1, 24, 14]
    sweep = decode_semantic_lidar(det.tobytes(), [2, 0, 1])
    assert det.itemsize == 24
    assert sweep.points.tolist() == [[10.0, 0.0, 1.0], [0.0, -5.0, 0.0], [3.0, 4.0, -1.0]]  # y right -> left
    assert sweep.channel.tolist() == [0, 0, 2] and sweep.object_idx.tolist() == [7, 8, 9]
    with pytest.raises(ValueError, match="channel counts add up to 2, raw_data holds 3"):
        decode_semantic_lidar(det.tobytes(), [1, 1])
    with pytest.raises(ValueError, match="24-byte points"):
        decode_semantic_lidar(det.tobytes()[:-1], [3])


def test_tag_tables_of_both_carla_versions():
    new, old = carla_tag_materials(NAMES), carla_tag_materials(NAMES, "0.9.13")
    assert (
        NAMES[new[1]] == "asphalt" and NAMES[new[24]] == "lane_paint" and NAMES[new[14]] == "car_paint_white"
    )
    assert (
        NAMES[old[7]] == "asphalt" and NAMES[old[6]] == "lane_paint" and NAMES[old[10]] == "car_paint_white"
    )
    assert NAMES[new[200]] == "concrete"  # a tag no table lists


def test_setup_serves_a_non_uniform_beam_table_within_half_a_channel():
    preset = load_preset("HDL-64E")
    setup = CarlaLidarSetup.of_preset(preset)
    spacing = (setup.upper_fov - setup.lower_fov) / (setup.channels - 1)
    err = setup.vertical_error_deg(preset)
    assert 0 < err <= spacing / 2 + 1e-9
    finer = CarlaLidarSetup.of_preset(preset, vertical_oversample=4)
    assert finer.channels == 4 * 63 + 1 and finer.vertical_error_deg(preset) <= err / 2
    attrs = setup.attributes()
    assert attrs["channels"] == "64" and float(attrs["rotation_frequency"]) == pytest.approx(10.0)


@pytest.mark.parametrize("preset_name", ["VLP-16", "HDL-64E"])
def test_carla_shaped_buffers_from_our_world_give_the_worlds_hits(preset_name):
    """A whole rotation in one tick (sim at the rotation rate), the ego standing: every firing of the
    preset's scan served from the CARLA-shaped buffer matches the in-process cast of the same firing."""
    preset = load_preset(preset_name)
    world = World(street_scene(seed=2, ego_speed=0.0))
    setup = CarlaLidarSetup.of_preset(preset)
    dt = 1.0 / setup.rotation_frequency
    tick = semantic_lidar_tick(world, setup, t_s=1.0, dt_s=dt, start_deg=0.0)
    sweep = decode_semantic_lidar(tick.raw_data, tick.channel_counts)
    t0 = 1_000_000_000
    firings = firings_between(preset, t0, t0 + round(dt * 1e9))
    got = hits_from_carla(sweep, firings, preset, setup, carla_tag_materials(NAMES))
    truth = WorldSource(world, preset.range.max_m, np.zeros(len(world.material_names), np.float32)).hits(
        firings, t0, t0 + round(dt * 1e9)
    )
    both = np.isfinite(got.range_m) & np.isfinite(truth.range_m)
    assert both.mean() > 0.8
    assert np.isfinite(got.range_m).sum() == pytest.approx(np.isfinite(truth.range_m).sum(), rel=0.05)
    assert np.median(np.abs(got.range_m[both] - truth.range_m[both])) < 0.1
    assert np.median(np.abs(got.cos_incidence[both] - truth.cos_incidence[both])) < 0.05
    # a tag is a class, not a material (brick and plaster are both Building): the material read is the
    # tag table's for the class of the surface each firing hit
    lut = carla_tag_materials(NAMES)
    class_material = lut[[MATERIAL_TAGS[m] for m in np.array(world.material_names)[truth.material[both]]]]
    assert np.mean(got.material[both] == class_material) > 0.95
    # the same objects: CARLA's object index is the world's object, our segment its segment id
    seg = np.array([o.segment_id for o in world.scene.objects], np.uint32)
    assert np.mean(seg[got.segment[both]] == truth.segment[both]) > 0.9


def test_weather_maps_on_airsims_scale():
    assert carla_weather_to_config(0, 0, 0) is None
    c = carla_weather_to_config(precipitation=100, fog_density=50, wetness=20, precipitation_deposits=90)
    assert c is not None and c.rain_mm_h == pytest.approx(50.0) and c.road_wetness == pytest.approx(0.9)
    assert c.fog_visibility_m == pytest.approx(1000.0 * (20.0 / 1000.0) ** 0.5)


PEER_TYPES = r"""
import json, carla
rots = [(0, 0, 30), (0, 10, 0), (5, 0, 0), (5, 10, 30), (-20, 35, -120)]
pts = [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (3.0, -2.0, 0.5)]
out = {"rot": []}
for roll, pitch, yaw in rots:
    t = carla.Transform(carla.Location(0, 0, 0), carla.Rotation(pitch=pitch, yaw=yaw, roll=roll))
    out["rot"].append([[v.x, v.y, v.z] for v in (t.transform(carla.Location(*p)) for p in pts)])
w = carla.WeatherParameters.HardRainNoon
out["weather"] = [w.precipitation, w.fog_density, w.wetness, w.precipitation_deposits]
d = carla.SemanticLidarDetection()
out["detection"] = [a for a in ("point", "cos_inc_angle", "object_idx", "object_tag") if hasattr(d, a)]
print(json.dumps(out))
"""


def test_frames_and_weather_against_the_carla_package():
    seen = run_peer(PEER_TYPES)
    assert isinstance(seen, dict)
    assert seen["detection"] == ["point", "cos_inc_angle", "object_idx", "object_tag"]
    rots = [(0, 0, 30), (0, 10, 0), (5, 0, 0), (5, 10, 30), (-20, 35, -120)]
    pts = np.array([(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (3.0, -2.0, 0.5)])
    flip = np.array([1.0, -1.0, 1.0])
    for (roll, pitch, yaw), carla_world in zip(rots, seen["rot"], strict=True):
        q = carla_rotation_to_quaternion(roll, pitch, yaw)
        ours = quat_rotate(q, pts * flip) * flip  # into our axes, rotate, back to CARLA's
        assert np.allclose(ours, carla_world, atol=1e-4), (roll, pitch, yaw)
    p, fog, wet, deposits = seen["weather"]
    c = carla_weather_to_config(p, fog, wet, deposits)
    assert (
        c is not None
        and c.rain_mm_h == pytest.approx(p / 2)
        and c.road_wetness == pytest.approx(deposits / 100)
    )


def test_run_carla_without_the_package_names_the_extra(tmp_path):
    blocker = "import sys; sys.modules['carla'] = None; from rt_lidar.cli.main import main; "
    proc = subprocess.run(
        [sys.executable, "-c", blocker + "sys.exit(main(sys.argv[1:]))", "run", "--carla", "127.0.0.1:2000"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'rt-lidar[carla]'" in lines[0]


def test_live_loop_against_a_stand_in_server(tmp_path, monkeypatch):
    """``run --carla``'s loop over a stand-in ``carla`` module that sweeps the embedded street as CARLA's
    semantic lidar does (tests/rt_lidar/carla_standin): synchronous mode set and given back, the lidar
    spawned from the preset and removed, the schedule's phase put where CARLA sweeps, every scan written."""
    spec = importlib.util.spec_from_file_location(
        "carla", Path(__file__).with_name("carla_standin") / "carla.py"
    )
    assert spec is not None and spec.loader is not None
    carla = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "carla", carla)  # gone again after the test
    spec.loader.exec_module(carla)

    from rt_lidar.config import RunConfig
    from rt_lidar.session.carla_live import run_carla

    carla.WORLDS.clear()
    opts = RunConfig(command="run", preset="VLP-16", frames=3, sim_hz=20.0, out=str(tmp_path), progress=False)
    summary = run_carla(opts, "127.0.0.1:2000")
    world = carla.WORLDS[0]
    sensor = next(a for a in world.actors if isinstance(a, carla.Sensor))
    assert sensor.destroyed and sensor.callback is None and world.settings.synchronous_mode is False
    assert sensor.attributes["channels"] == "16" and float(sensor.attributes["rotation_frequency"]) == 10.0
    assert summary["frames"] == 3 and len(list((tmp_path / "scans").glob("*.pcd"))) == 3
    # half a rotation a tick, CARLA's sweep started at 37 deg: the phase found puts every firing where
    # a tick swept (else half of them would find no point)
    # (measured: 6.5 % of the firings without a return aligned, 24 % with the schedule's own phase)
    assert summary["drop_fraction"] < 0.12, summary["drop_fraction"]
    assert summary["carla"]["vertical_error_deg"] == 0.0
