"""Point and timing faults on real pipeline scans: what each does, and that it is deterministic."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rt_lidar.faults.spec import faults_from_table
from rt_lidar.faults.wiring import fault_plan
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.scan_loop import run_scans
from rt_lidar.points import PointFlag
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext

PRESET = "VLP-16"


def _faults(*tables):
    return faults_from_table({"fault": list(tables)}, "test")


def _run(faults, n=3, seed=0):
    """n scans of the street through the faults (as a run: power faults on the hits, the rest after)."""
    built = build_pipeline(PRESET, "street", seed=seed)
    plan = fault_plan(faults, built.pipeline.preset, seed)
    out = []
    if plan is not None:
        built.pipeline.on_hits = plan.on_hits
    stats = run_scans(
        built.pipeline, n, post=plan.on_scan if plan else None, on_scan=out.append, background=False
    )
    built.pipeline.close()
    return out, stats, plan


def _az(p):
    return np.degrees(np.arctan2(p["y"], p["x"]))


def _range(p):
    return np.sqrt(p["x"].astype(float) ** 2 + p["y"] ** 2 + p["z"] ** 2)


def _matched_ratio(before, after) -> float:
    """Median reflectivity ratio of the firings (ring, t) detected both times."""
    kb = before["ring"].astype(np.int64) << 40 | before["t"]
    ka = after["ring"].astype(np.int64) << 40 | after["t"]
    common, ib, ia = np.intersect1d(kb, ka, return_indices=True)
    assert common.size > 100
    return float(np.median(after["reflectivity"][ia] / before["reflectivity"][ib]))


@pytest.fixture(scope="module")
def clean():
    return _run(())[0]


def test_dirt_takes_t_squared_off_the_echo_in_its_sector(clean):
    t = 0.4
    dirty, _, plan = _run(
        _faults({"kind": "dirt", "transmission": t, "azimuth_deg": [-60, 60], "scatter_rate": 0})
    )
    for c, d in zip(clean, dirty, strict=True):
        cin, din = np.abs(_az(c.points)) < 55, np.abs(_az(d.points)) < 55
        assert din.sum() < cin.sum()  # weak returns fall below the threshold
        # the same firings detected both ways: measured reflectivity down by T^2
        assert _matched_ratio(c.points[cin], d.points[din]) == pytest.approx(t**2, rel=0.1)
        flags = d.points["flags"]
        assert np.all(flags[din] & int(PointFlag.FAULT_DIRT))
        outside = np.abs(_az(d.points)) > 65
        assert not np.any(flags[outside] & int(PointFlag.FAULT_DIRT))
        assert abs(outside.sum() - (np.abs(_az(c.points)) > 65).sum()) < 0.02 * outside.sum()
    assert plan.report()[0]["injected"]["scans"] == 3


def test_dirt_scatter_points_lie_near_the_window():
    pts, _, plan = _run(
        _faults({"kind": "dirt", "transmission": 0.5, "azimuth_deg": [-30, 30], "scatter_rate": 0.1})
    )
    preset = load_preset(PRESET)
    for s in pts:
        near = (_range(s.points) < preset.range.min_m + 1.0) & (s.points["flags"] > 0)
        assert near.sum() > 50
        assert np.all(np.abs(_az(s.points[near])) <= 30.5)
    assert plan.report()[0]["injected"]["points_added"] > 150


def test_dead_channel_and_blockage_leave_nothing(clean):
    got, _, _ = _run(
        _faults({"kind": "dead_channel", "rings": [2, 7]}, {"kind": "blockage", "azimuth_deg": [80, 120]})
    )
    for s in got:
        assert not np.isin(s.points["ring"], [2, 7]).any()
        az = _az(s.points)
        assert not np.any((az > 80.5) & (az < 119.5))
    assert any(np.isin(c.points["ring"], [2, 7]).any() for c in clean)


def test_weak_channel_and_noise_burst(clean):
    got, _, plan = _run(
        _faults(
            {"kind": "weak_channel", "rings": [4], "power_scale": 0.05},
            {"kind": "noise_burst", "rate_hz": 50_000, "start_s": 0.1, "end_s": 0.2},
        )
    )
    for c, s in zip(clean, got, strict=True):
        real = s.points[(s.points["flags"] & int(PointFlag.FAULT_NOISE)) == 0]
        weak, was = real[real["ring"] == 4], c.points[c.points["ring"] == 4]
        assert weak.size < was.size
        assert _matched_ratio(was, weak) == pytest.approx(0.05, rel=0.1)
        assert np.all(
            s.points["flags"][s.points["ring"] == 4] & int(PointFlag.FAULT_POWER | PointFlag.FAULT_NOISE)
        )
    noise = [int(np.count_nonzero(s.points["flags"] & int(PointFlag.FAULT_NOISE))) for s in got]
    assert noise[0] == 0 and noise[2] == 0
    assert noise[1] == pytest.approx(50_000 * 0.1, rel=0.1)  # Poisson(5000) over the 0.1 s scan
    assert plan.report()[1]["injected"]["points_added"] == noise[1]


def test_range_bias_scales_and_offsets_ranges(clean):
    got, _, _ = _run(_faults({"kind": "range_bias", "offset_m": 0.5, "scale": 1.01}), n=1)
    c, s = clean[0], got[0]
    np.testing.assert_array_equal(c.points["t"], s.points["t"])
    np.testing.assert_allclose(_range(s.points), _range(c.points) * 1.01 + 0.5, rtol=1e-5, atol=1e-4)


def test_reboot_drops_scans_then_comes_back_with_a_new_boot(clean):
    got, stats, plan = _run(_faults({"kind": "reboot", "start_s": 0.1, "end_s": 0.2}), n=4)
    assert [s.index for s in got] == [0, 2, 3] and stats.suppressed == 1
    assert [s.boot for s in got] == [0, 1, 1]
    assert plan.report()[0]["injected"]["scans_dropped"] == 1


def test_frozen_repeats_the_last_scan(clean):
    got, _, _ = _run(_faults({"kind": "frozen", "start_s": 0.1}), n=3)
    first = got[0].points
    for again in got[1:]:
        assert np.all(again.points["flags"] == first["flags"] | int(PointFlag.FAULT_FROZEN))
        for name in ("x", "y", "z", "intensity", "t", "ring"):
            np.testing.assert_array_equal(again.points[name], first[name])
    assert [s.start_ns for s in got] == [s.start_ns for s in clean]
    assert np.all(got[2].points["flags"] & int(PointFlag.FAULT_FROZEN))


def test_clock_faults_move_every_stamp(clean):
    got, _, _ = _run(
        _faults({"kind": "clock_offset", "offset_s": 0.25}, {"kind": "clock_drift", "ppm": 1000.0}), n=3
    )
    period = scan_period_ns(load_preset(PRESET))
    ctx = SinkContext(load_preset(PRESET))
    for k, s in enumerate(got):
        want = 250_000_000 + round(1000e-6 * k * period)
        assert s.clock_offset_ns == want
        assert ctx.stamp_offset_ns(s) == want


def test_mount_drift_turns_the_cloud(clean):
    got, _, _ = _run(_faults({"kind": "mount_drift", "rpy_deg_per_s": [0.0, 0.0, 10.0]}), n=3)
    c, s = clean[2], got[2]  # 0.2 s of drift: the sensor turned 2 deg left, the world 2 deg right
    np.testing.assert_array_equal(c.points["t"], s.points["t"])
    np.testing.assert_allclose(_range(s.points), _range(c.points), rtol=1e-5, atol=1e-4)
    far = _range(c.points) > 2.0
    turn = (_az(s.points[far]) - _az(c.points[far]) + 180.0) % 360.0 - 180.0
    np.testing.assert_allclose(turn, -2.0, atol=1e-3)
    assert np.all(s.points["flags"] & int(PointFlag.FAULT_MOUNT))
    assert clean[0].points.tobytes() == got[0].points.tobytes()  # no drift yet at t = 0


def test_rotation_wobble_fires_azimuths_off_schedule(clean):
    amp, period = 5.0, 0.4
    got, _, _ = _run(_faults({"kind": "rotation_wobble", "amplitude_deg": amp, "period_s": period}), n=2)
    c, s = clean[1], got[1]
    assert s.points.size == c.points.size
    shift_ns = np.sort(c.points["t"]).astype(np.int64) - np.sort(s.points["t"]).astype(np.int64)
    deg_per_ns = 360.0 * load_preset(PRESET).scan.rotation_hz * 1e-9
    assert np.abs(shift_ns).max() * deg_per_ns <= amp + 0.01
    assert np.abs(shift_ns).max() * deg_per_ns > 0.5 * amp


def _off_schedule_deg(scan, preset) -> np.ndarray:
    """Each point's azimuth minus the azimuth the preset's schedule fires its ring at at its time."""
    pts = scan.points
    period = scan_period_ns(preset)
    t_abs = scan.start_ns + pts["t"].astype(np.int64)
    sign = -1.0 if preset.scan.rotation_direction == "cw" else 1.0
    nominal = (
        preset.scan.scan_start_azimuth_deg
        + sign * 360.0 * np.mod(t_abs, period) / period
        + np.asarray(preset.azimuth_offsets_deg)[pts["ring"]]
    )
    return (_az(pts) - nominal + 180.0) % 360.0 - 180.0


def test_rotation_wobble_turns_each_point_to_the_azimuth_of_its_new_time(clean):
    """A wobbling rotor's points sit where the nominal schedule points at their (perturbed) firing
    times, as a decoder of its packets places them: turned by up to the amplitude, ranges kept."""
    amp, period = 5.0, 0.4
    preset = load_preset(PRESET)
    got, _, _ = _run(_faults({"kind": "rotation_wobble", "amplitude_deg": amp, "period_s": period}), n=2)
    c, s = clean[1], got[1]
    assert np.abs(_off_schedule_deg(c, preset)).max() < 0.01  # the clean scan is on its schedule
    assert np.abs(_off_schedule_deg(s, preset)).max() < 0.01  # and the wobbled one on its new times
    assert np.allclose(np.sort(_range(s.points)), np.sort(_range(c.points)), atol=1e-4)
    assert np.array_equal(np.sort(s.points["z"]), np.sort(c.points["z"]))
    # matched by (ring, range), the points turned by up to the amplitude
    kc = np.lexsort((_range(c.points), c.points["ring"]))
    ks = np.lexsort((_range(s.points), s.points["ring"]))
    turned = (_az(s.points)[ks] - _az(c.points)[kc] + 180.0) % 360.0 - 180.0
    near = np.abs(_range(s.points)[ks] - _range(c.points)[kc]) < 1e-4
    assert np.percentile(np.abs(turned[near]), 99) <= amp + 0.01
    assert np.abs(turned[near]).max() > 0.5 * amp


def test_same_seed_same_bytes_other_seed_other_bytes():
    faults = _faults(
        {"kind": "dirt", "transmission": 0.5, "azimuth_deg": [-30, 30]},
        {"kind": "noise_burst", "rate_hz": 20_000},
        {"kind": "blinding", "azimuth_deg": [100, 110]},
    )
    a, _, _ = _run(faults, n=2)
    b, _, _ = _run(faults, n=2)
    assert [s.points.tobytes() for s in a] == [s.points.tobytes() for s in b]
    other = dataclasses.replace(faults[1], rate_hz=40_000.0)
    c, _, _ = _run((faults[0], other, faults[2]), n=2)
    assert a[0].points.tobytes() != c[0].points.tobytes()
    plan = fault_plan(faults, load_preset(PRESET), 0)
    keyed = fault_plan(faults, load_preset(PRESET), 0)
    assert plan is not None and keyed is not None
    keyed.key = 1  # a rig's other sensor: other draws from the same faults
    assert plan.on_scan(a[0]).points.tobytes() != keyed.on_scan(a[0]).points.tobytes()


def test_blinding_loses_the_sector_and_adds_saturated_points(clean):
    got, _, plan = _run(_faults({"kind": "blinding", "azimuth_deg": [100, 140], "false_rate": 0.3}), n=2)
    intensity_max = load_preset(PRESET).output.intensity_max
    for c, s in zip(clean[:2], got, strict=True):
        inside = (_az(s.points) > 101) & (_az(s.points) < 139)
        assert np.all(s.points["flags"][inside] & int(PointFlag.FAULT_BLINDING))
        assert np.all(s.points["flags"][inside] & int(PointFlag.SATURATED))
        assert np.all(s.points["intensity"][inside] == intensity_max)
        was = (_az(c.points) > 101) & (_az(c.points) < 139)
        assert was.sum() > 100 and inside.sum() > 100
        outside = ~((_az(s.points) > 99) & (_az(s.points) < 141))
        assert np.array_equal(s.points[outside], c.points[~((_az(c.points) > 99) & (_az(c.points) < 141))])
    injected = plan.report()[0]["injected"]
    assert injected["points_removed"] > 0 and injected["points_added"] > 0


def test_gain_drift_dims_every_echo_over_time(clean):
    got, _, _ = _run(_faults({"kind": "gain_drift", "gain": 1.0, "gain_per_s": -1.0}), n=3)
    # gain 1 - t: 0.9..0.8 over scan 1, 0.8..0.7 over scan 2: the same firings read that much darker
    for k, gain in ((1, 0.85), (2, 0.75)):
        assert _matched_ratio(clean[k].points, got[k].points) == pytest.approx(gain, rel=0.05)
        assert got[k].points.size < clean[k].points.size
        assert np.all(got[k].points["flags"] & int(PointFlag.FAULT_POWER))


@pytest.mark.parametrize("kind", ["blockage", "dirt"])
def test_a_window_fault_dims_a_panes_own_echo(kind):
    """A pane in front of the sensor with nothing behind it returns only its own echo: a blockage of the
    sensor's window takes every such point out of its sector, and dirt of one-way transmission T dims
    its reflectivity by T^2 (the window's two-way loss, as on every echo behind the pane)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from scenes import glass_scene

    table = {"kind": kind, "azimuth_deg": [-30, 30]}
    if kind == "dirt":
        table["transmission"] = 0.7
    runs = []
    for faults in (None, _faults(table)):
        built = build_pipeline(PRESET, glass_scene(4.0), seed=0)
        plan = fault_plan(faults, built.pipeline.preset, 0) if faults is not None else None
        if plan is not None:
            built.pipeline.on_hits = plan.on_hits
        try:
            scan = built.pipeline.scans(2)[1]
        finally:
            built.pipeline.close()
        p = scan.points[(scan.points["flags"] & PointFlag.AMBIENT_NOISE) == 0]
        runs.append(p[np.abs(np.degrees(np.arctan2(p["y"], p["x"]))) < 29.5])
    clean, faulted = runs
    assert clean.size > 20  # the pane answers (near normal incidence) in the sector without the fault
    if kind == "blockage":
        assert faulted.size == 0
    else:
        assert faulted.size > 0
        key = lambda p: p["t"].astype(np.int64) * 256 + p["ring"]  # noqa: E731 (one pulse's point)
        both, i, j = np.intersect1d(key(clean), key(faulted), return_indices=True)
        assert both.size > 10
        ratio = faulted["reflectivity"][j].astype(np.float64) / clean["reflectivity"][i]
        assert np.median(ratio) == pytest.approx(0.7**2, rel=0.05)
