"""``rt-lidar serve --device``: the served world cast by the BVH kernel (its CUDA source built for the
CPU here; CuPy where a GPU is), asked over loopback by our client and by the stock ``airsim`` client, and
held to the same server casting with the CPU caster."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from peers import run_peer_json

from rt_lidar.errors import ConfigError
from rt_lidar.kernels.xp import cupy_available
from rt_lidar.pipeline.device_world import BvhWorld
from rt_lidar.server.serve import ServeOptions, start_embedded_server
from rt_lidar.unreal_bridge import AirSimClient

NO_CUDA = pytest.mark.skipif(not cupy_available(), reason="no CUDA device")
DEVICES = ["cuda-source-on-cpu", pytest.param("cuda", marks=NO_CUDA)]

STOCK_SCRIPT = r"""
import json, sys
import airsim
c = airsim.CarClient(port=int(sys.argv[1]), timeout_value=20)
c.confirmConnection()
c.simPause(True)
counts = []
for _ in range(3):
    c.simContinueForTime(0.05)
    counts.append(len(c.getLidarData().point_cloud) // 3)
print(json.dumps(counts))
"""


def _frames(device: str, frames: int = 3) -> list:
    served = start_embedded_server(ServeOptions(port=0, device=device, paused=True, preset="VLP-16"))
    try:
        assert isinstance(served.sim.world, BvhWorld) == (device != "cpu")
        with AirSimClient(port=served.port) as client:
            out = []
            for _ in range(frames):
                client.sim_continue_for_time(0.05)
                out.append(client.rt_lidar_get_hits())
            return out
    finally:
        served.close()


@pytest.fixture(scope="module")
def cpu_frames() -> list:
    return _frames("cpu")


@pytest.mark.parametrize("device", DEVICES)
def test_served_hits_cast_on_the_device_are_the_cpu_casters(device: str, cpu_frames: list) -> None:
    for want, have in zip(cpu_frames, _frames(device), strict=True):
        assert want.range.size > 10_000 and have.range.size == want.range.size
        assert (have.ring == want.ring).all() and (have.time == want.time).all()
        same_miss = have.miss == want.miss
        assert same_miss.mean() >= 0.9998
        hit = ~want.miss & same_miss
        close = np.abs(have.range[hit] - want.range[hit]) <= 1e-4 * np.maximum(want.range[hit], 1.0)
        assert close.mean() >= 0.9998
        assert (have.segmentation[hit] == want.segmentation[hit]).mean() >= 0.9998


@pytest.mark.parametrize("device", DEVICES)
def test_stock_airsim_client_reads_the_device_served_world(device: str, tmp_path) -> None:
    script = tmp_path / "stock.py"
    script.write_text(STOCK_SCRIPT)
    counts = {}
    for dev in ("cpu", device):
        served = start_embedded_server(ServeOptions(port=0, device=dev, preset="VLP-16", paused=True))
        try:
            counts[dev] = run_peer_json("airsim", [str(script), str(served.port)])
        finally:
            served.close()
    assert all(n > 10_000 for n in counts["cpu"])
    for want, have in zip(counts["cpu"], counts[device], strict=True):
        assert abs(have - want) <= max(3, want // 5_000)


@pytest.mark.skipif(cupy_available(), reason="a CUDA device is here")
def test_serve_on_cuda_without_a_gpu_is_one_line_exit_2() -> None:
    with pytest.raises(ConfigError, match=r"^--device cuda: needs CuPy"):
        start_embedded_server(ServeOptions(port=0, device="cuda"))
    cmd = [sys.executable, "-m", "rt_lidar.cli.main", "serve", "--port", "0", "--device", "cuda"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--device cuda: needs CuPy and a CUDA device" in lines[0]
