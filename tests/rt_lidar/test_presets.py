"""Sensor presets: every shipped file validates, matches its published calibration, bad files fail loudly."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import shutil
from importlib import resources
from pathlib import Path

import pytest

from rt_lidar.bridge.airsim_settings import (
    airsim_lidar_settings,
    airsim_settings_json,
    preset_from_airsim_settings,
)
from rt_lidar.cli.presets import add_presets_parser
from rt_lidar.errors import PresetError
from rt_lidar.sensor.presets import (
    NON_PRESET_FILES,
    lambertian_return_w,
    list_presets,
    load_preset,
    preset_from_dict,
    preset_to_dict,
)

ROOT = Path(__file__).resolve().parents[2]
CALIB = ROOT.parent / "shared" / "reference" / "calibrations"
needs_calib = pytest.mark.skipif(not CALIB.is_dir(), reason=f"reference calibrations not found at {CALIB}")
EXPECTED = [
    "VLP-16",
    "VLP-32C",
    "HDL-32E",
    "HDL-64E",
    "VLS-128",
    "OS1-64",
    "OS1-128",
    "Pandar64",
    "AT128",
    "Mid-40",
    "Cube 1",
    "Scala Gen2",
]
PRESETS = list_presets()


def _preset_file(stem: str) -> Path:
    return Path(str(resources.files("sensor_presets").joinpath(f"{stem}.toml")))


def test_all_expected_presets_ship() -> None:
    assert sorted(PRESETS, key=str.lower) == sorted(EXPECTED, key=str.lower)
    files = {r.name for r in resources.files("sensor_presets").iterdir() if r.name.endswith(".toml")}
    assert len(files - NON_PRESET_FILES) == len(EXPECTED)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_loads_validates_and_round_trips(name: str) -> None:
    p = load_preset(name)
    assert load_preset(name.upper()) is p and load_preset(name.lower()) is p
    assert sorted(b.ring for b in p.beams) == list(range(p.n_rings))
    assert p.elevations_deg.shape == p.azimuth_offsets_deg.shape == p.firing_offsets_us.shape == (p.n_rings,)
    d = json.loads(json.dumps(preset_to_dict(p)))
    assert preset_from_dict(d) == p
    assert ("rotation_hz" in d["scan"]) == (p.scan.pattern == "rotating")
    assert p.returns.default in p.returns.modes


@pytest.mark.parametrize("name", PRESETS)
def test_detection_threshold_matches_datasheet_range(name: str) -> None:
    p = load_preset(name)
    assert p.range.range_10pct_m is not None
    expected = lambertian_return_w(
        p.pulse.peak_power_w, p.optics.receiver_aperture_m, p.optics.system_efficiency, p.range.range_10pct_m
    )
    assert p.pulse.detection_threshold_w == pytest.approx(expected, rel=1e-3)
    # a 10 % target just beyond the datasheet range is below threshold, just inside above it
    assert (
        lambertian_return_w(
            p.pulse.peak_power_w,
            p.optics.receiver_aperture_m,
            p.optics.system_efficiency,
            p.range.range_10pct_m * 1.05,
        )
        < p.pulse.detection_threshold_w
    )


# ------------------------------------------------------------------ calibration files (independent parsers)


def _velodyne_lasers(path: Path) -> dict[int, tuple[float, float]]:
    """laser_id -> (vert_correction, rot_correction) in degrees, read with plain regexes."""
    text = path.read_text().split("lasers:", 1)[1]
    out = {}
    for item in re.split(r"\n- ", "\n" + text)[1:]:
        lid = int(float(re.search(r"laser_id:\s*([-\d.eE+]+)", item)[1]))  # type: ignore[index]
        vert = float(re.search(r"vert_correction:\s*([-\d.eE+]+)", item)[1])  # type: ignore[index]
        rot = re.search(r"rot_correction:\s*([-\d.eE+]+)", item)
        out[lid] = (math.degrees(vert), math.degrees(float(rot[1])) if rot else 0.0)
    return out


VELODYNE_FILES = {
    "VLP-16": "VLP16db.yaml",
    "VLP-32C": "VeloView-VLP-32C.yaml",
    "HDL-32E": "32db.yaml",
    "HDL-64E": "64e_utexas.yaml",
    "VLS-128": "VLS128.yaml",
}


@needs_calib
@pytest.mark.parametrize("name", sorted(VELODYNE_FILES))
def test_velodyne_angles_match_ros_calibration(name: str) -> None:
    p = load_preset(name)
    lasers = _velodyne_lasers(CALIB / VELODYNE_FILES[name])
    assert p.n_rings == len(lasers)
    for b in p.beams:
        assert b.laser_id is not None
        vert, rot = lasers[b.laser_id]
        assert b.elevation_deg == pytest.approx(vert, abs=1e-3)
        assert b.azimuth_offset_deg == pytest.approx(rot, abs=1e-3)
        assert b.dist_correction_m is not None
    # ROS driver rings: ascending elevation
    assert list(p.elevations_deg) == sorted(p.elevations_deg)


def _reference(name: str) -> tuple[list[float], list[float]]:
    """(elevation, clockwise azimuth) per channel from the reference file of a channel-ordered sensor."""
    if name == "Pandar64":
        rows = [
            ln.split(",")
            for ln in (CALIB / "pandar64_nebula_64.csv").read_text().splitlines()
            if ln and ln[0].isdigit()
        ]
        return [float(r[1]) for r in rows], [float(r[2]) for r in rows]
    if name == "OS1-64":
        lines = (CALIB / "os1_64_gen1_beam_intrinsics.txt").read_text().splitlines()
        elev = [float(v) for v in lines[1].split(",")]
        pattern = [float(v) for v in re.findall(r"-?\d+\.\d+", lines[2])]
        return elev, [pattern[i % 4] for i in range(len(elev))]
    text = (CALIB / "at128_nebula_summary.txt").read_text()
    assert "12.93 deg (ch1) to -12.47 deg (ch128), uniform 0.2 deg step" in text
    assert "groups of 16 over {+2.4,-0.65} and {-2.4,+0.65}" in text
    az = [(2.4 if i % 2 == 0 else -0.65) * (1 if (i // 16) % 2 == 0 else -1) for i in range(128)]
    return [12.93 - 0.2 * i for i in range(128)], az


@needs_calib
@pytest.mark.parametrize("name", ["Pandar64", "OS1-64", "AT128"])
def test_channel_ordered_angles_match_reference(name: str) -> None:
    p = load_preset(name)
    elev, az_cw = _reference(name)
    assert p.n_rings == len(elev)
    for ring, (e, a) in enumerate(zip(elev, az_cw, strict=True)):
        assert p.elevations_deg[ring] == pytest.approx(e, abs=1e-3)
        assert p.azimuth_offsets_deg[ring] == pytest.approx(-a, abs=1e-3)  # stored CCW-positive


def test_os1_128_is_the_published_uniform_spread() -> None:
    p = load_preset("OS1-128")
    assert p.n_rings == 128
    assert p.elevations_deg[0] == pytest.approx(22.5) and p.elevations_deg[-1] == pytest.approx(-22.5)
    assert max(abs(d + 45 / 127) for d in p.elevations_deg[1:] - p.elevations_deg[:-1]) < 1e-6
    assert "uniform" in p.source


@needs_calib
def test_committed_presets_are_the_import_tools_output(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "import_calibrations", ROOT / "tools" / "import_calibrations.py"
    )
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    committed = sorted(ROOT.joinpath("sensor_presets").glob("*.toml"))
    for f in committed:
        shutil.copy(f, tmp_path / f.name)
    assert tool.main(["--calibrations", str(CALIB), "--out", str(tmp_path)]) == 0
    for f in committed:
        assert (tmp_path / f.name).read_text() == f.read_text(), f"{f.name} differs from the tool's output"


# ------------------------------------------------------------------ bad presets


BAD = [
    ("rotation_hz = 10.0", 'rotation_hz = "ten"', "scan.rotation_hz", "must be a number"),
    ("rotation_hz = 10.0", "rotation_hz = 900", "scan.rotation_hz", "must be in [5, 20] Hz, got 900"),
    ("system_efficiency = 0.5", "system_efficiency = 1.5", "optics.system_efficiency", "must be in [0, 1]"),
    ("rotation_hz = 10.0", "rotation_hz = 10.0\nrotaton_hz = 10.0", "scan.rotaton_hz", "unknown key"),
    ("width_ns = 6.0", "width_ns = 6.0\npeak_power = 3.0", "pulse.peak_power", "unknown key"),
    ("ring = 8\n", "ring = 0\n", "beams[1].ring", "duplicate ring 0"),
    ("ring = 8\n", "ring = 16\n", "beams[1].ring", "rings must be 0..15"),
    ('pattern = "rotating"', 'pattern = "spinning"', "scan.pattern", "must be one of rotating, rosette"),
    ('default = "strongest"', 'default = "first"', "returns.default", "must be one of returns.modes"),
    ("max_m = 100.0", "max_m = 0.4", "range.min_m", "must be below range.max_m = 0.4 m"),
    ('packet_format = "velodyne-vlp16"', "", "packet_format", "is required"),
    ("[scan]", "frame_rate_hz = 5.0\n[scan]", "frame_rate_hz", "unknown key"),
    ("beam_exit_v_m = 0.0095\n", "", "optics.beam_exit_h_m", "needs optics.beam_exit_v_m too"),
    ("beam_exit_h_m = 0.0127\n", "", "optics.beam_exit_v_m", "needs optics.beam_exit_h_m too"),
    ("beam_exit_h_m = 0.0127", "beam_exit_h_m = 0.0", "optics.beam_exit_h_m", "must be in [0.0001, 0.2] m"),
    ("max = 100", "max = 100\nraw_step_spread = 0.3", "output.raw_step_spread", "needs output.raw_step"),
    ("max = 100", "max = 100\nraw_step = 60.0", "output.raw_step", "must be at most half of 100, got 60"),
]


@pytest.mark.parametrize(("old", "new", "field", "problem"), BAD)
def test_bad_preset_names_file_field_and_rule(
    tmp_path: Path, old: str, new: str, field: str, problem: str
) -> None:
    text = _preset_file("vlp-16").read_text()
    assert old in text
    bad = tmp_path / "broken-vlp16.toml"
    bad.write_text(text.replace(old, new, 1))
    with pytest.raises(PresetError) as info:
        load_preset(bad)
    assert info.value.field == field
    assert problem in info.value.problem
    assert str(bad) in str(info.value) and field in str(info.value) and problem in str(info.value)


def test_pattern_foreign_key_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "mid40.toml"
    bad.write_text(_preset_file("livox-mid40").read_text().replace("[scan]", "[scan]\nrotation_hz = 10.0"))
    with pytest.raises(PresetError, match=r"scan\.rotation_hz.*not used by pattern 'rosette'"):
        load_preset(bad)


def test_invalid_toml_and_unknown_names(tmp_path: Path) -> None:
    bad = tmp_path / "x.toml"
    bad.write_text("name = \n")
    with pytest.raises(PresetError, match="not valid TOML"):
        load_preset(bad)
    with pytest.raises(PresetError, match=r"unknown preset; available: .*VLP-16"):
        load_preset("VLP-17")
    assert load_preset("livox-mid40").name == "Mid-40"  # file stem works too


# ------------------------------------------------------------------ CLI and AirSim


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rt-lidar")
    add_presets_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_cli_show_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["presets", "show", "hdl-64e", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["scan"]["rotation_hz"] == 10.0 and len(d["beams"]) == 64
    assert {"ring", "elevation_deg", "azimuth_offset_deg", "firing_offset_us", "laser_id"} <= set(
        d["beams"][0]
    )
    assert _cli(["presets", "show", "Mid-40", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "rotation_hz" not in d["scan"] and d["scan"]["pattern"] == "rosette" and len(d["beams"]) == 1


def test_cli_list_text_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["presets", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in EXPECTED)
    assert _cli(["presets", "show", "VLP-16"]) == 0
    assert "16, elevation -15.000 .. 15.000 deg" in capsys.readouterr().out
    assert _cli(["presets", "show", "nope"]) == 2
    assert "unknown preset" in capsys.readouterr().err


def test_cli_airsim_settings_file(tmp_path: Path) -> None:
    out = tmp_path / "settings.json"
    assert _cli(["presets", "airsim-settings", "OS1-64", "--out", str(out)]) == 0
    settings = json.loads(out.read_text())
    assert settings["SettingsVersion"] == 1.2 and settings["SimMode"] == "Car"
    block = settings["Vehicles"]["PhysXCar"]["Sensors"]["Lidar1"]
    assert block["SensorType"] == 6 and block["NumberOfChannels"] == 64
    assert block["PointsPerSecond"] == 1024 * 64 * 10 and block["Z"] == -1.8
    assert block["DataFrame"] == "SensorLocalFrame" and block["DrawDebugPoints"] is False


@pytest.mark.parametrize("name", PRESETS)
def test_airsim_settings_round_trip(name: str) -> None:
    p = load_preset(name)
    assert preset_from_airsim_settings(airsim_settings_json(p)) == p


def test_airsim_rotation_rate_and_uniform_fallback() -> None:
    block = airsim_lidar_settings(load_preset("VLP-16"))
    block["RotationsPerSecond"] = 20
    settings = {"Vehicles": {"Car1": {"Sensors": {"Front": block}}}}
    assert preset_from_airsim_settings(settings, "Front").scan.rotation_hz == 20.0
    odd = {
        "SensorType": 6,
        "NumberOfChannels": 40,
        "RotationsPerSecond": 10,
        "PointsPerSecond": 400_000,
        "Range": 150,
        "VerticalFOVUpper": 5,
        "VerticalFOVLower": -35,
    }
    p = preset_from_airsim_settings({"Vehicles": {"Car1": {"Sensors": {"L": odd}}}})
    assert p.n_rings == 40 and p.scan.columns_per_rev == 1000 and p.range.max_m == 150
    assert p.elevations_deg.min() == -35 and p.elevations_deg.max() == 5
    assert p.pulse.detection_threshold_w == pytest.approx(
        lambertian_return_w(
            p.pulse.peak_power_w, p.optics.receiver_aperture_m, p.optics.system_efficiency, 90.0
        )
    )


def test_raw_step_spread_on_another_intensity_names_that_field(tmp_path: Path) -> None:
    """Only ``raw_step_spread`` given on a raw-intensity preset: the error names the field given."""
    text = _preset_file("hdl-64e").read_text()
    bad = tmp_path / "spread-hdl64e.toml"
    bad.write_text(text.replace("raw_knee = 160.0", "raw_knee = 160.0\nraw_step_spread = 0.3", 1))
    with pytest.raises(PresetError) as info:
        load_preset(bad)
    assert info.value.field == "output.raw_step_spread"
    assert 'only with intensity = "calibrated_reflectivity"' in info.value.problem
