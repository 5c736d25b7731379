"""Firing schedules: exact over any split of time, complete scans, right directions and FOV."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rt_lidar.sensor.presets import list_presets, load_preset
from rt_lidar.sensor.scan_pattern import (
    Firings,
    firings_between,
    firings_per_scan,
    scan_index,
    scan_period_ns,
    scan_start_ns,
)

ROTATING = [n for n in list_presets() if load_preset(n).scan.pattern == "rotating"]
SOLID = [n for n in list_presets() if load_preset(n).scan.pattern != "rotating"]
FIELDS = ("ring", "t_ns", "azimuth_deg", "elevation_deg", "column")


def _concat(parts: list[Firings]) -> dict[str, np.ndarray]:
    return {f: np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS}


@pytest.mark.parametrize("name", ["VLP-16", "HDL-64E", "OS1-64", "Pandar64", "AT128", "Mid-40", "Cube 1"])
def test_split_intervals_equal_the_union(name: str) -> None:
    p = load_preset(name)
    period = scan_period_ns(p)
    rng = np.random.default_rng(7)
    t0 = 3 * period - period // 3 + 17  # starts mid-scan, crosses the seam
    t1 = t0 + period + period // 2
    cuts = np.sort(rng.integers(t0, t1, size=40))
    bounds = [t0, *cuts.tolist(), t1]
    parts = [firings_between(p, a, b) for a, b in itertools.pairwise(bounds)]
    whole = firings_between(p, t0, t1)
    joined = _concat(parts)
    for f in FIELDS:
        np.testing.assert_array_equal(joined[f], getattr(whole, f), err_msg=f)
    assert len(whole) > 0 and whole.t_ns.min() >= t0 and whole.t_ns.max() < t1
    assert np.all(np.diff(whole.t_ns) >= 0)
    assert whole.ring.dtype == np.uint16 and whole.t_ns.dtype == np.int64 and whole.column.dtype == np.int64


@pytest.mark.parametrize("name", ROTATING)
def test_rotating_scan_has_columns_times_rings_and_covers_360(name: str) -> None:
    p = load_preset(name)
    for k in (1, 2, 36_000):  # also an hour in: integer timing does not drift
        f = firings_between(p, scan_start_ns(p, k), scan_start_ns(p, k + 1))
        assert len(f) == firings_per_scan(p)
        assert np.all(scan_index(p, f.t_ns) == k)
    cols = np.unique(f.column)
    assert len(f) == len(cols) * p.n_rings or p.firing_offsets_us.max() > 0
    assert firings_per_scan(p) % p.n_rings == 0
    for ring in (0, p.n_rings - 1):
        az = np.sort(f.azimuth_deg[f.ring == ring])
        gaps = np.diff(np.concatenate([az, [az[0] + 360.0]]))
        assert gaps.max() < 0.5 and np.all(az >= -180.0) and np.all(az < 180.0)


@pytest.mark.parametrize("name", ROTATING)
def test_rotation_is_clockwise_from_the_start_azimuth(name: str) -> None:
    p = load_preset(name)
    t = scan_start_ns(p, 5)
    f = firings_between(p, t, t + scan_period_ns(p) // 4)
    ring = int(np.argmin(p.firing_offsets_us))
    sel = f.ring == ring
    unwrapped = np.unwrap(np.radians(f.azimuth_deg[sel]))
    assert np.all(np.diff(unwrapped) < 0), "clockwise seen from above: math azimuth decreases"
    expected = p.scan.scan_start_azimuth_deg + p.azimuth_offsets_deg[ring]
    assert np.cos(np.radians(f.azimuth_deg[sel][0] - expected)) > np.cos(np.radians(0.5))
    swept = np.degrees(unwrapped[0] - unwrapped[-1])
    assert swept == pytest.approx(90.0, abs=0.5)


def test_vlp16_firing_offsets_within_a_column() -> None:
    p = load_preset("VLP-16")
    f = firings_between(p, 0, 55_296)
    col0 = f.column == 0
    lid = np.array([p.beams[r].laser_id for r in f.ring[col0]])
    np.testing.assert_array_equal(f.t_ns[col0], np.round(lid * 2304.0).astype(np.int64))
    assert set(f.column.tolist()) == {0}


def test_ouster_fires_all_channels_at_once() -> None:
    p = load_preset("OS1-64")
    f = firings_between(p, 0, scan_period_ns(p) // 1024 + 1)
    assert len(f) == 2 * 64 and len(np.unique(f.t_ns)) == 2
    np.testing.assert_array_equal(f.ring[:64], np.arange(64))


@pytest.mark.parametrize("name", SOLID)
def test_solid_state_fov_bounds(name: str) -> None:
    p = load_preset(name)
    f = firings_between(p, scan_start_ns(p, 2), scan_start_ns(p, 3))
    assert len(f) == firings_per_scan(p)
    s = p.scan
    if s.pattern == "rosette":
        assert s.fov_deg is not None
        x = f.directions()[:, 0].astype(np.float64)
        off_axis = np.degrees(np.arccos(np.clip(x, -1, 1)))
        assert off_axis.max() <= s.fov_deg / 2 + 1e-3 and off_axis.max() > s.fov_deg / 2 - 0.5
        assert set(f.ring.tolist()) == {0}
    else:
        assert s.fov_h_deg is not None and s.fov_v_deg is not None
        assert np.abs(f.azimuth_deg).max() <= s.fov_h_deg / 2 + 1e-9
        assert np.abs(f.azimuth_deg).max() > s.fov_h_deg / 2 - 1.0  # and fills it
        assert np.ptp(f.elevation_deg) <= s.fov_v_deg + 1e-9
        assert sorted(set(f.ring.tolist())) == list(range(p.n_rings))


def test_rosette_does_not_repeat_across_frames() -> None:
    p = load_preset("Mid-40")
    a = firings_between(p, scan_start_ns(p, 0), scan_start_ns(p, 1)).directions()
    b = firings_between(p, scan_start_ns(p, 1), scan_start_ns(p, 2)).directions()
    assert a.shape == b.shape == (100_000 // 10, 3)
    assert np.abs(a - b).max() > 0.1


def test_raster_zigzag_lines() -> None:
    p = load_preset("Cube 1")
    f = firings_between(p, 0, scan_period_ns(p))
    line0, line1 = f.azimuth_deg[f.ring == 0], f.azimuth_deg[f.ring == 1]
    assert np.all(np.diff(line0) < 0) and np.all(np.diff(line1) > 0)  # left to right, then back
    assert np.all(np.diff(f.ring.astype(int)) >= 0)  # lines in order within a frame


def test_directions_are_unit_vectors_matching_angles() -> None:
    p = load_preset("HDL-64E")
    f = firings_between(p, 1_000_000, 2_000_000)
    d = f.directions()
    assert d.dtype == np.float32 and d.shape == (len(f), 3)
    np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(np.degrees(np.arctan2(d[:, 1], d[:, 0])), f.azimuth_deg, atol=1e-3)
    np.testing.assert_allclose(np.degrees(np.arcsin(d[:, 2])), f.elevation_deg, atol=1e-3)


def test_scan_index_and_start_agree() -> None:
    p = load_preset("VLP-16")
    period = scan_period_ns(p)
    assert period == 100_000_000
    starts = np.array([scan_start_ns(p, i) for i in range(5)])
    np.testing.assert_array_equal(scan_index(p, starts), np.arange(5))
    np.testing.assert_array_equal(scan_index(p, starts[1:] - 1), np.arange(4))
    assert len(firings_between(p, 5, 5)) == 0 and len(firings_between(p, -100, 0)) == 0


@pytest.mark.parametrize("name", [n for n in list_presets() if load_preset(n).scan.pattern != "rosette"])
def test_cached_scan_table_equals_the_direct_schedule(name):
    from rt_lidar.sensor.scan_pattern import _compute_firings

    preset = load_preset(name)
    period = scan_period_ns(preset)
    rng = np.random.default_rng(5)
    cuts = [0, 7, period // 3, period - 1, period, 2 * period + 12345, int(2.5 * period)]
    cuts += sorted(rng.integers(0, 4 * period, 5).tolist())
    for t0, t1 in itertools.pairwise(cuts):
        if t1 <= t0:
            continue
        a, b = firings_between(preset, t0, t1), _compute_firings(preset, t0, t1)
        for f in ("ring", "t_ns", "azimuth_deg", "elevation_deg", "column"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f"{name} {f} [{t0},{t1})")
        np.testing.assert_allclose(a.directions(), b.directions(), atol=1e-6)


def test_scan_runs_are_the_runs_of_scan_index() -> None:
    """The binary search gives the runs that dividing every time and scan_boundaries give, for times in
    order (gaps of whole scans, negative clocks, one scan, none); times out of order give None."""
    from rt_lidar.kernels import scan_boundaries
    from rt_lidar.sensor.scan_pattern import scan_runs

    rng = np.random.default_rng(5)
    for name in ("HDL-64E", "OS1-64", "Mid-40"):
        preset = load_preset(name)
        period = scan_period_ns(preset)
        for trial in range(300):
            n = int(rng.integers(0, 400))
            lo = int(rng.integers(-5, 50)) * period + int(rng.integers(0, period))
            span = int(rng.choice([period // 3, 2 * period, 7 * period]))
            t = np.sort(rng.integers(lo, lo + span, n)).astype(np.int64)
            if trial % 5 == 0 and n > 4:
                t[n // 2 :] += 3 * period  # a gap of whole scans with no time in them
            if trial % 7 == 0 and n > 2:
                t[rng.integers(0, n)] = (t[0] // period + 1) * period  # exactly on a scan start
                t.sort()
            got = scan_runs(preset, t)
            indices, starts = scan_boundaries(scan_index(preset, t))
            assert got == (indices.tolist(), starts.tolist())
        assert scan_runs(preset, np.array([3 * period, period, 2 * period], np.int64)) is None
    points = np.zeros(5, dtype=[("x", "<f4"), ("t", "<i8")])  # a strided field, as the points' t
    points["t"] = [0, 10, 100_000_000, 100_000_001, 250_000_000]
    preset = load_preset("HDL-64E")
    want = scan_boundaries(scan_index(preset, points["t"]))
    assert scan_runs(preset, points["t"]) == (want[0].tolist(), want[1].tolist())
