"""The same-host fast path over real loopback sockets and /dev/shm: scans byte-identical to TCP's, the
fallbacks to TCP, and no segment left behind when the server or the client process is killed."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from old_servers import WithoutBeamCall
from scenes import wall_scene

from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.config import SunConfig
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import list_presets, load_preset
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.server.serve import ServeOptions, start_server_process
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer, ConnectionLost
from rt_lidar.unreal_bridge.shm import ShmAttachments, list_segments, shm_available
from rt_lidar.unreal_bridge.world import World, street_scene

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not shm_available(), reason="no writable /dev/shm")


def _scans(preset, shared_memory, scans=2, beam=None, sun=None, server_shm_dir=None, backend=None):
    backend = backend or EmbeddedSim(World(street_scene(0)), preset, paused=True)
    server = AirSimServer(backend, port=0)
    if server_shm_dir is not None:  # a server that cannot see this host's /dev/shm (another host's)
        server.shm = ShmAttachments(directory=server_shm_dir)
        server.rpc.on_disconnect = server.shm.on_disconnect
    server.start()
    try:
        with AirSimClient(port=server.port, shared_memory=shared_memory, shm_bytes=1 << 20) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            pipe = bridge_pipeline(source, 20.0, seed=3, beam=beam, sun=sun)
            try:
                return pipe.scans(scans), source.stats
            finally:
                pipe.close()
    finally:
        server.close()


def _assert_identical(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.points.size > 0
        assert x.points.tobytes() == y.points.tobytes()
        assert (x.fired, x.dropped) == (y.fired, y.dropped)
        assert x.extras.keys() == y.extras.keys()
        for k in x.extras:
            assert x.extras[k].tobytes() == y.extras[k].tobytes()


@pytest.mark.parametrize("name", list_presets())
def test_every_preset_gives_the_same_scans_through_shared_memory_as_through_tcp(name):
    preset = load_preset(name)
    tcp, tcp_stats = _scans(preset, shared_memory=False)
    shm, shm_stats = _scans(preset, shared_memory=True)  # a 1 MiB segment first: grown after one answer
    assert tcp_stats.transport == "tcp" and shm_stats.transport == "shm"
    assert shm_stats.shm_refused is None and tcp_stats.sector_mismatches == shm_stats.sector_mismatches == 0
    _assert_identical(tcp, shm)
    assert list_segments(pid=os.getpid()) == []


def test_sub_rays_and_sunlight_through_shared_memory_equal_tcp():
    preset = load_preset("VLP-16")
    beam, sun = BeamConfig(sub_rays=7, return_mode="dual"), SunConfig(60_000.0, (0.3, -0.5, 0.4))
    tcp, _ = _scans(preset, False, beam=beam, sun=sun)
    shm, stats = _scans(preset, True, beam=beam, sun=sun)
    assert stats.transport == "shm" and stats.sub_rays == 7 and stats.sun
    _assert_identical(tcp, shm)


def test_a_server_that_cannot_see_the_segment_answers_over_tcp(tmp_path):
    preset = load_preset("VLP-16")
    tcp, _ = _scans(preset, False)
    fallback, stats = _scans(preset, True, server_shm_dir=tmp_path)
    assert stats.transport == "tcp" and "no such segment" in str(stats.shm_refused)
    _assert_identical(tcp, fallback)
    assert list_segments(pid=os.getpid()) == []


def test_a_server_without_the_beam_call_is_asked_over_tcp():
    preset = load_preset("VLP-16")
    tcp, _ = _scans(preset, False)
    old = WithoutBeamCall(EmbeddedSim(World(street_scene(0)), preset, paused=True))
    fallback, stats = _scans(preset, True, backend=old)
    assert stats.transport == "tcp" and "refused the offer" in str(stats.shm_refused)
    _assert_identical(tcp, fallback)


def test_a_frame_asked_while_a_too_small_answer_is_read_gets_a_segment_it_fits():
    """The ring grows as soon as a too-small segment's inline answer is in, before ``before_decode``
    asks for the next frame: that frame is written through shared memory, not inline again."""
    preset = load_preset("HDL-64E")
    server = AirSimServer(EmbeddedSim(World(street_scene(0)), preset, paused=True), port=0).start()
    try:
        with AirSimClient(port=server.port, shared_memory=True, shm_bytes=1 << 20) as client:
            client.sim_continue_for_time(0.005)
            assert len(client.rt_lidar_get_hits().ring) > 0 and client.transport == "shm"  # fits 1 MiB
            big = client.send_frame_request(0.1)  # ~130,000 rays: over 1 MiB
            assert big.segment is not None and big.segment.size == 1 << 20
            asked: list = []
            hits = client.read_frame(big, before_decode=lambda: asked.append(client.send_frame_request(0.1)))
            assert client.transport == "tcp" and len(hits.ring) > 100_000
            (nxt,) = asked
            assert nxt.segment is not None and nxt.segment.size > 1 << 20
            assert len(client.read_frame(nxt).ring) > 100_000 and client.transport == "shm"
            assert list_segments(pid=os.getpid()) == [nxt.segment.name]  # the small one went on its return
        assert list_segments(pid=os.getpid()) == []
    finally:
        server.close()


def _wait_until(cond, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_killing_the_server_process_leaves_no_segment():
    proc, port = start_server_process(ServeOptions(port=0, scene="street", preset="HDL-64E", paused=True))
    try:
        client = AirSimClient(port=port, timeout=30.0, shared_memory=True)
        client.rt_lidar_get_hits()
        client.sim_continue_for_time(0.05)
        assert len(client.rt_lidar_get_hits().points) > 60_000
        assert client.transport == "shm"
        (ours,) = list_segments(pid=os.getpid())
        ahead = [client.send_frame_request(0.05) for _ in range(2)]  # that segment and one more
        in_flight = {r.segment.name for r in ahead if r.segment is not None}
        assert len(in_flight) == 2 and ours in in_flight
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for request in ahead:
            with pytest.raises(ConnectionLost):
                client.read_frame(request)
        assert not in_flight & set(list_segments())  # lost with their answers: removed, never reused
        with pytest.raises(ConnectionLost):
            client.rt_lidar_get_hits()
        assert list_segments(pid=proc.pid) == []  # the server never creates one
        client.close()
        assert list_segments(pid=os.getpid()) == []
    finally:
        proc.kill()
        proc.wait()


CLIENT_SCRIPT = textwrap.dedent(
    """
    import sys
    from rt_lidar.unreal_bridge import AirSimClient
    from rt_lidar.unreal_bridge.shm import list_segments
    import os
    c = AirSimClient(port=int(sys.argv[1]), shared_memory=True)
    c.rt_lidar_get_hits()
    while True:
        c.sim_continue_for_time(0.05)
        c.rt_lidar_get_hits()
        if c.transport == "shm":
            print(list_segments(pid=os.getpid())[0], flush=True)
    """
)


RING_CLIENT_SCRIPT = textwrap.dedent(
    """
    import collections, os, sys
    from rt_lidar.unreal_bridge import AirSimClient
    from rt_lidar.unreal_bridge.shm import list_segments
    c = AirSimClient(port=int(sys.argv[1]), shared_memory=True)
    c.rt_lidar_get_hits()
    ahead = collections.deque(c.send_frame_request(0.05) for _ in range(2))
    while True:  # two frames asked ahead, as rt-lidar demo asks
        c.read_frame(ahead.popleft(), before_decode=lambda: ahead.append(c.send_frame_request(0.05)))
        if c.transport == "shm":
            print(" ".join(list_segments(pid=os.getpid())), flush=True)
    """
)


@pytest.mark.parametrize("script", [CLIENT_SCRIPT, RING_CLIENT_SCRIPT], ids=["one-at-a-time", "ring"])
def test_killing_the_client_process_mid_run_leaves_no_segment(script):
    preset = load_preset("VLP-16")
    server = AirSimServer(EmbeddedSim(World(wall_scene(20.0)), preset, paused=True), port=0)
    server.start()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(server.port)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None
        names = child.stdout.readline().split()
        for _ in range(5):  # killed while it fetches frames through the segments
            names = child.stdout.readline().split()
        assert len(names) == (3 if script is RING_CLIENT_SCRIPT else 1)
        assert set(names) <= set(list_segments(pid=child.pid))
        child.send_signal(signal.SIGKILL)
        child.wait()
        # the server sees the socket close and removes the dead client's segments, and unmaps them
        # (those its answers were writing once written)
        assert _wait_until(lambda: list_segments(pid=child.pid) == []), list_segments(pid=child.pid)
        assert _wait_until(lambda: server.shm._maps == {} and server.shm.mapped == 0)
    finally:
        child.kill()
        child.wait()
        server.close()


def test_demo_with_shm_writes_the_files_the_tcp_demo_writes(tmp_path):
    from rt_lidar.config import RunConfig
    from rt_lidar.session.demo import run_demo

    runs = {}
    for shm in (False, True):
        out = tmp_path / ("shm" if shm else "tcp")
        opts = RunConfig(preset="VLP-16", frames=3, out=str(out), progress=False, shared_memory=shm)
        summary = run_demo(opts)
        runs[shm] = (summary, sorted(f for f in (out / "scans").iterdir() if f.suffix in (".pcd", ".bin")))
    (tcp_run, tcp_files), (shm_run, shm_files) = runs[False], runs[True]
    assert tcp_run["bridge"]["transport"] == "tcp" and shm_run["bridge"]["transport"] == "shm"
    assert shm_run["bridge"]["shm_refused"] is None and shm_run["bridge"]["sector_mismatches"] == 0
    assert [f.name for f in tcp_files] == [f.name for f in shm_files] and len(tcp_files) >= 6
    for a, b in zip(tcp_files, shm_files, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert list_segments(pid=os.getpid()) == []


# frames asked ahead through the ring of segments ----------------------------------------------------
FRAME_S = 0.05
FRAMES = 8


def _hits_bytes(h):
    fields = ("points", "normals", "segmentation", "ring", "time", "range", "miss")
    extras = {k: v.tobytes() for k, v in h.extras.items()}
    return [getattr(h, f).tobytes() for f in fields], extras, repr(h.info), h.pose, h.time_stamp


class _Frames:
    """Lockstep frames of the street (VLP-16) from our server over loopback: one at a time, or ``depth``
    asked ahead (``AirSimClient.send_frame_request`` / ``read_frame``, as the controller asks)."""

    def __init__(self, shared_memory, shm_bytes=16 << 20):
        self.server = AirSimServer(
            EmbeddedSim(World(street_scene(0)), load_preset("VLP-16"), paused=True), port=0
        )
        self.server.start()
        self.client = AirSimClient(port=self.server.port, shared_memory=shared_memory, shm_bytes=shm_bytes)
        self.client.reset()
        self.client.rt_lidar_get_hits()  # the controller's probe: the time origin (and the first offer)
        self.transports, self.segments = [], []

    def close(self):
        self.client.close()
        self.server.close()

    def one_at_a_time(self, frames):
        out = []
        for _ in range(frames):
            self.client.sim_continue_for_time(FRAME_S)
            out.append(_hits_bytes(self.client.rt_lidar_get_hits()))
        return out

    def asked_ahead(self, frames, depth, on_frame=None):
        c = self.client
        ahead = collections.deque(c.send_frame_request(FRAME_S) for _ in range(depth))
        out: list[object] = []

        def ask_next():
            if len(out) + len(ahead) < frames:
                ahead.append(c.send_frame_request(FRAME_S))

        while len(out) < frames:
            if on_frame is not None:
                on_frame(len(out))
            request = ahead.popleft()
            self.segments.append(request.segment.name if request.segment is not None else None)
            out.append(c.read_frame(request, before_decode=ask_next))
            self.transports.append(c.transport)
        # taken only now, after the segments were written again: the decoded arrays are copies
        return [_hits_bytes(h) for h in out]


@pytest.fixture(scope="module")
def tcp_frames():
    run = _Frames(shared_memory=False)
    try:
        return run.one_at_a_time(FRAMES)
    finally:
        run.close()


def test_frames_asked_ahead_through_a_ring_of_segments_equal_tcp_one_at_a_time(tcp_frames):
    run = _Frames(shared_memory=True)
    try:
        assert run.asked_ahead(FRAMES, depth=2) == tcp_frames
        assert run.transports == ["shm"] * FRAMES and run.client.shm_refused is None
        # three frames in flight at a time (the one read and two ahead), each through its own segment
        assert all(len(set(run.segments[k : k + 3])) == 3 for k in range(FRAMES - 2)), run.segments
        assert len(set(run.segments)) == 3  # the ring: reused, no more than depth + 1
        assert sorted(list_segments(pid=os.getpid())) == sorted(set(run.segments))
        assert sorted(run.server.shm._maps) == sorted(set(run.segments))
    finally:
        run.close()
    assert list_segments(pid=os.getpid()) == []


def test_segments_too_small_for_the_frames_asked_ahead_grow_and_give_the_same_hits(tcp_frames):
    run = _Frames(shared_memory=True, shm_bytes=1 << 20)  # a VLP-16 frame needs ~1.3 MB
    try:
        assert run.asked_ahead(FRAMES, depth=2) == tcp_frames
        # the frames asked with 1 MiB segments came inline, the rest through grown ones
        first_shm = run.transports.index("shm")
        assert 1 <= first_shm <= 3 and run.transports[first_shm:] == ["shm"] * (FRAMES - first_shm)
        assert run.client.shm_refused is None and run.client._shm_size > 1 << 20
        assert all(seg.size >= run.client._shm_size for seg in run.client._free)
        assert len(list_segments(pid=os.getpid())) <= 3
    finally:
        run.close()
    assert list_segments(pid=os.getpid()) == []


def test_a_server_that_refuses_the_offer_mid_run_answers_over_tcp_and_asking_ahead_goes_on(
    tcp_frames, tmp_path
):
    run = _Frames(shared_memory=True)

    def refuse_from_frame_2(k):
        if k == 2:  # frames asked from now on meet a server that cannot see this host's /dev/shm
            run.server.shm = ShmAttachments(directory=tmp_path)

    try:
        assert run.asked_ahead(FRAMES, depth=2, on_frame=refuse_from_frame_2) == tcp_frames
        shm = run.transports.count("shm")  # frames 0, 1 (2, 3 when the server took them before)
        assert 2 <= shm <= 4 and run.transports == ["shm"] * shm + ["tcp"] * (FRAMES - shm)
        assert "no such segment" in str(run.client.shm_refused)
        assert run.segments[-1] is None  # asked over TCP once the refusal was read
        assert list_segments(pid=os.getpid()) == []  # every segment went when its answer was read
        assert run.client.ping()
    finally:
        run.close()


def test_closing_the_client_with_frames_in_flight_removes_every_segment_of_its_ring():
    run = _Frames(shared_memory=True)
    try:
        run.asked_ahead(3, depth=2)
        requests = [run.client.send_frame_request(FRAME_S) for _ in range(2)]  # in flight, not read
        assert all(r.segment is not None for r in requests)
        assert len(list_segments(pid=os.getpid())) == 3
        run.client.close()
        assert list_segments(pid=os.getpid()) == []
        with pytest.raises(ConnectionLost):
            run.client.read_frame(requests[0])
    finally:
        run.close()
    assert list_segments(pid=os.getpid()) == []


def test_a_frame_asked_ahead_through_shared_memory_maps_its_segment_only_while_its_answer_is_written():
    """The server prepares such a frame now and casts it later: until then (and if it never runs, its
    connection gone) the client's segment is not mapped, and once written it is let go of."""
    from rt_lidar.unreal_bridge.rpc import Later
    from rt_lidar.unreal_bridge.shm import ShmSegment

    sim = EmbeddedSim(World(wall_scene(12.0)), load_preset("VLP-16"), paused=True)
    server = AirSimServer(sim, port=0)
    seg = ShmSegment(16 << 20)
    try:
        sim.continue_for_time(0.05)
        later = server._beam_hits("", "", {"transport": seg.offer()})
        assert isinstance(later, Later)
        assert server.shm.mapped == 0  # not attached before the work runs
        answer = later.work()
        assert "shm" in answer and answer["fields"]["range"]["shm"][1] > 0
        assert server.shm.mapped == 1 and not any(e.users for e in server.shm._maps.values())
    finally:
        server.close()
        seg.close()
