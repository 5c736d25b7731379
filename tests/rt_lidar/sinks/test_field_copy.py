"""Fields copied as blocks (``rt_lidar.sinks.field_copy``) give the bytes of a copy field by field: the
point type into every PointCloud2 layout (padded, reordered, with converted fields between), into the
PCD's intensity types and with extras, NaN payloads and every other bit pattern kept; and a PCD written
that way reads back, through pypcd4, as the points it was given."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pypcd4 import PointCloud

from rt_lidar.points import POINT_DTYPE
from rt_lidar.sinks.field_copy import copied_runs, copy_same_fields
from rt_lidar.sinks.pcd import with_extras, with_intensity_type, write_pcd
from rt_lidar.sinks.rosbag import CLOUD_DTYPE, CLOUD_DTYPE_ALL, OUSTER_DTYPE, OUSTER_DTYPE_ALL, fill_cloud


def _random_points(n: int, seed: int) -> np.ndarray:
    """Points of random bytes: NaNs with payloads, infinities and denormals among the floats."""
    raw = np.random.default_rng(seed).integers(0, 256, n * POINT_DTYPE.itemsize, dtype=np.uint8)
    return np.frombuffer(raw.tobytes(), POINT_DTYPE).copy()


def _same_fields(dst: np.dtype, src: np.dtype) -> list[str]:
    return [n for n in dst.names or () if n in (src.names or ()) and dst[n] == src[n]]


def _by_field(out: np.ndarray, points: np.ndarray, names: list[str]) -> None:
    for name in names:
        out[name] = points[name]


@pytest.mark.parametrize("layout", [CLOUD_DTYPE, CLOUD_DTYPE_ALL, OUSTER_DTYPE, OUSTER_DTYPE_ALL])
def test_blocks_are_the_bytes_of_field_by_field_copies(layout: np.dtype) -> None:
    points = _random_points(5_000, 1)
    names = _same_fields(layout, POINT_DTYPE)
    runs = copied_runs(layout, POINT_DTYPE, names)
    assert [n for run in runs for n in run] == names
    got = np.zeros(points.size, layout)
    want = np.zeros(points.size, layout)
    copy_same_fields(got, points, names)
    _by_field(want, points, names)
    assert got.tobytes() == want.tobytes()  # the padding left zero, every payload kept


def test_runs_join_only_fields_side_by_side_in_both_types() -> None:
    # x, y, z, intensity lead both; reflectivity sits apart in the cloud; return_id, flags and segment
    # follow each other in both
    runs = copied_runs(CLOUD_DTYPE_ALL, POINT_DTYPE, _same_fields(CLOUD_DTYPE_ALL, POINT_DTYPE))
    want = [["x", "y", "z", "intensity"], ["ring"], ["reflectivity"], ["return_id", "flags", "segment"]]
    assert runs == want
    swapped = np.dtype([("y", "<f4"), ("x", "<f4")])  # side by side, in the other order: two copies
    assert copied_runs(swapped, POINT_DTYPE, ["y", "x"]) == [["y"], ["x"]]
    other = np.dtype([("x", "<f4"), ("y", "<f8")])  # another type breaks a run
    assert copied_runs(other, POINT_DTYPE, ["x", "y"]) == [["x"], ["y"]]


def test_a_cloud_packs_the_points_it_was_given() -> None:
    points = _random_points(3_000, 2)
    points["t"] = np.arange(points.size) * 1_000
    out = np.zeros(points.size, CLOUD_DTYPE_ALL)
    fill_cloud(out, points)
    for name in ("x", "y", "z", "intensity", "reflectivity", "ring", "return_id", "flags", "segment"):
        assert out[name].tobytes() == points[name].tobytes(), name
    assert np.array_equal(out["time"], (points["t"] * 1e-9).astype(np.float32))


@pytest.mark.parametrize("kind", [np.uint8, np.uint16, np.float32])
def test_pcd_intensity_types_and_extras_are_copied_whole(kind: type, tmp_path: Path) -> None:
    points = _random_points(4_000, 3)
    points["intensity"] = np.random.default_rng(4).uniform(-5.0, 300.0, points.size)
    typed = with_intensity_type(points, np.dtype(kind))
    assert typed.dtype["intensity"] == np.dtype(kind)
    for name in POINT_DTYPE.names or ():
        if name != "intensity":
            assert typed[name].tobytes() == points[name].tobytes(), name
    extras = {"epw_ns": np.arange(points.size, dtype=np.float32)}
    whole = with_extras(typed, extras)
    for name in typed.dtype.names or ():
        assert whole[name].tobytes() == typed[name].tobytes(), name
    assert np.array_equal(whole["epw_ns"], extras["epw_ns"])
    # a file of finite points read back by another library
    finite = _random_points(500, 5)
    for name in ("x", "y", "z", "intensity", "reflectivity"):
        finite[name] = np.random.default_rng(6).uniform(-50.0, 50.0, finite.size)
    extra = {"epw_ns": np.ones(finite.size, np.float32)}
    path = write_pcd(tmp_path / "scan.pcd", finite, extra, np.dtype(kind))
    cloud = PointCloud.from_path(path)
    back = cloud.numpy(("x", "y", "z", "ring", "epw_ns"))
    assert np.array_equal(back[:, 0], finite["x"]) and np.array_equal(back[:, 2], finite["z"])
    assert np.array_equal(back[:, 3], finite["ring"]) and np.all(back[:, 4] == 1.0)


@pytest.mark.parametrize("layout", [CLOUD_DTYPE, CLOUD_DTYPE_ALL, OUSTER_DTYPE, OUSTER_DTYPE_ALL])
def test_the_compiled_copy_gives_the_numpy_blocks_bytes_and_leaves_the_rest(
    layout: np.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rt_lidar.sinks import field_copy

    if field_copy._c is None:
        pytest.skip("the compiled field copy was not built")
    monkeypatch.setattr(field_copy, "enabled", True)  # on, whatever RT_LIDAR_NO_TWINS says
    points = _random_points(7_001, 5)
    names = _same_fields(layout, POINT_DTYPE)
    runs = copied_runs(layout, POINT_DTYPE, names)
    # bytes outside the runs keep what they held (a structured copy() would not copy the padding)
    got, want = (np.frombuffer(bytearray(b"\xab" * points.size * layout.itemsize), layout) for _ in "ab")
    assert field_copy.copy_runs_compiled(got, points, runs)
    monkeypatch.setattr(field_copy, "enabled", False)
    assert not field_copy.copy_runs_compiled(want, points, runs)
    copy_same_fields(want, points, names)  # the NumPy blocks
    assert got.tobytes() == want.tobytes()


def test_the_compiled_copy_declines_arrays_it_does_not_take(monkeypatch: pytest.MonkeyPatch) -> None:
    from rt_lidar.sinks import field_copy

    monkeypatch.setattr(field_copy, "enabled", True)

    points = _random_points(100, 6)
    runs = copied_runs(CLOUD_DTYPE_ALL, POINT_DTYPE, _same_fields(CLOUD_DTYPE_ALL, POINT_DTYPE))
    out = np.zeros(100, CLOUD_DTYPE_ALL)
    assert not field_copy.copy_runs_compiled(out, points[::2], runs)  # strided records
    assert not field_copy.copy_runs_compiled(out[:50], points, runs)  # other lengths
    out.flags.writeable = False
    assert not field_copy.copy_runs_compiled(out, points, runs)  # read-only
    wider = np.zeros(100, [("ring", "<u4")])  # a field of another type: NumPy casts it
    assert not field_copy.copy_runs_compiled(wider, points, [["ring"]])
    objects = np.zeros(2, [("x", object)])
    assert not field_copy.copy_runs_compiled(objects, objects.copy(), [["x"]])
    # the strided records still come out right, by the NumPy code
    half = np.zeros(50, CLOUD_DTYPE_ALL)
    copy_same_fields(half, points[::2], _same_fields(CLOUD_DTYPE_ALL, POINT_DTYPE))
    assert half["x"].tobytes() == points[::2]["x"].tobytes()
    assert half["segment"].tobytes() == points[::2]["segment"].tobytes()


def test_the_compiled_seconds_are_numpys_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    from rt_lidar.sinks import field_copy

    if field_copy._c is None:
        pytest.skip("the compiled field copy was not built")
    monkeypatch.setattr(field_copy, "enabled", True)
    points = _random_points(20_000, 8)  # random int64 times: beyond 2**53, negative, the extremes
    points["t"][:6] = [0, 1, -1, 2**53 + 1, np.iinfo(np.int64).max, np.iinfo(np.int64).min]
    points["t"][6:5000] = np.random.default_rng(9).integers(0, 100_000_000, 4994)  # a scan's offsets
    got, want = np.zeros(points.size, CLOUD_DTYPE_ALL), np.zeros(points.size, CLOUD_DTYPE_ALL)
    assert field_copy.seconds_compiled(got, "time", points, "t")
    want["time"] = points["t"].astype(np.float64) * 1e-9
    assert got.tobytes() == want.tobytes()
    assert not field_copy.seconds_compiled(got, "x", points, "x")  # not int64 ns into float32
    assert not field_copy.seconds_compiled(got[:10], "time", points, "t")  # other lengths
    monkeypatch.setattr(field_copy, "enabled", False)
    assert not field_copy.seconds_compiled(got, "time", points, "t")
