"""A lockstep bridge asks for frame k+1 as soon as frame k's answer is in (the server casts it while the
controller decodes and runs the physics): the scans are the bytes of one frame at a time."""

from __future__ import annotations

from scenes import wall_scene

from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.sensor.presets import load_preset
from rt_lidar.server.embedded_sim import EmbeddedSim
from unreal_bridge import AirSimClient, AirSimServer
from unreal_bridge.world import World, street_scene


def _run(ask_ahead: bool, scans: int = 4) -> tuple[list[bytes], int, int, BridgeSource]:
    """(scan bytes, the server's sim time after the run, the pipeline's last frame end, the source)."""
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
            last_end = pipe._interval(pipe.frame - 1)[1]
            assert client.ping()  # a plain call after the run reads past a frame still in flight
            return out, sim.now_ns(), last_end, source
    finally:
        server.close()


def test_asking_ahead_gives_the_same_scans_and_runs_the_server_one_frame_ahead() -> None:
    ahead, sim_t_ahead, end_ahead, src = _run(True)
    plain, sim_t_plain, end_plain, _ = _run(False)
    assert ahead == plain
    assert src.stats.sector_mismatches == 0, src.stats.mismatch_detail
    assert sim_t_plain >= end_plain
    # the frame after the last one was asked for (and cast) before the run ended; plus the one the
    # pipeline's own prefetch took
    assert sim_t_ahead - end_ahead == sim_t_plain - end_plain + 50_000_000


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
