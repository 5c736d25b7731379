"""Colour modes, positions, recordings and the keyboard driver: NumPy only, no window."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rt_lidar.points import POINT_DTYPE, PointFlag
from rt_lidar.sinks.pcd import write_pcd
from rt_lidar.viewer.colors import COLOR_MODES, FLAG_COLORS, ColorScales, point_colors, point_positions
from rt_lidar.viewer.drive import DriveCommand, KeyboardDriver, parse_host_port
from rt_lidar.viewer.sources import RecordingSource, read_any_pcd


def _points(n: int = 1000) -> np.ndarray:
    rng = np.random.default_rng(1)
    pts = np.zeros(n, POINT_DTYPE)
    pts["x"], pts["y"], pts["z"] = rng.normal(0, 20, (3, n))
    pts["intensity"] = rng.uniform(0, 255, n)
    pts["reflectivity"] = rng.uniform(0, 1, n)
    pts["ring"] = np.arange(n) % 64
    pts["return_id"] = np.arange(n) % 2
    return pts


def test_every_mode_gives_distinct_rgba() -> None:
    pts = _points()
    out = {m: point_colors(pts, m, ColorScales(255.0, 80.0, 64)) for m in COLOR_MODES}
    for m, c in out.items():
        assert c.shape == (pts.size, 4) and c.dtype == np.float32 and c.flags.c_contiguous, m
        assert np.all((c >= 0) & (c <= 1)) and np.all(c[:, 3] == 1), m
    assert not np.allclose(out["intensity"], out["reflectivity"])
    assert len(np.unique(out["return_id"], axis=0)) == 2
    with pytest.raises(ValueError, match="unknown colour mode"):
        point_colors(pts, "bogus")


def test_flags_colour_by_priority() -> None:
    pts = _points(3)
    pts["flags"] = [0, PointFlag.RAIN_CLUTTER, PointFlag.RAIN_CLUTTER | PointFlag.SATURATED]
    c = point_colors(pts, "flags")
    colors = dict(FLAG_COLORS)
    assert tuple(c[1]) == pytest.approx(colors[PointFlag.RAIN_CLUTTER])
    assert tuple(c[2]) == pytest.approx(colors[PointFlag.SATURATED])
    assert not np.allclose(c[0], c[1])


def test_positions_are_contiguous_xyz() -> None:
    pts = _points(50)
    pos = point_positions(pts)
    assert pos.shape == (50, 3) and pos.dtype == np.float32 and pos.flags.c_contiguous
    np.testing.assert_array_equal(pos[:, 1], pts["y"])


def test_recording_plays_and_seeks(tmp_path) -> None:
    for i in range(3):
        pts = _points(100 + i)
        write_pcd(tmp_path / f"{i:06d}.pcd", pts)
    np.testing.assert_array_equal(read_any_pcd(tmp_path / "000001.pcd"), _points(101))
    rec = RecordingSource(tmp_path, rate_hz=1000.0)
    sizes = []
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        got = rec.poll()
        if "scan" in got:
            sizes.append(got["scan"].header["n"])
        if len(sizes) == 3:
            break
    assert sizes == [100, 101, 102] and rec.poll() == {}  # stops at the end
    rec.seek(1)
    assert rec.poll()["scan"].points.size == 101 and len(rec.frame(0).header["elevations_deg"]) == 64
    with pytest.raises(FileNotFoundError):
        RecordingSource(tmp_path / "none")


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[float, float, float]] = []

    def set_controls(self, throttle: float, steering: float, brake: float) -> None:
        self.calls.append((throttle, steering, brake))


def test_keyboard_driver_ramps_steering_and_keeps_alive() -> None:
    rec = _Recorder()
    drv = KeyboardDriver(rec, steer_rate=2.0, keepalive_s=0.5)
    drv.tick(0.0)
    drv.press("W")
    drv.press("left")
    assert drv.tick(0.1) == DriveCommand(1.0, -0.2, 0.0)
    for t in (0.3, 0.5, 0.7):  # ticks of at most 0.2 s count
        drv.tick(t)
    assert drv.tick(0.75).steering == pytest.approx(-1.0)
    n = len(rec.calls)
    drv.tick(0.8)
    assert len(rec.calls) == n  # unchanged: not resent
    drv.tick(1.3)
    assert len(rec.calls) == n + 1  # keep-alive
    drv.release("w")
    drv.release("left")
    drv.press("x")
    cmd = drv.tick(1.35)
    assert cmd.throttle == 0.0 and cmd.brake == 1.0 and cmd.steering > -1.0
    assert parse_host_port("10.0.0.2:41452") == ("10.0.0.2", 41452)
    assert parse_host_port("") == ("127.0.0.1", 41451)
