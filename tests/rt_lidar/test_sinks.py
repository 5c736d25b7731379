from pathlib import Path

import numpy as np
import pytest
from pypcd4 import PointCloud

from rt_lidar.points import POINT_DTYPE, POINT_FIELDS
from rt_lidar.sinks import (
    atomic_write,
    range_image,
    read_kitti_bin,
    read_pcd,
    to_kitti_array,
    write_kitti_bin,
    write_pcd,
    write_range_image_png,
)


def _points(n=500, seed=3):
    rng = np.random.default_rng(seed)
    p = np.zeros(n, POINT_DTYPE)
    for f in ("x", "y", "z"):
        p[f] = rng.normal(0, 20, n)
    p["intensity"] = rng.uniform(0, 255, n)
    p["reflectivity"] = rng.uniform(0, 1, n)
    p["ring"] = rng.integers(0, 64, n)
    p["t"] = rng.integers(0, 100_000_000, n)
    p["return_id"] = rng.integers(0, 2, n)
    p["flags"] = rng.integers(0, 255, n)
    p["segment"] = rng.integers(0, 2**31, n)
    return p


def test_pcd_read_back_by_pypcd4(tmp_path):
    pts = _points()
    path = write_pcd(tmp_path / "a.pcd", pts)
    pc = PointCloud.from_path(path)
    assert tuple(pc.fields) == POINT_FIELDS
    arr = pc.numpy(POINT_FIELDS)
    assert arr.shape == (pts.size, len(POINT_FIELDS))
    for i, f in enumerate(POINT_FIELDS):
        np.testing.assert_array_equal(arr[:, i].astype(pts[f].dtype), pts[f], err_msg=f)
    np.testing.assert_array_equal(read_pcd(path, POINT_DTYPE), pts)


def test_kitti_bin_round_trip(tmp_path):
    pts = _points()
    path = write_kitti_bin(tmp_path / "a.bin", pts, 255.0)
    arr = read_kitti_bin(path)
    assert arr.dtype == np.float32 and arr.shape == (pts.size, 4)
    np.testing.assert_array_equal(arr[:, 0], pts["x"])
    np.testing.assert_allclose(arr[:, 3], pts["intensity"] / 255.0, rtol=1e-6)
    assert (arr[:, 3] >= 0).all() and (arr[:, 3] <= 1).all()


def test_kitti_rows_are_the_fields_bit_for_bit_whatever_the_layout():
    pts = _points()
    pts["intensity"][:3] = (-5.0, 300.0, np.nan)  # clipped at both ends; NaN stays NaN

    def by_field(p: np.ndarray) -> np.ndarray:
        refl = np.clip(p["intensity"] / np.float32(255.0), 0.0, 1.0)
        return np.stack([p["x"], p["y"], p["z"], refl], axis=1).astype(np.float32)

    other = np.zeros(pts.size, [("intensity", "<f8"), ("z", "<f4"), ("x", "<f4"), ("y", "<f4")])
    for f in ("x", "y", "z", "intensity"):
        other[f] = pts[f]
    for p in (pts, pts[::3], other):  # the one-copy path (whole and strided) and the field-by-field one
        assert to_kitti_array(p, 255.0).tobytes() == by_field(p).tobytes()


def test_atomic_write_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "x.pcd"
    with pytest.raises(RuntimeError), atomic_write(target) as fh:
        fh.write(b"half")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_range_image(tmp_path):
    p = np.zeros(2, POINT_DTYPE)
    p["x"] = [10, -10]
    p["y"] = [0, 0.001]
    p["ring"] = [0, 1]
    p["intensity"] = [100, 200]
    img = range_image(p, np.array([-5.0, 5.0]), 360)
    assert img.shape == (2, 360)
    assert img[1, 180] == 100  # ring 0 is the lower beam -> second row; straight ahead -> middle column
    assert img[0, 0] == 200 or img[0, 359] == 200
    assert np.isnan(img).sum() == 2 * 360 - 2
    # a sensor that looks 120 deg ahead: its field fills the columns, the point behind is left out
    ahead = range_image(p, np.array([-5.0, 5.0]), 120, azimuth_span_deg=120.0)
    assert ahead[1, 60] == 100 and np.isnan(ahead).sum() == 2 * 120 - 1
    from PIL import Image

    out = write_range_image_png(tmp_path / "r.png", img, 255, row_scale=3)
    png = Image.open(out)
    assert png.width == 360 and png.height > 6  # the scan's 2 rows x 3, a legend under them
    assert png.text["field"] == "intensity" and png.text["vmax"] == "255"


def test_sink_options_parse_booleans_ints_floats_and_paths():
    from rt_lidar.sinks.base import SinkOptions

    o = SinkOptions(
        "demo-kind",
        {"a": "YES", "b": "off", "n": "7", "x": "2.5", "p": "out/m.json"},
        {"a", "b", "n", "x", "p", "unused"},
    )
    assert (o.flag("a", False), o.flag("b", True), o.flag("unused", True)) == (True, False, True)
    assert o.integer("n", 0, 1, 10) == 7 and o.integer("unused", 3) == 3
    assert o.number("x", 0.0, 0.0, 5.0) == 2.5
    assert o.path("p") == Path("out/m.json") and o.path("unused") is None


OPTION_ERRORS = [
    ({"zz": "1"}, None, r"sink k: unknown option\(s\) zz; allowed: flag, n, x"),
    ({"flag": "maybe"}, lambda o: o.flag("flag", False), r"option flag='maybe': must be one of 1, true"),
    ({"n": "1.5"}, lambda o: o.integer("n", 0, 0, 9), r"option n='1.5': must be a whole number in \[0, 9\]"),
    ({"n": "10"}, lambda o: o.integer("n", 0, 0, 9), r"sink k: option n='10': must be in \[0, 9\], got 10"),
    ({"x": "nan"}, lambda o: o.number("x", 0.0, 0.0, 1.0), r"sink k: option x='nan': must be finite"),
    ({"x": "a"}, lambda o: o.number("x", 0.0, 0.0, 1.0), r"option x='a': must be a number in \[0, 1\]"),
]


@pytest.mark.parametrize(("options", "call", "message"), OPTION_ERRORS)
def test_sink_option_errors_name_the_kind_the_option_and_what_is_allowed(options, call, message):
    from rt_lidar.errors import ConfigError
    from rt_lidar.sinks.base import SinkOptions

    with pytest.raises(ConfigError, match=message):
        call(SinkOptions("k", options, {"flag", "n", "x"}))


_LAZY = """
import sys, tempfile
from rt_lidar.sinks.base import SINKS, make_sink
heavy = ("rosbag", "stream", "las", "ouster", "velodyne")
assert not [m for m in sys.modules if m.startswith("rt_lidar.sinks.") and m.endswith(heavy)]
make_sink("pcd:" + tempfile.mkdtemp())
assert "rt_lidar.sinks.rosbag" not in sys.modules
print(sorted(k for k in SINKS if callable(SINKS[k])))
"""


def test_every_registered_kind_resolves_and_nothing_registers_by_import():
    """The registry names each kind's factory; a sink module is imported only when its kind is used."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _LAZY], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    kinds = ["hesai-pcap", "hesai-udp", "kitti", "las", "osi-sensordata", "osi-sensorview", "ouster-pcap"]
    kinds += ["ouster-sensor", "ouster-udp", "pcd", "robosense-pcap", "robosense-udp", "ros2", "rosbag2"]
    assert out.stdout.strip() == str([*kinds, "velodyne-pcap", "velodyne-udp", "zmq"])
