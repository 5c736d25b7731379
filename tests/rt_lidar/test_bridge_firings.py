"""A lockstep controller whose firing schedule is the server's (``rtLidarServerInfo``'s ``firings``
digest for its lidar) asks the answers to leave the rings, times and directions out: 22 of a ray's
63 bytes. Its own firings of each frame stand for them, so the hits are the same bytes as with them."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from scenes import wall_scene

from rt_lidar.bridge.hits import hits_from_wire
from rt_lidar.bridge.source import BridgeSource
from rt_lidar.sensor.presets import list_presets, load_preset
from rt_lidar.sensor.scan_pattern import firings_between, schedule_digest
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer
from rt_lidar.unreal_bridge.beam_call import BEAM_HITS_METHOD, encode_beam
from rt_lidar.unreal_bridge.hits_codec import decode_hits
from rt_lidar.unreal_bridge.wire import LEAN_FIELDS, OMITTABLE_FIELDS
from rt_lidar.unreal_bridge.world import Pose, World, street_scene

_HITS_FIELDS = ("direction", "range_m", "cos_incidence", "material", "segment", "glass_range_m", "glass_cos")


def test_the_schedule_digest_tells_schedules_apart() -> None:
    hdl, vlp = load_preset("HDL-64E"), load_preset("VLP-16")
    assert schedule_digest(hdl) == schedule_digest(load_preset("HDL-64E"))
    assert schedule_digest(hdl) != schedule_digest(vlp)
    slower = dataclasses.replace(hdl, scan=dataclasses.replace(hdl.scan, rotation_hz=5.0))
    assert schedule_digest(slower) not in (None, schedule_digest(hdl))
    first = dataclasses.replace(hdl.beams[0], elevation_deg=hdl.beams[0].elevation_deg + 0.01)
    tilted = dataclasses.replace(hdl, beams=(first, *hdl.beams[1:]))  # one laser recalibrated
    assert schedule_digest(tilted) not in (None, schedule_digest(hdl))
    assert load_preset("Mid-40").scan.pattern == "rosette" and schedule_digest(load_preset("Mid-40")) is None
    others = [schedule_digest(load_preset(n)) for n in list_presets() if n != "Mid-40"]
    assert None not in others and len(set(others)) == len(others)  # every periodic preset its own


def _raw_frames(omit: frozenset[str], frames: int = 3, preset_name: str = "HDL-64E") -> list[Any]:
    sim = EmbeddedSim(World(street_scene(0)), load_preset(preset_name), paused=True)
    server = AirSimServer(sim, port=0).start()
    try:
        with AirSimClient(port=server.port) as client:
            client.rpc.call("rtLidarGetHits", "", "")  # the time origin
            out = []
            for _ in range(frames):
                client.sim_continue_for_time(0.05)
                out.append(client.rpc.call("rtLidarGetHits", "", "", {"omit": sorted(omit)}))
            return out
    finally:
        server.close()


def _bin_bytes(raw: Any) -> int:
    return sum(len(f["data"]) for f in raw["fields"].values())


def test_an_answer_without_its_firings_gives_the_same_hits_with_a_third_fewer_bytes() -> None:
    preset = load_preset("HDL-64E")
    full = _raw_frames(OMITTABLE_FIELDS)
    lean = _raw_frames(LEAN_FIELDS)
    for a, b in zip(full, lean, strict=True):
        assert sorted(b["omitted"]) == sorted(LEAN_FIELDS)
        assert not {"ring", "time", "direction"} & b["fields"].keys()
        rays = a["count"]
        assert rays == b["count"] > 60_000
        assert _bin_bytes(a) - _bin_bytes(b) == 22 * rays  # u2 ring, i8 time, 3 x f4 direction
        # a third fewer until issue 40's glass_mirror_* fields (20 bytes a ray in a plain answer, sent when
        # some ray met glass: the street's always do) grew both answers; a quarter fewer now
        assert _bin_bytes(b) < 0.75 * _bin_bytes(a)
        wa = decode_hits(a, omit=OMITTABLE_FIELDS)
        wb = decode_hits(b, omit=LEAN_FIELDS)
        assert wb.omitted == LEAN_FIELDS and "direction" not in wb.extras
        expected = firings_between(preset, int(wa.info["t0_ns"]), int(wa.info["t1_ns"]))
        ha, hb = hits_from_wire(wa, expected=expected), hits_from_wire(wb, expected=expected)
        assert ha.firings is expected and hb.firings is expected  # the full answer's firings are these
        for name in _HITS_FIELDS:
            assert getattr(ha, name).tobytes() == getattr(hb, name).tobytes(), name


def test_an_answer_without_its_firings_needs_this_sides_firings_of_as_many_rays() -> None:
    (raw,) = _raw_frames(LEAN_FIELDS, frames=1, preset_name="VLP-16")
    answer = decode_hits(raw, omit=LEAN_FIELDS)
    with pytest.raises(ValueError, match=r"left out \['direction', 'ring', 'time'\].*\(none\)"):
        hits_from_wire(answer)
    t0, t1 = int(answer.info["t0_ns"]), int(answer.info["t1_ns"])
    shorter = firings_between(load_preset("VLP-16"), t0, (t0 + t1) // 2)
    with pytest.raises(ValueError, match=f"\\({len(shorter)}\\) cannot stand for them"):
        hits_from_wire(answer, expected=shorter)


def test_a_bundle_answer_keeps_its_firings_when_asked_to_leave_them_out() -> None:
    sim = EmbeddedSim(World(wall_scene(12.0)), load_preset("VLP-16"), paused=True)
    server = AirSimServer(sim, port=0).start()
    try:
        with AirSimClient(port=server.port) as client:
            client.sim_continue_for_time(0.05)
            beam = encode_beam(np.array([[0.0, 0.0], [1e-3, 0.0]]), np.array([0.5, 0.5]), None, False)
            omit = sorted(LEAN_FIELDS)
            raw: Any = client.rpc.call(BEAM_HITS_METHOD, "", "", {**beam, "omit": omit})
    finally:
        server.close()
    assert raw["info"]["sub_rays"] == 2
    assert raw["omitted"] == sorted(OMITTABLE_FIELDS)
    assert {"ring", "time", "direction", "pulse_direction"} <= raw["fields"].keys()


def _two_lidar_sim() -> EmbeddedSim:
    vlp = load_preset("VLP-16")
    mount = Pose.from_xyz_rpy(1.0, 0.0, 1.5)
    return EmbeddedSim(
        World(wall_scene(15.0)), load_preset("HDL-64E"), paused=True, more_lidars=[("corner", vlp, mount)]
    )


def test_only_a_lidar_whose_schedule_is_this_sides_leaves_its_firings_out() -> None:
    """One client, two lidars: the one read with the server's preset leaves its firings out, the one
    read with another schedule (a re-timed VLP-16) gets them; a free-running reader always does."""
    sim = _two_lidar_sim()
    server = AirSimServer(sim, port=0).start()
    vlp = load_preset("VLP-16")
    retimed = dataclasses.replace(vlp, scan=dataclasses.replace(vlp.scan, rotation_hz=20.0))
    try:
        with AirSimClient(port=server.port) as client:
            client.reset()
            main = BridgeSource(client, load_preset("HDL-64E"), lockstep=True, lidar_name="Lidar1")
            other = BridgeSource(client, retimed, lockstep=True, lidar_name="corner", advance_clock=False)
            assert client.omit_firings == {"Lidar1"}
            assert main.stats.omitted == sorted(LEAN_FIELDS)
            assert other.stats.omitted == sorted(OMITTABLE_FIELDS)
            assert client.omit_for("corner") == OMITTABLE_FIELDS
        with AirSimClient(port=server.port) as client:
            free = BridgeSource(client, load_preset("HDL-64E"), lockstep=False, lidar_name="Lidar1")
            assert free.stats.extension and not client.omit_firings
    finally:
        server.close()


def test_a_bridged_run_without_the_firings_makes_the_in_process_scans(tmp_path: Any) -> None:
    """Lockstep over TCP, the firings left out (the summary says so): every scan is the in-process
    run's, byte for byte."""
    from rt_lidar.cli.main import main

    common = ["--preset", "VLP-16", "--frames", "3", "--quiet", "--no-rosbag"]
    assert main(["demo", *common, "--out", str(tmp_path / "bridged")]) == 0
    assert main(["demo", "--in-process", *common, "--out", str(tmp_path / "local")]) == 0
    import json

    summary = json.loads((tmp_path / "bridged" / "summary.json").read_text())
    assert summary["bridge"]["omitted"] == ["direction", "normal", "point", "ring", "time"]
    assert summary["bridge"]["sector_mismatches"] == 0
    for k in range(3):
        for ext in ("pcd", "bin"):
            a = (tmp_path / "bridged" / "scans" / f"{k:06d}.{ext}").read_bytes()
            b = (tmp_path / "local" / "scans" / f"{k:06d}.{ext}").read_bytes()
            assert len(a) > 10_000 and a == b, (k, ext)
