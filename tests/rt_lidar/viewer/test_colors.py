"""Colour modes, positions, recordings and the keyboard driver: NumPy only, no window."""

from __future__ import annotations

import time

import numpy as np
import pytest

from rt_lidar.errors import ConfigError
from rt_lidar.points import POINT_DTYPE, PointFlag
from rt_lidar.sinks.pcd import write_pcd
from rt_lidar.sinks.range_image import colormap
from rt_lidar.viewer.colors import (
    COLOR_MODES,
    FLAG_COLORS,
    CloudBuffers,
    ColorScales,
    intensity_mask_rgb,
    point_colors,
    point_positions,
    range_panel_rgb,
    range_panel_stride,
)
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


def _reference_colors(points: np.ndarray, mode: str, s: ColorScales) -> np.ndarray:
    """The colour modes written the plain way (float temporaries, boolean masks): what the buffered,
    take-based ones must reproduce exactly."""
    lut = np.concatenate(
        [colormap(np.linspace(0.0, 1.0, 256)).astype(np.float32) / 255.0, np.ones((256, 1))], 1
    )
    lut = lut.astype(np.float32)

    def via_lut(v: np.ndarray) -> np.ndarray:
        return lut[np.clip(np.nan_to_num(v, nan=0.0) * 255.0, 0.0, 255.0).astype(np.uint8)]

    with np.errstate(invalid="ignore", over="ignore"):
        if mode == "intensity":
            return via_lut(np.sqrt(np.maximum(points["intensity"], 0.0) / s.intensity_max))
        if mode == "reflectivity":
            return via_lut(points["reflectivity"])
        if mode == "ring":
            return via_lut(points["ring"].astype(np.float32) / max(s.n_rings - 1, 1))
        if mode == "range":
            x, y, z = points["x"], points["y"], points["z"]
            return via_lut(np.sqrt(x * x + y * y + z * z) / s.range_max_m)
    if mode == "return_id":
        from rt_lidar.viewer.colors import RETURN_COLORS

        return RETURN_COLORS[np.minimum(points["return_id"], 3)]
    if mode == "sensor":
        from rt_lidar.viewer.colors import SENSOR_COLORS

        return np.repeat(SENSOR_COLORS[s.sensor_index % 8][None, :], points.size, 0)
    out = np.empty((points.size, 4), np.float32)
    out[:] = [0.45, 0.45, 0.45, 1.0]
    for bit, rgba in reversed(FLAG_COLORS):
        out[(points["flags"] & int(bit)) != 0] = rgba
    return out


def test_buffered_colours_match_the_plain_computation_and_reuse_memory() -> None:
    pts = _points(5000)
    pts["intensity"][:4] = [np.nan, -3.0, np.inf, 1e9]
    pts["reflectivity"][:4] = [np.nan, -1.0, np.inf, 2.0]
    pts["ring"][:3] = [63, 64, 1000]  # past the last ring: the last ring's colour
    pts["return_id"] = np.arange(pts.size) % 6
    pts["flags"] = np.arange(pts.size) % 256
    bufs = CloudBuffers()
    for scales in (ColorScales(255.0, 80.0, 64), ColorScales(100.0, 30.0, 16), ColorScales(1.0, 120.0, 1, 9)):
        pos = bufs.positions(pts)
        np.testing.assert_array_equal(pos, point_positions(pts))
        for mode in COLOR_MODES:
            ref = _reference_colors(pts, mode, scales)
            np.testing.assert_array_equal(bufs.colors(pts, mode, scales, pos), ref, err_msg=mode)
            np.testing.assert_array_equal(point_colors(pts, mode, scales), ref, err_msg=mode)
    # the next scan (a little smaller) lands in the same memory; a bigger one grows the buffers once
    first = bufs.colors(pts, "intensity")
    again = bufs.colors(pts[:4900], "range", positions=bufs.positions(pts[:4900]))
    assert np.shares_memory(first, again) and again.shape == (4900, 4) and again.flags.c_contiguous
    bigger = _points(6000)
    grown = bufs.colors(bigger, "ring")
    assert bufs.capacity >= 6000 and not np.shares_memory(first, grown)
    assert bufs.positions(pts[:0]).shape == (0, 3) and bufs.colors(pts[:0], "flags").shape == (0, 4)


def _firing_ordered_scan(rings: int, firings: int) -> np.ndarray:
    """A sensor in a 10 m cylinder: every firing one point a ring, in firing order (as scans come)."""
    n = rings * firings
    pts = np.zeros(n, POINT_DTYPE)
    # half a firing step off the column edges, where float32 atan2 may round either way
    az = np.repeat(np.linspace(-np.pi, np.pi, firings, endpoint=False) + np.pi / firings, rings)
    ring = np.arange(n) % rings
    elev = np.radians(np.linspace(-15.0, 15.0, rings))[ring]
    r = 10.0 / np.cos(elev) * (1.0 + 0.2 * np.sin(3 * az))
    pts["x"], pts["y"], pts["z"] = (
        r * np.cos(elev) * np.cos(az),
        r * np.cos(elev) * np.sin(az),
        r * np.sin(elev),
    )
    pts["ring"] = ring
    return pts


def test_range_panel_is_the_colormap_of_sqrt_range_and_thins_out_dense_scans() -> None:
    rings, columns = 16, 64
    header = {
        "elevations_deg": list(np.linspace(-15.0, 15.0, rings)),
        "columns": columns,
        "range_max_m": 80.0,
    }
    pts = _firing_ordered_scan(rings, columns)  # one point a pixel: every point is read
    assert range_panel_stride(pts.size, rings * columns, rings) == 1
    img = range_panel_rgb(pts, header)
    assert img.shape == (rings, columns, 3) and img.dtype == np.uint8
    # reference: the ranges placed by hand (row 0 the highest beam, column 0 behind), then the colormap
    r = np.sqrt(pts["x"] ** 2 + pts["y"] ** 2 + pts["z"] ** 2)
    az = np.degrees(np.arctan2(pts["y"], pts["x"]))
    col = ((180.0 - az) / 360.0 * columns).astype(int) % columns
    ref = np.full((rings, columns), np.nan)
    ref[rings - 1 - pts["ring"].astype(int), col] = r
    want = colormap(np.sqrt(ref / 80.0))
    assert np.abs(want.astype(int) - img).max() <= 3  # 256 colour steps instead of a continuous map
    assert np.array_equal(want.sum(-1) == 0, img.sum(-1) == 0)
    np.testing.assert_array_equal(range_panel_rgb(pts, header, point_positions(pts)), img)
    # ten points a pixel: read at a stride prime to the ring count, still no pixel left empty
    dense = _firing_ordered_scan(rings, 10 * columns)
    k = range_panel_stride(dense.size, rings * columns, rings)
    assert k == 5 and range_panel_stride(dense.size, rings * columns, 15) == 2
    thin = range_panel_rgb(dense, header)
    assert not np.any(thin.sum(-1) == 0)
    assert np.abs(thin.astype(int) - img).max() <= 12  # the same cylinder
    assert not range_panel_rgb(pts[:0], header).any()  # no points: all black
    # capped to the width shown: fewer columns, each the same cylinder, and more points a pixel
    narrow = range_panel_rgb(dense, header, max_columns=16)
    assert narrow.shape == (rings, 16, 3) and not np.any(narrow.sum(-1) == 0)
    assert range_panel_rgb(pts, header, max_columns=10_000).shape == (rings, columns, 3)


def _at(az_deg: float, el_deg: float, r: float, ring: int = 0) -> np.ndarray:
    pts = np.zeros(1, POINT_DTYPE)
    az, el = np.radians(az_deg), np.radians(el_deg)
    pts["x"], pts["y"], pts["z"] = r * np.cos(el) * np.cos(az), r * np.cos(el) * np.sin(az), r * np.sin(el)
    pts["ring"] = ring
    return pts


def test_range_panel_spans_the_field_of_view_of_a_sensor_that_looks_ahead() -> None:
    from rt_lidar.sensor.presets import load_preset
    from rt_lidar.sinks.stream import scan_header_figures

    header = {"elevations_deg": [-1.0, 1.0], "columns": 90, "azimuth_span_deg": 90.0, "range_max_m": 80.0}
    pts = np.concatenate([_at(40.0, 1.0, 20.0, ring=1), _at(-20.0, -1.0, 20.0), _at(170.0, 1.0, 20.0, 1)])
    img = range_panel_rgb(pts, header)
    lit = np.argwhere(img.sum(-1) > 0)
    # 40 deg left of ahead: column (45 - 40) / 90 * 90 = 5, top row (ring 1 is the higher beam);
    # 20 deg right: column 65, bottom row; the point behind the sensor is outside the field: not drawn
    assert sorted(map(tuple, lit.tolist())) == [(0, 5), (1, 65)]
    # a rosette: an elevation x azimuth grid over its circular field, square
    rosette = {"elevations_deg": [0.0], "columns": 40, "azimuth_span_deg": 40.0, "elevation_span_deg": 40.0}
    img = range_panel_rgb(np.concatenate([_at(0.0, 10.0, 20.0), _at(-15.0, -15.0, 20.0)]), rosette)
    assert img.shape == (40, 40, 3)
    assert sorted(map(tuple, np.argwhere(img.sum(-1) > 0).tolist())) == [(10, 20), (35, 35)]
    # what the presets put in their headers
    spans = {n: scan_header_figures(load_preset(n)) for n in ("HDL-64E", "AT128", "Cube 1", "Mid-40")}
    assert [spans[n]["azimuth_span_deg"] for n in spans] == [360.0, 120.0, 70.0, 38.4]
    assert spans["Mid-40"]["elevation_span_deg"] == 38.4 and "elevation_span_deg" not in spans["AT128"]
    assert spans["Mid-40"]["columns"] == 100  # sqrt of its 10,000 points a frame


def test_the_legend_names_every_mode_and_flag() -> None:
    from rt_lidar.viewer.colors import color_legend

    scales = ColorScales(intensity_max=100.0, range_max_m=50.0, n_rings=16)
    assert "0..100" in color_legend("intensity", scales) and "0..50 m" in color_legend("range", scales)
    assert "ring 0..15" in color_legend("ring", scales)
    flags = color_legend("flags")
    words = {
        "SATURATED": "saturated",
        "BLOOM": "bloom",
        "RAIN_CLUTTER": "rain",
        "SNOW_CLUTTER": "snow",
        "FOG_CLUTTER": "fog",
        "AMBIENT_NOISE": "sun",
        "THROUGH_GLASS": "glass",
    }
    assert all(words[str(flag.name)] in flags for flag, _rgba in FLAG_COLORS)
    assert all(color_legend(m) for m in COLOR_MODES)
    with pytest.raises(ValueError, match="unknown colour mode"):
        color_legend("heat")


def test_intensity_mask_colours() -> None:
    m = np.array([[0.0, 1.0], [4.0, -1.0]], np.float32)
    rgb = intensity_mask_rgb(m)
    want = colormap(np.sqrt(np.clip(m, 0, None) / 4.0))
    assert rgb.shape == (2, 2, 3) and rgb.dtype == np.uint8
    assert not rgb[0, 0].any() and not rgb[1, 1].any()  # dropped rays black
    assert np.abs(rgb[[0, 1], [1, 0]].astype(int) - want[[0, 1], [1, 0]]).max() <= 3
    assert not intensity_mask_rgb(np.zeros((3, 4), np.float32)).any()


def test_recording_plays_and_seeks(tmp_path) -> None:
    for i in range(3):
        pts = _points(100 + i)
        write_pcd(tmp_path / f"{i:06d}.pcd", pts)
    np.testing.assert_array_equal(read_any_pcd(tmp_path / "000001.pcd"), _points(101))
    rec = RecordingSource(tmp_path, rate_hz=1000.0)
    assert rec.recording.preset is None and rec.time_s(2) == pytest.approx(0.2)  # 10 Hz when unknown
    sizes = []
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        got = rec.poll()
        if "scan" in got:
            sizes.append(got["scan"].header["n"])
        if sizes and sizes[-1] == 102:
            break
    # in order, to the end, and every scan either shown or counted as skipped to keep to the clock
    assert sizes == sorted(sizes) and sizes[-1] == 102 and len(sizes) + rec.dropped == 3
    assert rec.poll() == {}  # stops at the end
    rec.seek(1)
    assert rec.poll()["scan"].points.size == 101 and len(rec.frame(0).header["elevations_deg"]) == 64
    with pytest.raises(ConfigError, match="none: not a folder of PCD or KITTI scans"):
        RecordingSource(tmp_path / "none")
    with pytest.raises(ConfigError, match="speed must be > 0"):
        RecordingSource(tmp_path, speed=0)


def test_recording_playback_keeps_to_the_clock_and_skips_what_it_cannot_show(tmp_path) -> None:
    for i in range(5):
        write_pcd(tmp_path / f"{i:06d}.pcd", _points(100 + i))
    clock = [100.0]
    rec = RecordingSource(tmp_path, clock=lambda: clock[0])  # no sensor named: 10 Hz

    def shown() -> int | None:
        got = rec.poll()
        return got["scan"].seq if "scan" in got else None

    assert shown() == 0 and shown() is None
    clock[0] += 0.05
    assert shown() is None
    clock[0] += 0.06  # 0.11 s: scan 1 is due
    assert shown() == 1
    clock[0] += 0.25  # a slow paint: at 0.36 s scan 3 is due, so scan 2 is skipped and counted
    assert shown() == 3 and rec.dropped == 1
    rec.playing = False
    clock[0] += 5.0
    assert shown() is None
    rec.playing = True  # resumes from scan 3 (the pause is not made up for)
    clock[0] += 0.05
    assert shown() is None
    clock[0] += 0.06
    assert shown() == 4 and rec.dropped == 1
    clock[0] += 1.0
    assert shown() is None  # the end
    rec.seek(1)
    assert shown() == 1
    clock[0] += 0.101
    assert shown() == 2  # plays on from where it was sought
    # looping: the last scan stays one scan period, then playback starts over on the clock
    looped = RecordingSource(tmp_path, loop=True, clock=lambda: clock[0])
    assert looped.poll()["scan"].seq == 0
    clock[0] += 0.41
    assert looped.poll()["scan"].seq == 4
    clock[0] += 0.05
    assert looped.poll() == {}  # 0.46 s: the last scan is still due on screen
    clock[0] += 0.05
    assert looped.poll()["scan"].seq == 0 and looped.poll() == {}
    clock[0] += 0.11
    assert looped.poll()["scan"].seq == 1


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
