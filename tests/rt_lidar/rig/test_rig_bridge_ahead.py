"""A rig over the bridge asks the server for every sensor's next frames ahead, in frame order: the
server casts frame k+1 while the controller works on frame k, and the scans stay those of one call at
a time (and of the rig in-process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import until

from rt_lidar.rig import load_rig
from rt_lidar.rig.bridge import RigFramesAhead, bridge_rig_loop
from rt_lidar.server.serve import EmbeddedServer, ServeOptions, start_embedded_server
from rt_lidar.unreal_bridge import AirSimClient

EXAMPLE = Path(__file__).parents[3] / "docs" / "rigs" / "roof-and-corners.toml"


@pytest.fixture
def served() -> Iterator[EmbeddedServer]:
    srv = start_embedded_server(ServeOptions(port=0, rig=str(EXAMPLE), paused=True, seed=0))
    yield srv
    srv.close()


def _scans(srv: EmbeddedServer, ask_ahead: int, frames: int = 4, shm: bool = False) -> dict[str, list[bytes]]:
    rig = load_rig(EXAMPLE)
    with AirSimClient("127.0.0.1", srv.port, timeout=30.0, shared_memory=shm) as client:
        loop, sources = bridge_rig_loop(client, rig, ask_ahead=ask_ahead)
        assert (loop.before_step is not None) == (ask_ahead > 0)
        got: dict[str, list[bytes]] = {s.name: [] for s in rig.sensors}
        try:
            while min(len(v) for v in got.values()) < frames:
                for name, scans in loop.step().items():
                    got[name] += [scan.points.tobytes() for scan in scans]
        finally:
            loop.close()
        for source in sources.values():
            assert source.stats.sector_mismatches == 0, source.stats.mismatch_detail
            assert source.stats.transport == ("shm" if shm else "tcp")
        assert client.ping()  # nothing left owed on the link
    return {name: scans[:frames] for name, scans in got.items()}


def test_asking_every_sensor_ahead_gives_the_scans_of_one_call_at_a_time(served: EmbeddedServer) -> None:
    one_at_a_time = _scans(served, 0)
    served.close()
    for depth, shm in ((1, False), (3, False), (2, True)):
        srv = start_embedded_server(ServeOptions(port=0, rig=str(EXAMPLE), paused=True, seed=0))
        try:
            assert _scans(srv, depth, shm=shm) == one_at_a_time, (depth, shm)
        finally:
            srv.close()


def test_the_next_frame_of_every_sensor_is_asked_for_before_it_is_read(served: EmbeddedServer) -> None:
    rig = load_rig(EXAMPLE)
    with AirSimClient("127.0.0.1", served.port, timeout=30.0) as client:
        loop, sources = bridge_rig_loop(client, rig, ask_ahead=2)
        try:
            ahead = loop.before_step
            assert isinstance(ahead, RigFramesAhead)
            loop.step()  # frame 0 read; frames 1 and 2 asked for every sensor, in frame order
            first = next(iter(loop.units.values())).pipeline
            assert ahead.asked == 2
            for source in sources.values():
                assert [a[:2] for a in source._ahead] == [first.frame_interval(1), first.frame_interval(2)]
            # the server advanced the sim past frame 2 before anything read frames 1 or 2
            assert until(lambda: served.sim.now_ns() == first.frame_interval(2)[1])
        finally:
            loop.close()
        assert all(not s._ahead for s in sources.values())  # closing read what was asked ahead
        assert client.ping()


def test_crosstalk_sensors_are_asked_ahead_with_their_pose_samples(served: EmbeddedServer) -> None:
    """Pose samples come with ``rtLidarGetBeamHits``: the frames asked ahead carry that call."""
    with AirSimClient("127.0.0.1", served.port, timeout=30.0) as client:
        loop, sources = bridge_rig_loop(client, load_rig(EXAMPLE), crosstalk=True, ask_ahead=2)
        try:
            assert isinstance(loop.before_step, RigFramesAhead)
            for _ in range(3):
                loop.step()
                for source in sources.values():
                    assert len(source._ahead) == 2
            for source in sources.values():
                assert source.stats.sector_mismatches == 0, source.stats.mismatch_detail
        finally:
            loop.close()
        assert client.ping()


def test_frames_asked_ahead_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="frames asked ahead must be >= 1, got 0"):
        RigFramesAhead([], [], 0)
