"""A lockstep bridge asks for frame k+1 (and k+2 with ``ask_depth`` 2) as soon as frame k's answer is in
(the server casts them while the controller decodes and runs the physics, two at once with depth 2):
the scans are the bytes of one frame at a time."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from scenes import wall_scene
from waiting import until

from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import load_preset
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer
from rt_lidar.unreal_bridge.casts import CastQueue
from rt_lidar.unreal_bridge.shm import ShmAttachments, list_segments
from rt_lidar.unreal_bridge.world import Scene, World, street_scene


class Bridge(NamedTuple):
    sim: EmbeddedSim
    client: AirSimClient
    source: BridgeSource
    pipe: Pipeline


class _WithoutServerInfo(AirSimServer):
    """A server with our extension but without ``rtLidarServerInfo`` (an older one, or an rpclib
    server that does not promise to answer in order)."""

    def _table(self) -> list[tuple[str, Any, int | tuple[int, ...]]]:
        return [row for row in super()._table() if row[0] != "rtLidarServerInfo"]


@contextlib.contextmanager
def _bridge(
    scene: Scene,
    seed: int = 0,
    server_type: type[AirSimServer] = AirSimServer,
    depth: int = 1,
    preset_name: str = "VLP-16",
    cast_threads: int | None = None,
    shared_memory: bool = False,
    shm_bytes: int = 16 << 20,
    server_shm_dir: Path | None = None,
    casts: CastQueue | None = None,
    beam: BeamConfig | None = None,
    poses: bool = False,
) -> Iterator[Bridge]:
    """A lidar (VLP-16) on our server over loopback, in lockstep at 20 Hz, through ``bridge_pipeline``
    asking ``depth`` frames ahead; with ``shared_memory`` the client offers its ring of segments (to a
    server that looks for them in ``server_shm_dir`` when given: one that cannot see them)."""
    preset = load_preset(preset_name)
    sim = EmbeddedSim(World(scene), preset, paused=True, cast_threads=cast_threads)
    server = server_type(sim, port=0)
    if server_shm_dir is not None:
        server.shm = ShmAttachments(directory=server_shm_dir)
    if casts is not None:
        server.casts = casts
    server.start()
    try:
        with AirSimClient(port=server.port, shared_memory=shared_memory, shm_bytes=shm_bytes) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0, poses=poses)
            yield Bridge(
                sim,
                client,
                source,
                bridge_pipeline(source, sim_hz=20.0, seed=seed, beam=beam, ask_depth=depth),
            )
    finally:
        server.close()


def _scans(depth: int, scans: int = 4, transport: str = "tcp", **bridge: Any) -> list[bytes]:
    with _bridge(street_scene(0), seed=4, depth=max(depth, 1), **bridge) as b:
        if not depth:
            b.source.ask_ahead = None
        assert b.source._in_order  # our server says it answers in order (rtLidarServerInfo)
        out = [scan.points.tobytes() for scan in b.pipe.scans(scans)]
        b.pipe.close()  # reads and drops the frames asked ahead: nothing left on the link
        assert not b.source._ahead and not b.client.rpc._in_flight and not b.client.rpc._answers
        end = b.pipe._interval(b.pipe.frame - 1)[1]
        # the server stopped at most one prefetched frame and the ones asked ahead past the last step
        assert end <= b.sim.now_ns() <= end + (1 + depth) * 50_000_000
        assert b.client.ping()
        assert b.source.stats.sector_mismatches == 0, b.source.stats.mismatch_detail
        assert b.client.transport == b.source.stats.transport == transport, b.client.shm_refused
        return out


def test_asking_ahead_gives_the_same_scans() -> None:
    one_at_a_time = _scans(0)
    assert _scans(1) == one_at_a_time
    assert _scans(2) == one_at_a_time  # two frames owed at once, cast at the same time


@pytest.mark.parametrize("shared_memory", [False, True], ids=["tcp", "shm"])
def test_sub_ray_bundles_asked_ahead_give_the_same_scans(shared_memory: bool) -> None:
    """Frames of ``rtLidarGetBeamHits`` (three sub-rays a pulse) go out ahead too, with their beam."""
    beam = BeamConfig(sub_rays=3)
    transport = "shm" if shared_memory else "tcp"
    one_at_a_time = _scans(0, scans=2, beam=beam)
    assert _scans(2, scans=2, beam=beam, shared_memory=shared_memory, transport=transport) == one_at_a_time
    with _bridge(street_scene(0), depth=2, beam=beam) as b:
        assert b.source.stats.sub_rays == 3 and b.source._can_ask_ahead()
        b.pipe._fetch(0)
        assert len(b.source._ahead) == 2  # frames 1 and 2 asked for with frame 0's answer
        b.pipe.close()


def test_two_frames_ahead_on_one_thread_each_give_the_scans_of_split_casts() -> None:
    """HDL-64E frames, large enough to be split over two threads one at a time, cast whole on one
    thread each, two at once (the demo's server): the same bytes."""
    split = _scans(0, scans=2, preset_name="HDL-64E")
    assert _scans(2, scans=2, preset_name="HDL-64E", cast_threads=1) == split


def test_asking_ahead_through_shared_memory_gives_the_scans_of_tcp_one_at_a_time(tmp_path: Path) -> None:
    """``--shm`` with two frames ahead: each frame in flight through a segment of its own; a first
    segment too small for a frame (1 MiB) grows; a server that refuses the offer gets TCP, still ahead."""
    one_at_a_time = _scans(0)
    assert _scans(2, shared_memory=True, transport="shm") == one_at_a_time
    assert _scans(1, shared_memory=True, transport="shm") == one_at_a_time
    assert _scans(2, shared_memory=True, shm_bytes=1 << 20, transport="shm") == one_at_a_time
    assert _scans(2, shared_memory=True, server_shm_dir=tmp_path) == one_at_a_time
    assert list_segments(pid=os.getpid()) == []


def test_the_demos_hdl64e_frames_through_shared_memory_two_ahead_give_the_split_casts_scans() -> None:
    split = _scans(0, scans=2, preset_name="HDL-64E")
    two_ahead = _scans(2, scans=2, preset_name="HDL-64E", cast_threads=1, shared_memory=True, transport="shm")
    assert two_ahead == split


class _Overlaps(CastQueue):
    """The server's cast turns, each held a little longer, counting how many run at once."""

    def __init__(self) -> None:
        super().__init__()
        self._count = threading.Lock()
        self.running = self.most = 0

    @contextlib.contextmanager
    def turn(self, rays: int) -> Iterator[None]:
        with super().turn(rays):
            with self._count:
                self.running += 1
                self.most = max(self.most, self.running)
            try:
                time.sleep(0.05)
                yield
            finally:
                with self._count:
                    self.running -= 1


@pytest.mark.parametrize(
    ("preset_name", "sub_rays", "poses"),
    [("VLP-16", 1, False), ("VLS-128", 1, False), ("VLP-16", 2, False), ("VLP-16", 1, True)],
)
@pytest.mark.parametrize("shared_memory", [False, True], ids=["tcp", "shm"])
def test_two_frames_asked_ahead_are_cast_at_once(
    shared_memory: bool, preset_name: str, sub_rays: int, poses: bool
) -> None:
    """Our server answers the hits calls of frames asked ahead later (on worker threads), through
    shared memory as over TCP: the casts of the two frames owed at once overlap. A VLS-128's 20 Hz
    frame (120,064 rays) is a heavy cast: two of them fit the heavy casts' ray budget together (they
    ran one at a time before, and the bridged VLS-128 demo kept its server on one core). Sub-ray
    bundles and pose samples (``rtLidarGetBeamHits``) are cast later too."""
    casts = _Overlaps()
    beam = BeamConfig(sub_rays=sub_rays) if sub_rays > 1 else None
    with _bridge(
        street_scene(0),
        depth=2,
        shared_memory=shared_memory,
        casts=casts,
        preset_name=preset_name,
        beam=beam,
        poses=poses,
    ) as b:
        assert b.source.stats.sub_rays == sub_rays
        for k in range(5):
            b.pipe._fetch(k)
            assert b.client.transport == ("shm" if shared_memory else "tcp")
            segments = [r.segment for _, _, r in b.source._ahead]
            if shared_memory:  # each frame in flight has a segment of its own
                assert len({s.name for s in segments if s is not None}) == len(segments) == 2
            else:
                assert segments == [None, None]
        b.pipe.close()
    assert casts.most == 2
    heavy = preset_name == "VLS-128"
    assert (casts.stats["heavy"] > 0) == heavy and casts.stats["heavy_at_once"] == (2 if heavy else 0)


def test_the_next_frame_is_cast_before_it_is_asked_for() -> None:
    with _bridge(wall_scene(15.0)) as b:
        b.pipe._fetch(0)  # frame 0 only; frame 1's requests go out with it
        assert until(lambda: b.sim.now_ns() == b.pipe._interval(1)[1])
        b.source.ask_ahead = None
        b.pipe._fetch(1)  # read from what came ahead; nothing more asked for
        b.pipe._fetch(2)
        time.sleep(0.2)
        assert b.sim.now_ns() == b.pipe._interval(2)[1]
        assert b.source.stats.sector_mismatches == 0, b.source.stats.mismatch_detail


def test_a_frame_other_than_the_one_asked_ahead_drops_it_and_gets_the_frame_asked_for() -> None:
    with _bridge(wall_scene(15.0)) as b:
        b.pipe._fetch(0)
        assert [a[:2] for a in b.source._ahead] == [b.pipe._interval(1)]
        t0, t1 = b.pipe._interval(2)
        firings, hits = b.pipe._fetch(2)  # frame 1, asked ahead, is skipped: read and dropped
        assert b.source.stats.sector_mismatches == 0, b.source.stats.mismatch_detail
        assert hits.firings.t_ns.min() >= t0 and hits.firings.t_ns.max() < t1
        assert len(hits.firings) == len(firings) > 0
        assert [a[:2] for a in b.source._ahead] == [b.pipe._interval(3)]
        assert b.client.ping()


def test_two_frames_ahead_are_both_cast_before_they_are_asked_for() -> None:
    with _bridge(wall_scene(15.0), depth=2) as b:
        b.pipe._fetch(0)  # frame 0; frames 1 and 2 go out with it
        assert [a[:2] for a in b.source._ahead] == [b.pipe._interval(1), b.pipe._interval(2)]
        assert until(lambda: b.sim.now_ns() == b.pipe._interval(2)[1])
        b.pipe._fetch(1)  # frame 3 goes out: two owed again
        assert [a[:2] for a in b.source._ahead] == [b.pipe._interval(2), b.pipe._interval(3)]
        t0, t1 = b.pipe._interval(3)
        _firings, hits = b.pipe._fetch(3)  # frame 2 skipped: read and dropped, frame 3 read
        assert hits.firings.t_ns.min() >= t0 and hits.firings.t_ns.max() < t1
        assert b.source.stats.sector_mismatches == 0, b.source.stats.mismatch_detail
        b.pipe.close()
        assert not b.source._ahead and not b.client.rpc._in_flight
        assert b.client.ping()


def test_the_controllers_own_firings_are_taken_when_the_answer_holds_exactly_them() -> None:
    """Lockstep: the answer's rings, times and directions are this side's firings of the frame, so
    those are used as they are (the rebuild from the directions, float64 trigonometry of every ray,
    is skipped); anything else is rebuilt from the answer."""
    from rt_lidar.bridge.hits import hits_from_wire

    with _bridge(street_scene(0)) as b:
        b.pipe._fetch(0)
        b.source.ask_ahead = None
        firings, hits = b.pipe._fetch(1)
        assert hits.firings is firings and len(firings) > 0
        b.client.omit_firings = frozenset()  # an answer that carries its firings
        answer = b.client.rt_lidar_get_hits()  # frame 2's interval is not the one passed below
        rebuilt = hits_from_wire(answer)
        assert hits_from_wire(answer, expected=firings).firings is not firings
        taken = hits_from_wire(answer, expected=rebuilt.firings)
        assert taken.firings is rebuilt.firings
        for field in ("direction", "range_m", "cos_incidence", "material", "segment"):
            assert getattr(taken, field).tobytes() == getattr(rebuilt, field).tobytes(), field


def test_a_server_that_does_not_say_it_answers_in_order_gets_one_frame_at_a_time() -> None:
    with _bridge(wall_scene(15.0), server_type=_WithoutServerInfo) as b:
        assert b.source.stats.extension and not b.source._in_order
        assert b.client.rt_lidar_server_info() == {}
        b.pipe._fetch(0)
        assert not b.source._ahead and not b.client.rpc._in_flight
        time.sleep(0.1)
        assert b.sim.now_ns() == b.pipe._interval(0)[1]


def test_a_refused_continue_takes_its_frames_answer_off_the_link() -> None:
    from rt_lidar.unreal_bridge.errors import RpcError

    with _bridge(wall_scene(15.0)) as b:
        request = b.client.send_frame_request(-1.0)  # simContinueForTime refuses negative seconds
        with pytest.raises(RpcError, match="seconds"):
            b.client.read_frame(request)
        assert not b.client.rpc._in_flight and not b.client.rpc._answers
        assert b.client.ping()


def test_two_full_beam_frames_asked_ahead_are_cast_at_once() -> None:
    """``--beam full`` frames asked ahead overlap on the server once it knows what a frame casts: a read
    claims its turn in the cast queue by the rays a firing took in the lidar's last answer (about 1.2),
    not by every firing as the 13-ray bundle (an HDL-64E's 20 Hz frame claimed 866,000 rays, more than
    the heavy casts' budget, so each frame was cast alone)."""
    from rt_lidar.sensor.scan_pattern import firings_between
    from rt_lidar.unreal_bridge.casts import HEAVY_BUDGET_RAYS

    casts = _Overlaps()
    beam = BeamConfig(return_mode="dual", full=True)
    with _bridge(
        street_scene(0), depth=2, casts=casts, preset_name="HDL-64E", cast_threads=1, beam=beam
    ) as b:
        for k in range(5):
            b.pipe._fetch(k)
        b.pipe.close()
        lidar = next(iter(b.sim._lidars.values()))
        per_firing = lidar.full_beam_rays_per_firing
    assert 1.0 < per_firing < 3.0
    assert casts.most == 2
    frame = len(firings_between(load_preset("HDL-64E"), 0, 50_000_000))
    assert 2 * per_firing * frame < HEAVY_BUDGET_RAYS < 13 * frame  # two fit together now, one did not
