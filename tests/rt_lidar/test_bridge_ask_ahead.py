"""A lockstep bridge asks for frame k+1 as soon as frame k's answer is in (the server casts it while the
controller decodes and runs the physics): the scans are the bytes of one frame at a time."""

from __future__ import annotations

import time
from collections.abc import Callable

from scenes import wall_scene

from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.sensor.presets import load_preset
from rt_lidar.server.embedded_sim import EmbeddedSim
from unreal_bridge import AirSimClient, AirSimServer
from unreal_bridge.world import World, street_scene


def _run(ask_ahead: bool, scans: int = 4) -> tuple[list[bytes], BridgeSource]:
    """(scan bytes, the source) of a bridged VLP-16 run on the street."""
    preset = load_preset("VLP-16")
    sim = EmbeddedSim(World(street_scene(0)), preset, paused=True)
    server = AirSimServer(sim, port=0)
    server.start()
    try:
        with AirSimClient(port=server.port) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            pipe = bridge_pipeline(source, sim_hz=20.0, seed=4)
            if not ask_ahead:
                source.ask_ahead = None
            out = [scan.points.tobytes() for scan in pipe.scans(scans)]
            pipe.close()
            assert client.ping()  # a plain call after the run reads past a frame still in flight
            return out, source
    finally:
        server.close()


def test_asking_ahead_gives_the_same_scans() -> None:
    ahead, src = _run(True)
    plain, _ = _run(False)
    assert ahead == plain
    assert src.stats.sector_mismatches == 0, src.stats.mismatch_detail


def _until(cond: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def test_the_next_frame_is_cast_before_it_is_asked_for() -> None:
    preset = load_preset("VLP-16")
    sim = EmbeddedSim(World(wall_scene(15.0)), preset, paused=True)
    server = AirSimServer(sim, port=0)
    server.start()
    try:
        with AirSimClient(port=server.port) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            pipe = bridge_pipeline(source, sim_hz=20.0)
            pipe._fetch(0)  # frame 0 only; frame 1's requests go out with it
            assert _until(lambda: sim.now_ns() == pipe._interval(1)[1])
            source.ask_ahead = None
            pipe._fetch(1)  # read from what came ahead; nothing more asked for
            pipe._fetch(2)
            time.sleep(0.2)
            assert sim.now_ns() == pipe._interval(2)[1]
            assert source.stats.sector_mismatches == 0, source.stats.mismatch_detail
    finally:
        server.close()


def test_a_frame_other_than_the_one_asked_ahead_drops_it_and_gets_the_frame_asked_for() -> None:
    preset = load_preset("VLP-16")
    sim = EmbeddedSim(World(wall_scene(15.0)), preset, paused=True)
    server = AirSimServer(sim, port=0)
    server.start()
    try:
        with AirSimClient(port=server.port) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            pipe = bridge_pipeline(source, sim_hz=20.0)
            pipe._fetch(0)
            assert source._ahead is not None and source._ahead[:2] == pipe._interval(1)
            t0, t1 = pipe._interval(2)
            firings, hits = pipe._fetch(2)  # frame 1, asked ahead, is skipped: read and dropped
            assert source.stats.sector_mismatches == 0, source.stats.mismatch_detail
            assert hits.firings.t_ns.min() >= t0 and hits.firings.t_ns.max() < t1
            assert len(hits.firings) == len(firings) > 0
            assert source._ahead is not None and source._ahead[:2] == pipe._interval(3)
            assert client.ping()
    finally:
        server.close()
