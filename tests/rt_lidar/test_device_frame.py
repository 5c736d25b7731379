"""``--device``: the whole frame with the scene's BVH cast by the CUDA kernel (built for the CPU here, on
CuPy where a GPU is), held to the CPU frame (Embree) on the same scans: the statistics of ``--beam full``,
dual returns and rain (the frame's physics runs on the device too, with its own draws: docs/gpu.md)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from rt_lidar.api import in_process_pipeline
from rt_lidar.config import RunConfig
from rt_lidar.errors import ConfigError
from rt_lidar.kernels.xp import cupy_available
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.device_world import BvhWorld
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import load_preset

NO_CUDA = pytest.mark.skipif(not cupy_available(), reason="no CUDA device")
DEVICES = ["cuda-source-on-cpu", pytest.param("cuda", marks=NO_CUDA)]
FULL = RunConfig(
    preset="VLP-16",
    seed=3,
    in_process=True,
    weather=WeatherConfig(rain_mm_h=25.0),
    beam=BeamConfig(return_mode="dual", full=True),
)


def _scans(config: RunConfig, frames: int = 3) -> list[np.ndarray]:
    built = in_process_pipeline(config, load_preset(config.preset))
    try:
        return [s.points for s in built.pipeline.scans(frames)]
    finally:
        built.pipeline.close()


@pytest.fixture(scope="module")
def cpu_scans() -> list[np.ndarray]:
    return _scans(FULL)


@pytest.mark.parametrize("device", DEVICES)
def test_full_beam_dual_rain_frame_on_the_device_matches_the_cpu(device: str, cpu_scans: list[np.ndarray]):
    built = in_process_pipeline(dataclasses.replace(FULL, device=device), load_preset("VLP-16"))
    try:
        assert isinstance(built.world, BvhWorld) and built.world.backend == device
        got = [s.points for s in built.pipeline.scans(len(cpu_scans))]
    finally:
        built.pipeline.close()
    assert any((s["return_id"] == 1).any() for s in cpu_scans)  # second returns are in what is compared
    assert any((s["flags"] != 0).any() for s in cpu_scans)  # and rain clutter
    # the whole frame runs on the device (docs/gpu.md): its own draws, so its scans are held by their
    # statistics (the cast alone is held to Embree ray by ray in tests/kernels/test_bvh_kernel.py)
    for want, have in zip(cpu_scans, got, strict=True):
        assert abs(have.size - want.size) <= 0.005 * want.size
        for name, w, h in (
            ("second returns", (want["return_id"] == 1).mean(), (have["return_id"] == 1).mean()),
            ("flagged", (want["flags"] != 0).mean(), (have["flags"] != 0).mean()),
            ("bloom", (want["flags"] & 8 != 0).mean(), (have["flags"] & 8 != 0).mean()),
        ):
            assert abs(w - h) <= 0.002, name
    want_all, have_all = np.concatenate(cpu_scans), np.concatenate(got)
    rw = np.linalg.norm(np.stack([want_all[a] for a in "xyz"], axis=1).astype(np.float64), axis=1)
    rh = np.linalg.norm(np.stack([have_all[a] for a in "xyz"], axis=1).astype(np.float64), axis=1)
    assert abs(np.median(rh) - np.median(rw)) <= 0.02  # (a rain drop less moves the median)
    assert abs(np.median(have_all["intensity"]) - np.median(want_all["intensity"])) <= 1.0


def test_cuda_source_on_cpu_gives_the_same_bytes_twice() -> None:
    config = dataclasses.replace(FULL, device="cuda-source-on-cpu")
    a, b = _scans(config, 2), _scans(config, 2)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True))


@pytest.mark.skipif(cupy_available(), reason="a CUDA device is here")
def test_cuda_without_a_gpu_is_refused_in_one_line(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"^--device cuda: needs CuPy and a CUDA device"):
        RunConfig(device="cuda", in_process=True)
    cmd = [sys.executable, "-m", "rt_lidar.cli.main", "demo", "--in-process", "--device", "cuda"]
    cmd += ["--frames", "1", "--out", str(tmp_path / "o")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "rt-lidar demo: error: --device cuda: needs CuPy and a CUDA device (pip install 'rt-lidar[gpu]')"
    ]
    assert not (tmp_path / "o").exists()


def test_device_over_the_bridge_is_refused(tmp_path) -> None:
    cmd = [sys.executable, "-m", "rt_lidar.cli.main", "demo", "--device", "cuda-source-on-cpu"]
    cmd += ["--frames", "1", "--out", str(tmp_path / "o")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 2 and "add --in-process" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_rig_demo_on_the_device_writes_the_cpu_rigs_scans(tmp_path) -> None:
    rig = tmp_path / "rig.toml"
    rig.write_text(
        '[[sensor]]\nname = "roof"\npreset = "VLP-16"\n'
        "mount = { xyz = [0.0, 0.0, 1.9], rpy_deg = [0.0, 0.0, 0.0] }\nphase_deg = 0.0\nsinks = []\n"
    )
    counts = {}
    for device in ("cpu", "cuda-source-on-cpu"):
        out = tmp_path / device
        cmd = [sys.executable, "-m", "rt_lidar.cli.main", "demo", "--rig", str(rig), "--frames", "2"]
        cmd += ["--device", device, "--no-rosbag", "--quiet", "--out", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert json.loads((out / "rig.json").read_text())["options"]["device"] == device
        scans = sorted((out / "roof" / "scans").glob("*.bin"))
        assert len(scans) == 2
        counts[device] = [np.fromfile(s, np.float32).size // 4 for s in scans]
    # the rig's frames run on the device (docs/gpu.md): its own draws, so the counts agree as statistics
    for want, have in zip(counts["cpu"], counts["cuda-source-on-cpu"], strict=True):
        assert want > 10_000 and abs(have - want) <= want * 0.005
