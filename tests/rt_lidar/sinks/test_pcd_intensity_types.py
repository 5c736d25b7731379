"""Issue 40: a PCD's intensity in the sensor's own type (uint8 for a Velodyne, uint16 for Ouster's
photon counts, float32 for a continuous intensity), read back by pypcd4; ``intensity=float32`` keeps
the float."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.cli.main import main as rt_lidar
from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.points import POINT_DTYPE
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.base import SinkContext, make_sink
from rt_lidar.sinks.pcd import intensity_dtype, read_pcd, read_pcd_points


def _header(path: Path) -> dict[str, list[str]]:
    lines = path.read_bytes().split(b"DATA binary\n")[0].decode().splitlines()
    return {ln.split()[0]: ln.split()[1:] for ln in lines if ln and not ln.startswith("#")}


def _field_type(path: Path, name: str) -> tuple[str, str]:
    h = _header(path)
    i = h["FIELDS"].index(name)
    return h["TYPE"][i], h["SIZE"][i]


def test_the_type_follows_the_reporting_step_and_range() -> None:
    assert intensity_dtype(255, 1.0) == np.uint8  # Velodyne's 8-bit intensity
    assert intensity_dtype(65535, 1.0) == np.uint16  # Ouster's photon counts
    assert intensity_dtype(4095, 1.0) == np.uint16  # a 12-bit power (Cube 1)
    assert intensity_dtype(2**20, 1.0) == np.uint32
    assert intensity_dtype(255, 0.0) == np.float32  # continuous
    assert intensity_dtype(1, 0.5) == np.float32  # a fractional step


@pytest.mark.parametrize(("preset", "want", "size"), [("VLP-16", np.uint8, "1"), ("OS1-64", np.uint16, "2")])
def test_a_demo_scan_reads_back_in_pypcd4_with_the_sensors_type(
    tmp_path: Path, preset: str, want: type, size: str
) -> None:
    from pypcd4 import PointCloud

    runs = []
    for k in range(2):
        out = tmp_path / f"run{k}"
        floats = ["--sink", f"pcd:{tmp_path / 'float'},intensity=float32"] if k else []
        args = ["demo", "--quiet", "--in-process", "--preset", preset, "--frames", "2", "--out", str(out)]
        assert rt_lidar([*args, *floats]) == 0
        runs.append(sorted((out / "scans").glob("*.pcd")))
    path = runs[0][0]
    assert path.read_bytes() == runs[1][0].read_bytes()  # same seed, same bytes
    assert _field_type(path, "intensity") == ("U", size)
    pc = PointCloud.from_path(path)
    cols = pc.fields.index("intensity")
    assert pc.types[cols] == np.dtype(want)
    values = pc.numpy(("intensity",))[:, 0]
    assert values.size > 1000 and values.max() > 0 and len(np.unique(values)) > 10
    ours = read_pcd_points(path)  # our reader takes it back as the point type's float32
    np.testing.assert_array_equal(ours["intensity"], values.astype(np.float32))
    np.testing.assert_array_equal(read_pcd(path, POINT_DTYPE)["intensity"], ours["intensity"])
    # the sensor's type loses nothing: the float32 recording of the same run holds the same values
    as_float = read_pcd_points(tmp_path / "float" / path.name)
    assert _field_type(tmp_path / "float" / path.name, "intensity") == ("F", "4")
    np.testing.assert_array_equal(as_float["intensity"], ours["intensity"])


def _points(n: int = 500) -> np.ndarray:
    rng = np.random.default_rng(1)
    pts = np.zeros(n, POINT_DTYPE)
    pts["x"] = rng.uniform(1, 50, n)
    pts["intensity"] = np.round(rng.uniform(0, 300, n))  # some above an 8-bit sensor's 255
    pts["intensity"][:3] = (-2.0, np.nan, 254.6)
    return pts


def test_the_sink_option_keeps_float32_and_integers_are_clipped(tmp_path: Path) -> None:
    from pypcd4 import PointCloud

    preset = load_preset("VLP-16")
    pts = _points()
    files = {}
    for option in ("", ",intensity=float32", ",intensity=sensor"):
        folder = tmp_path / f"o{len(files)}"
        sink = make_sink(f"pcd:{folder}{option}")
        sink.open(SinkContext(preset))
        sink.write(Scan(0, 0, pts, pts.size, 0))
        sink.close()
        files[option] = folder / "000000.pcd"
    assert _field_type(files[""], "intensity") == ("U", "1")
    assert files[""].read_bytes() == files[",intensity=sensor"].read_bytes()
    assert _field_type(files[",intensity=float32"], "intensity") == ("F", "4")
    f32 = PointCloud.from_path(files[",intensity=float32"]).numpy(("intensity",))[:, 0]
    np.testing.assert_array_equal(f32[3:], pts["intensity"][3:])
    u8 = PointCloud.from_path(files[""]).numpy(("intensity",))[:, 0]
    assert u8[0] == 0 and u8[1] == 0 and u8[2] == 255  # negative and NaN -> 0, 254.6 -> 255
    np.testing.assert_array_equal(u8[3:], np.clip(pts["intensity"][3:], 0, 255))
    # a continuous intensity (step 0) stays float32 even in the sensor's type
    cont = dataclasses.replace(preset, output=dataclasses.replace(preset.output, intensity_step=0.0))
    sink = make_sink(f"pcd:{tmp_path / 'cont'}")
    sink.open(SinkContext(cont))
    sink.write(Scan(0, 0, pts, pts.size, 0))
    assert _field_type(tmp_path / "cont" / "000000.pcd", "intensity") == ("F", "4")
    with pytest.raises(ConfigError, match="intensity"):
        make_sink(f"pcd:{tmp_path / 'bad'},intensity=uint8")
