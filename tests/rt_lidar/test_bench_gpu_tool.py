"""tools/bench/bench_gpu.py and tools/gpu_check.sh: what they do without a GPU, and the benchmark's parts
run on the CPU with CuPy stood in for by NumPy and the CUDA weather source built for the CPU (the
``cuda-source-on-cpu`` backend of the kernel tests), so a GPU run finds no broken plumbing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.kernels.cuda_host import HostKernel, host_compiler
from rt_lidar.kernels.xp import cupy_available

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tools" / "bench"
sys.path.insert(0, str(BENCH))

import bench_gpu  # noqa: E402  (tools/bench)
import write_report  # noqa: E402


@pytest.fixture
def host_cupy(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A stand-in for ``cupy``: NumPy arrays, the weather kernel's CUDA source compiled for the CPU."""
    if host_compiler() is None:
        pytest.skip("no C++ compiler to build the CUDA source for the CPU")
    import rt_lidar.kernels.weather_cuda as wc

    kernel = HostKernel(wc.CUDA_SOURCE, "weather_kernel")
    monkeypatch.setattr(wc, "_kernel", lambda: kernel)

    class Device:
        id = 0

        def synchronize(self) -> None:
            pass

    return types.SimpleNamespace(
        asarray=np.asarray,
        asnumpy=np.asarray,
        zeros=np.zeros,
        uint8=np.uint8,
        cuda=types.SimpleNamespace(Device=Device),
    )


@pytest.mark.skipif(cupy_available(), reason="a CUDA device is here: the benchmark would run")
def test_without_a_gpu_it_says_so_and_exits_2():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, str(BENCH / "bench_gpu.py")], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 2 and "CuPy with a CUDA device is not available" in r.stderr


def test_weather_part_compares_the_twin_with_numpy(host_cupy):
    out = bench_gpu.bench_weather(host_cupy, [20_000], repeat=2)
    assert set(out) == {f"{c}@20000" for c in ("rain_25mm_h", "fog_100m", "snow_1mm_h", "rain_10_fog_200")}
    for r in out.values():
        assert r["same_outcome_share"] > 0.99  # float32 in the CUDA source: a few outcomes at a threshold
        assert r["clutter_share_numpy"] == pytest.approx(r["clutter_share_cuda"], abs=0.01)
    assert out["fog_100m@20000"]["clutter_share_numpy"] > 0.3  # dense fog: most rays see clutter


def test_frame_loop_records_the_pipelines_kernel_calls_and_replays_them(host_cupy):
    out = bench_gpu.bench_frame_loop(host_cupy, ["VLP-16"], frames=1, repeat=3)["VLP-16"]
    assert out["weather_calls"] >= 1 and out["waveform_calls"] >= 1
    assert out["weather_rays"] == out["waveform_pulses"] > 10_000  # every pulse through both, once
    assert out["waveform_returns_numpy"] == out["waveform_returns_cuda"] > 0.5 * out["points_per_frame"]
    assert out["waveform_returns_matched_share"] == 1.0 and out["weather_same_outcome_share"] > 0.999
    assert 0 < out["kernels_numpy_ms_per_frame"] < out["cpu_pipeline_ms_per_frame"]


def test_returns_are_matched_by_pulse_number_and_time():
    a = (np.array([0, 0, 3]), np.array([0, 1, 0], np.uint8), np.array([10.0, 20.0, 30.0]))
    b = (np.array([0, 3, 5]), np.array([0, 0, 0], np.uint8), np.array([10.001, 31.0, 7.0]))
    assert bench_gpu._returns_matched(a, b) == (1, pytest.approx(1.0))


def test_report_renders_the_gpu_section_from_the_committed_run(tmp_path):
    committed = json.loads((ROOT / "docs" / "bench" / "gpu.json").read_text())
    (tmp_path / "gpu.json").write_text(json.dumps(committed))
    report = tmp_path / "performance.md"
    write_report.main(["--bench", str(tmp_path), "--out", str(report), "--extra", str(tmp_path / "none.md")])
    text = report.read_text()
    section = text[text.index("## The GPU paths") :]
    assert committed["gpu"]["name"] in section and "| HDL-64E | VLS-128 |" in section
    assert "PyTorch CUDA" in section and "Machine: " in section
    assert "## pipeline\n\nNo `pipeline.json`" in text  # the other sections say what to run


def test_pipeline_part_times_both_sides_and_matches_their_points():
    out = bench_gpu.bench_pipeline_devices(["VLP-16"], scans=1, devices=("cpu", "cpu"))["VLP-16"]
    assert out["cuda_points_matched_share"] == 1.0 and out["points_per_scan"] > 10_000
    assert out["cpu_realtime_factor"] > 0 and out["cuda_ms_per_scan"] > 0 and out["speedup"] > 0
