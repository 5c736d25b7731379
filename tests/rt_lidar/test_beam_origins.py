"""Per-beam origins (issue 39 item 4): read from the vendors' files, turned with the head, and the rays
cast from them; presets without origins keep their firings (and digests) as they were."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.sensor.beam_origins import (
    TWO_POINT_FAR_M,
    ranges_from_decoded,
    two_point_corrections,
    two_point_shift,
)
from rt_lidar.sensor.presets import SensorPreset, list_presets, load_preset
from rt_lidar.sensor.scan_pattern import beam_origins, firings_between, scan_period_ns
from rt_lidar.unreal_bridge.world import World, street_scene
from rt_lidar.unreal_bridge.world.pose import quat_rotate

DATA = Path(__file__).resolve().parents[1] / "data" / "vendor"


def _preset(ref: str) -> SensorPreset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_preset(ref)


def test_shipped_presets_start_every_beam_on_the_axis():
    for name in list_presets():
        p = load_preset(name)
        assert p.beam_origins_m is None, name
        f = firings_between(p, 0, scan_period_ns(p) // 50)
        assert f.origin is None


def test_origins_come_from_the_files_as_the_decoders_read_them():
    os0 = _preset(str(DATA / "ouster" / "OS-0-32-U1_v2.2.0_1024x10.json"))
    assert os0.beam_origins_m is not None
    np.testing.assert_allclose(os0.beam_origins_m, [[0.02767, 0.0, 0.0]] * 32)  # its lidar_origin_to_beam
    assert "27.67 mm" in (os0.provenance or {})["beams.origin_m"]
    assert not any("beam origins" in u for u in (os0.provenance or {}).get("not_used", "").split("; "))

    s2 = _preset(str(DATA / "velodyne" / "64e_s2.1-sztaki.yaml"))
    assert s2.beam_origins_m is not None
    for b, o in zip(s2.beams, s2.beam_origins_m, strict=True):
        # vert_offset straight up; horiz_offset to the beam's left, which is at its azimuth offset
        a = math.radians(b.azimuth_offset_deg)
        ho = b.horiz_offset_correction_m or 0.0
        np.testing.assert_allclose(o, [-ho * math.sin(a), ho * math.cos(a), b.vert_offset_correction_m])
    assert np.abs(s2.beam_origins_m[:, 2]).max() > 0.2  # the HDL-64E's two laser blocks

    bp = _preset(str(DATA / "robosense" / "rs_bpearl" / "angle.csv"))
    assert bp.model == "RS-Bpearl" and bp.beam_origins_m is not None
    np.testing.assert_allclose(bp.beam_origins_m[0], [0.01473, 0.0, 0.09427])  # rs_driver's RX, RZ
    assert "rs_driver" in (bp.provenance or {})["beams.origin_m"]

    assert _preset(str(DATA / "velodyne" / "VLP-32A.yml")).beam_origins_m is None  # no offsets


def test_origins_turn_with_the_head():
    p = _preset(str(DATA / "ouster" / "OS-0-32-U1_v2.2.0_1024x10.json"))
    f = firings_between(p, 0, scan_period_ns(p))
    assert f.origin is not None and f.origin.shape == (len(f), 3)
    head = np.radians(f.azimuth_deg - p.azimuth_offsets_deg[f.ring])
    np.testing.assert_allclose(f.origin[:, 0], 0.02767 * np.cos(head), atol=1e-7)
    np.testing.assert_allclose(f.origin[:, 1], 0.02767 * np.sin(head), atol=1e-7)
    again = beam_origins(p, f.ring, f.azimuth_deg)
    assert again is not None
    np.testing.assert_array_equal(again, f.origin)


@pytest.mark.parametrize("ref", ["ouster/OS-0-32-U1_v2.2.0_1024x10.json", "velodyne/64e_s2.1-sztaki.yaml"])
def test_rays_start_at_their_beam_origin(ref):
    """Each hit, placed at origin + range * direction, lies on the surface the world has there (cast
    from the sensor's axis towards it, the first hit is at its distance); without the origin it would
    be centimetres off the surfaces."""
    preset = _preset(str(DATA / ref))
    world = World(street_scene(seed=1, ego_speed=0.0))
    t0 = 1_000_000_000
    firings = firings_between(preset, t0, t0 + scan_period_ns(preset) // 2)
    trans = np.zeros(len(world.material_names), np.float32)
    hits = WorldSource(world, preset.range.max_m, trans).hits(firings, t0, t0 + 1)
    ok = np.isfinite(hits.range_m) & (hits.range_m > 1.0) & (hits.range_m < 60.0)
    assert ok.sum() > 1000
    assert firings.origin is not None
    d = firings.directions()[ok].astype(np.float64)
    r = hits.range_m[ok].astype(np.float64)[:, None]
    pos, quat = WorldSource(world, 1.0, trans).sensor_pose(t0 * 1e-9)

    def on_surface(p_sensor: np.ndarray) -> float:
        """Share of the points whose own line of sight from the axis first meets a surface at them."""
        dist = np.linalg.norm(p_sensor, axis=1)
        dirs = quat_rotate(np.broadcast_to(quat, (len(dist), 4)), p_sensor / dist[:, None])
        rh = world.cast(
            np.broadcast_to(pos, dirs.shape).astype(np.float32), dirs.astype(np.float32), t0 * 1e-9, 200.0
        )
        return float(np.mean(np.abs(rh.distance - dist) < 0.002))

    assert on_surface(firings.origin[ok].astype(np.float64) + r * d) > 0.97
    assert on_surface(r * d) < 0.7


@pytest.mark.parametrize("beam", [[], ["--sub-rays", "3"]], ids=["one-ray", "sub-rays"])
def test_bridged_and_in_process_scans_of_a_preset_with_origins_are_the_same(tmp_path, beam, recwarn):
    """Over the bridge our server casts from the beam origins too, and the client places the points
    by them: the same scan bytes as in-process."""
    from rt_lidar.cli.main import main

    ref = str(DATA / "ouster" / "OS-0-32-U1_v2.2.0_1024x10.json")
    a, b = tmp_path / "bridged", tmp_path / "in-process"
    args = ["demo", "--preset", ref, "--frames", "2", "--quiet", *beam, "--out"]
    assert main([*args, str(a)]) == 0
    assert main([*args, str(b), "--in-process"]) == 0
    for name in ("000000.pcd", "000001.pcd"):
        assert (a / "scans" / name).read_bytes() == (b / "scans" / name).read_bytes()


def test_ranges_are_recovered_on_both_sides_of_the_two_point_far_point():
    """Points placed within a few millimetres of the two-point calibration's far point (25.04 m of packet
    distance, where the shift jumps to 0): the range the packet writer recovers rebuilds each point, and
    which side a point falls on follows its packet distance's 2 mm steps, as the decoder decides."""
    preset = _preset(str(DATA / "velodyne" / "64e_s2.1-sztaki.yaml"))
    table = two_point_corrections(preset)
    assert table is not None
    ring = np.repeat(np.arange(64, dtype=np.int64), 9)
    az = np.radians(np.tile(np.linspace(-170.0, 170.0, 9), 64))
    el = np.radians(preset.elevations_deg[ring])
    d = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=1)
    origins = np.zeros_like(d)
    offsets = np.tile(np.array([-0.006, -0.003, -0.0012, -0.0009, 0.0, 0.0009, 0.0012, 0.003, 0.006]), 64)
    s = table[ring, 0] + TWO_POINT_FAR_M + offsets
    xyz = d * s[:, None] + two_point_shift(table, ring, s, d)
    pts = np.zeros(s.size, dtype=[("x", "f8"), ("y", "f8"), ("z", "f8"), ("ring", "u2")])
    pts["x"], pts["y"], pts["z"], pts["ring"] = xyz[:, 0], xyz[:, 1], xyz[:, 2], ring
    got = ranges_from_decoded(preset, pts, origins, d)
    rebuilt = d * got[:, None] + two_point_shift(table, ring, got, d)  # the decoder: the packet's point
    assert np.linalg.norm(rebuilt - xyz, axis=1).max() < 1e-4
    shift = two_point_shift(table, ring, s, d)
    across = np.linalg.norm(shift - np.einsum("ij,ij->i", shift, d)[:, None] * d, axis=1)
    # a shift with a part across the beam has one range that rebuilds the point (where the shift is
    # along the beam, either side's range does, to within 0.1 mm)
    np.testing.assert_allclose(got[across > 1e-3], s[across > 1e-3], atol=1e-6)
    shifted = np.abs(two_point_shift(table, ring, s, d)).sum(axis=1) > 0
    packet_m = np.round(offsets / 0.002) * 0.002  # the packet's distance less the far point
    assert np.array_equal(shifted[np.abs(offsets) > 0.002], packet_m[np.abs(offsets) > 0.002] < 0)
    assert not shifted[offsets == 0.0009].any() and shifted[offsets == -0.0012].any()
