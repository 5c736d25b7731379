"""``kernels_device``: the weather model and the echo waveform on the CPU or on a CUDA GPU in the real
frame loop. One test body runs on every device present (the CPU always; CUDA where CuPy sees a GPU)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from rt_lidar.errors import ConfigError
from rt_lidar.kernels.xp import cupy_available
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.beam import BeamConfig

NO_CUDA = pytest.mark.skipif(not cupy_available(), reason="no CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=NO_CUDA)]
RAIN_DUAL = {"weather": WeatherConfig(rain_mm_h=25.0), "beam": BeamConfig(sub_rays=3, return_mode="dual")}


def _scans(physics: PhysicsConfig, frames: int = 2) -> list[np.ndarray]:
    built = build_pipeline("VLP-16", "street", seed=3, physics=physics)
    return [s.points for s in built.pipeline.scans(frames)]


@pytest.fixture(scope="module")
def reference() -> list[np.ndarray]:
    """Rain and dual returns on the default (CPU) path, no device named."""
    return _scans(PhysicsConfig(**RAIN_DUAL))


@pytest.mark.parametrize("device", DEVICES)
def test_rain_and_dual_returns_on_each_device_give_the_cpu_scan(device: str, reference: list[np.ndarray]):
    got = _scans(PhysicsConfig(**RAIN_DUAL, kernels_device=device))
    assert any((s["flags"] != 0).any() for s in reference)  # rain clutter is in the scans compared
    assert any((s["return_id"] == 1).any() for s in reference)  # and second returns
    for want, have in zip(reference, got, strict=True):
        if device == "cpu":
            assert have.tobytes() == want.tobytes()
            continue
        # float32 on the GPU may put a rare outcome on the other side of a threshold
        assert abs(have.size - want.size) <= max(2, want.size // 10_000)
        common = np.intersect1d(_return_ids(want), _return_ids(have))
        assert common.size >= 0.999 * want.size


def _return_ids(points: np.ndarray) -> np.ndarray:
    """One number per point: its pulse (firing time, ring) and return number."""
    t, ring = points["t"].astype(np.int64), points["ring"].astype(np.int64)
    return (t * 256 + ring) * 4 + points["return_id"].astype(np.int64)


@pytest.mark.skipif(cupy_available(), reason="a CUDA device is here")
def test_cuda_without_a_gpu_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match=r"kernels_device.*'cuda' needs CuPy and a CUDA device"):
        PhysicsConfig(kernels_device="cuda")
    with pytest.raises(ConfigError, match="kernels_device"):
        PhysicsConfig(kernels_device="tpu")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "rt_lidar.cli.main", "demo", "--in-process", "--frames", "1", "--quiet"]
    r = subprocess.run([*cmd, "--kernels-device", "cuda", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 2 and "'cuda' needs CuPy and a CUDA device" in r.stderr
    assert not (out / "scans").exists() or not any((out / "scans").iterdir())


@pytest.mark.skipif(cupy_available(), reason="a CUDA device is here")
def test_a_rig_asked_for_cuda_without_a_gpu_is_refused_before_writing(tmp_path):
    from rt_lidar.rig.run import RigRunOptions, run_rig_demo

    rig = tmp_path / "rig.toml"
    rig.write_text('[[sensor]]\nname = "solo"\npreset = "VLP-16"\nmount = { xyz = [0.0, 0.0, 1.8] }\n')
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="'cuda' needs CuPy and a CUDA device"):
        run_rig_demo(RigRunOptions(str(rig), frames=1, out=str(out), progress=False, kernels_device="cuda"))
    assert not out.exists()


@pytest.mark.parametrize("device", DEVICES)
def test_a_rig_runs_its_sensors_kernels_on_each_device(device: str, tmp_path):
    from rt_lidar.rig.run import RigRunOptions, run_rig_demo

    rig = tmp_path / "rig.toml"
    rig.write_text('[[sensor]]\nname = "solo"\npreset = "VLP-16"\nmount = { xyz = [0.0, 0.0, 1.8] }\n')
    rain = WeatherConfig(rain_mm_h=25.0)
    opts = RigRunOptions(str(rig), frames=1, out=str(tmp_path / "out"), progress=False, weather=rain)
    summary = run_rig_demo(dataclasses.replace(opts, kernels_device=device))
    assert summary["sensors"]["solo"]["scans_written"] == 1
