"""The device-resident frame (docs/gpu.md): with ``--device`` the hits stay where the BVH kernel cast
them, the physics runs there on the frame's array module (CuPy on ``cuda``, NumPy on the CPU twin
``cuda-source-on-cpu``) and the points come back in one copy a frame. One test body runs on every
backend present; each is held to the CPU frame (Embree and the host physics) by its statistics."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from device_demo import device_demo_summary

from rt_lidar.api import in_process_pipeline
from rt_lidar.backend.device_arrays import PinnedPoints, array_module_of_device
from rt_lidar.config import RunConfig
from rt_lidar.errors import ConfigError
from rt_lidar.kernels.xp import cupy_available
from rt_lidar.physics.device_physics import DeviceSensorPhysics
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.device_frame import UPLOADS_PER_FRAME, DeviceWorldSource
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.points import POINT_DTYPE, PointFlag
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between

NO_CUDA = pytest.mark.skipif(not cupy_available(), reason="no CUDA device")
DEVICES = ["cuda-source-on-cpu", pytest.param("cuda", marks=NO_CUDA)]
DUAL_RAIN = RunConfig(
    preset="VLP-16",
    seed=3,
    in_process=True,
    weather=WeatherConfig(rain_mm_h=25.0),
    beam=BeamConfig(return_mode="dual"),
)
SCANS = 2
ROOT = Path(__file__).resolve().parents[2]


def _run(config: RunConfig, scans: int = SCANS) -> tuple[list[np.ndarray], Pipeline]:
    built = in_process_pipeline(config, load_preset(config.preset))
    try:
        return [s.points for s in built.pipeline.scans(scans)], built.pipeline
    finally:
        built.pipeline.close()


def _stats(scans: list[np.ndarray]) -> dict[str, float]:
    p = np.concatenate(scans)
    rng = np.sqrt(p["x"].astype(np.float64) ** 2 + p["y"] ** 2 + p["z"] ** 2)
    return {
        "points": float(p.size),
        "median_range_m": float(np.median(rng)),
        "median_intensity": float(np.median(p["intensity"])),
        "second_return_share": float((p["return_id"] == 1).mean()),
        "rain_share": float(((p["flags"] & PointFlag.RAIN_CLUTTER) != 0).mean()),
        "glass_share": float(((p["flags"] & PointFlag.THROUGH_GLASS) != 0).mean()),
    }


TOLERANCES = {  # device frame against the CPU frame (docs/gpu.md states them)
    "points": ("relative", 0.005),
    "median_range_m": ("absolute", 0.01),
    "median_intensity": ("absolute", 1.0),
    "second_return_share": ("absolute", 0.002),
    "rain_share": ("absolute", 0.002),
    "glass_share": ("absolute", 0.002),
}


@pytest.fixture(scope="module")
def cpu_dual_rain() -> dict[str, float]:
    scans, _ = _run(DUAL_RAIN)
    return _stats(scans)


@pytest.mark.parametrize("device", DEVICES)
def test_dual_rain_frame_on_the_device_has_the_cpu_statistics(device: str, cpu_dual_rain: dict) -> None:
    scans, pipe = _run(dataclasses.replace(DUAL_RAIN, device=device))
    assert isinstance(pipe.source, DeviceWorldSource) and isinstance(pipe.physics, DeviceSensorPhysics)
    assert all(s.dtype == POINT_DTYPE for s in scans)
    have = _stats(scans)
    assert cpu_dual_rain["second_return_share"] > 0 and cpu_dual_rain["rain_share"] > 0
    for name, (kind, tol) in TOLERANCES.items():
        want = cpu_dual_rain[name]
        diff = abs(have[name] - want) / (want if kind == "relative" else 1.0)
        assert diff <= tol, (name, want, have[name])


@pytest.mark.parametrize("full", [False, True], ids=["one-ray", "beam-full"])
@pytest.mark.parametrize("device", DEVICES)
def test_one_copy_to_the_host_a_frame(device: str, full: bool) -> None:
    config = dataclasses.replace(DUAL_RAIN, device=device, beam=BeamConfig(return_mode="dual", full=full))
    built = in_process_pipeline(config, load_preset("VLP-16"))
    pipe = built.pipeline
    pipe.close()
    source, physics = pipe.source, pipe.physics
    assert isinstance(source, DeviceWorldSource) and isinstance(physics, DeviceSensorPhysics)
    assert source.counter is physics.pinned.counter  # the uploads and the downloads counted together
    frame_ns = 50_000_000
    for k in range(3):
        firings = firings_between(pipe.preset, k * frame_ns, (k + 1) * frame_ns)
        hits = source.hits(firings, k * frame_ns, (k + 1) * frame_ns)
        assert not isinstance(hits.range_m, np.ndarray) or device != "cuda"  # on the device
        points = physics.apply(hits, np.random.default_rng(k)).points
        assert isinstance(points, np.ndarray) and points.dtype == POINT_DTYPE and points.size > 1000
    counter = source.counter
    # one copy down a frame (the packed points); up: the rays and the moving objects' poses. --beam full
    # adds the probes' (pulse, side) and the chosen pulses down, the neighbour pairs with their probe
    # sides, their separations, the seam's probes (beam_probe.seam_keys), the ring gaps
    # (beam_openings.ring_gaps), the probe rays and the bundles' rays up; and the pulses behind glass
    # down, their cabin probes' rays up (beam_cabin, docs/realism.md change 76: the street's parked cars)
    assert counter.to_host == 3 * (4 if full else 1)
    assert counter.to_device == 3 * (UPLOADS_PER_FRAME + (7 if full else 0))
    assert counter.bytes_to_host > 0


@pytest.mark.parametrize("device", DEVICES)
def test_strongest_return_frame_has_the_cpu_statistics(device: str) -> None:
    clear = dataclasses.replace(DUAL_RAIN, preset="OS1-64", beam=None, weather=None)
    want = _stats(_run(clear)[0])
    have = _stats(_run(dataclasses.replace(clear, device=device))[0])
    assert have["second_return_share"] == want["second_return_share"] == 0
    for name, (kind, tol) in TOLERANCES.items():
        diff = abs(have[name] - want[name]) / (want[name] if kind == "relative" else 1.0)
        assert diff <= tol, (name, want[name], have[name])


def test_device_frame_gives_the_same_bytes_twice() -> None:
    config = dataclasses.replace(DUAL_RAIN, device="cuda-source-on-cpu")
    a, b = _run(config)[0], _run(config)[0]
    assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True))


def test_pinned_buffer_is_reused_and_scans_are_their_own() -> None:
    pinned = PinnedPoints(np)
    rows = np.arange(2 * POINT_DTYPE.itemsize, dtype=np.uint8).reshape(2, -1)
    a = pinned.receive(rows, POINT_DTYPE)
    b = pinned.receive(rows[::-1].copy(), POINT_DTYPE)
    assert a.tobytes() == rows.tobytes() and b.tobytes() == rows[::-1].tobytes()
    assert pinned.counter.to_host == 2 and pinned.counter.bytes_to_host == 2 * rows.size


@pytest.mark.skipif(cupy_available(), reason="a CUDA device is here")
def test_cupy_glue_without_cupy_is_one_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^--device cuda: needs CuPy and a CUDA device"):
        array_module_of_device("cuda")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import rt_lidar.pipeline.device_frame, rt_lidar.physics.device_physics, sys;"
            "sys.exit('cupy' in sys.modules)",
        ],
        capture_output=True,
    )
    assert proc.returncode == 0  # the device frame's modules import without CuPy (it is imported lazily)


def test_demo_summary_says_where_the_frame_ran(tmp_path) -> None:
    device = device_demo_summary(tmp_path, "--return-mode", "dual", "--rain", "25")
    assert device["cast"] == "cuda-source-on-cpu" and device["physics"] == "device"
    assert device["copies_to_device"] == UPLOADS_PER_FRAME * device["copies_to_host"] > 0
    assert device["bytes_to_host"] > 41 * 10_000


def test_power_faults_act_on_the_device_frame(tmp_path) -> None:
    means = {}
    for device in ("cpu", "cuda-source-on-cpu"):
        out = tmp_path / device
        cmd = [sys.executable, "-m", "rt_lidar.cli.main", "demo", "--in-process", "--device", device]
        cmd += [
            "--preset",
            "VLP-16",
            "--frames",
            "2",
            "--quiet",
            "--faults",
            "docs/examples/faults_vlp16.toml",
        ]
        proc = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        summary = json.loads((out / "summary.json").read_text())
        means[device] = summary["points_per_scan_mean"]
        assert summary["device"]["physics"] == ("host" if device == "cpu" else "device")
    clean = _stats(_run(dataclasses.replace(DUAL_RAIN, beam=None, weather=None), 1)[0])["points"]
    assert means["cpu"] < clean  # the dirty window and the weak ring lose points
    assert abs(means["cuda-source-on-cpu"] - means["cpu"]) <= 0.005 * means["cpu"]
