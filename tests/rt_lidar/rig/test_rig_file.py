"""The rig file: the shipped example loads; every error names the file, the sensor and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from rt_lidar.errors import FieldError
from rt_lidar.rig import RigError, load_rig
from rt_lidar.sensor.presets import load_preset

EXAMPLE = Path(__file__).parents[3] / "docs" / "rigs" / "roof-and-corners.toml"

GOOD = """
[[sensor]]
name = "top"
preset = "HDL-64E"
mount = { xyz = [0.0, 0.0, 1.9], rpy_deg = [0.0, 0.0, 0.0] }
phase_deg = 0.0
sinks = ["velodyne-udp:127.0.0.1:2368"]

[[sensor]]
name = "left"
preset = "VLP-16"
mount = { xyz = [2.2, 0.9, 0.7], rpy_deg = [0.0, 0.0, 45.0] }
phase_deg = 90.0
rotation_hz = 20.0
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rig.toml"
    path.write_text(text)
    return path


def test_example_rig_loads() -> None:
    rig = load_rig(EXAMPLE)
    assert rig.names == ["top", "front_left", "front_right"]
    assert [s.preset.name for s in rig.sensors] == ["HDL-64E", "VLP-16", "VLP-16"]
    assert rig.sensor("front_left").mount.position.tolist() == [2.2, 0.9, 0.7]


def test_phase_and_rate_resolve_into_the_preset(tmp_path: Path) -> None:
    rig = load_rig(_write(tmp_path, GOOD))
    left = rig.sensor("left")
    assert left.preset.scan.rotation_hz == 20.0
    assert left.preset.scan.scan_start_azimuth_deg == 90.0
    assert rig.sensor("top").entry.sinks == ("velodyne-udp:127.0.0.1:2368",)
    # everything else is the shipped preset's
    vlp = load_preset("VLP-16")
    assert left.preset.beams == vlp.beams and left.preset.optics == vlp.optics


@pytest.mark.parametrize(
    ("old", "new", "sensor", "field", "says"),
    [
        ('name = "left"', 'name = "top"', "top", "name", "duplicate sensor name"),
        ('preset = "VLP-16"', 'preset = "VLP-17"', "left", "preset", "unknown preset"),
        ("xyz = [2.2, 0.9, 0.7]", "xyz = [2.2, nan, 0.7]", "left", "mount.xyz[1]", "finite"),
        ("xyz = [2.2, 0.9, 0.7]", "xyz = [2.2, inf, 0.7]", "left", "mount.xyz[1]", "finite"),
        ("xyz = [2.2, 0.9, 0.7]", "xyz = [2.2, 0.9]", "left", "mount.xyz", "3 elements"),
        ("phase_deg = 90.0", "phase_deg = 400.0", "left", "phase_deg", "[0, 360]"),
        ("phase_deg = 90.0", "phase_deg = 360.0", "left", "phase_deg", "[0, 360)"),
        ("rotation_hz = 20.0", "rotation_hz = 15.0", "left", "phase_deg", "whole number"),
        ("rotation_hz = 20.0", "rotation_hz = 50.0", "left", "rotation_hz", "[5, 20] Hz"),
        ("rotation_hz = 20.0", "rotatoin_hz = 20.0", "left", "rotatoin_hz", "unknown key"),
        ('name = "left"', 'name = "left/x"', "left/x", "name", "letters, digits"),
        ('preset = "VLP-16"', 'preset = "Mid-40"', "left", "phase_deg", "rotating sensors only"),
        ('sinks = ["velodyne-udp:127.0.0.1:2368"]', 'sinks = ["udp"]', "top", "sinks[0]", "KIND:TARGET"),
    ],
)
def test_errors_name_file_sensor_and_field(
    tmp_path: Path, old: str, new: str, sensor: str, field: str, says: str
) -> None:
    bad = GOOD.replace(old, new, 1)
    if "Mid-40" in new:
        bad = bad.replace("rotation_hz = 20.0\n", "")
    path = _write(tmp_path, bad)
    with pytest.raises(RigError) as info:
        load_rig(path)
    err = info.value
    assert isinstance(err, FieldError)
    assert (err.source, err.sensor, err.field) == (str(path), sensor, field)
    text = str(err)
    assert str(path) in text and f"sensor '{sensor}'" in text and f"field '{field}'" in text
    assert says in text


def test_missing_sensors_and_file(tmp_path: Path) -> None:
    with pytest.raises(RigError, match="field 'sensor': is required"):
        load_rig(_write(tmp_path, ""))
    with pytest.raises(RigError, match="field 'sensors': unknown key"):
        load_rig(_write(tmp_path, "[[sensors]]\nname = 'a'\n"))
    with pytest.raises(RigError, match="no such rig file"):
        load_rig(tmp_path / "nope.toml")
    with pytest.raises(RigError, match="field 'name': is required"):
        load_rig(_write(tmp_path, '[[sensor]]\npreset = "VLP-16"\n'))
