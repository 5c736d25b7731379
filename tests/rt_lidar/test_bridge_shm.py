"""The same-host fast path over real loopback sockets and /dev/shm: scans byte-identical to TCP's, the
fallbacks to TCP, and no segment left behind when the server or the client process is killed."""

from __future__ import annotations

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
from unreal_bridge import AirSimClient, AirSimServer, ConnectionLost
from unreal_bridge.shm import ShmAttachments, list_segments, shm_available
from unreal_bridge.world import World, street_scene

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
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with pytest.raises(ConnectionLost):
            client.rt_lidar_get_hits()
        assert list_segments(pid=proc.pid) == []  # the server never creates one
        client.close()
        assert ours not in list_segments()
    finally:
        proc.kill()
        proc.wait()


CLIENT_SCRIPT = textwrap.dedent(
    """
    import sys
    from unreal_bridge import AirSimClient
    from unreal_bridge.shm import list_segments
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


def test_killing_the_client_process_mid_run_leaves_no_segment():
    preset = load_preset("VLP-16")
    server = AirSimServer(EmbeddedSim(World(wall_scene(20.0)), preset, paused=True), port=0)
    server.start()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CLIENT_SCRIPT, str(server.port)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None
        name = child.stdout.readline().strip()
        for _ in range(5):  # killed while it fetches frames through the segment
            child.stdout.readline()
        assert name in list_segments(pid=child.pid)
        child.send_signal(signal.SIGKILL)
        child.wait()
        # the server sees the socket close and removes the dead client's segment
        assert _wait_until(lambda: list_segments(pid=child.pid) == []), list_segments(pid=child.pid)
        assert _wait_until(lambda: server.shm._maps == {})
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
