"""tools/gpu_check.sh --dry-run: the device check's preflight, frame benchmark and summary run end to end
without a GPU (the CUDA source built for the CPU, one VLP-16, one frame, --beam full and one ray a pulse),
so a lent GPU's run finds no broken plumbing; the summary reads a GPU run's report against the targets,
and a run whose CuPy failed keeps the CPU's figures and the error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from peers import needs_peer, peer_python

from rt_lidar.kernels.xp import cupy_available

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "bench"))

import gpu_check_summary  # noqa: E402  (tools/bench)


def test_dry_run_writes_the_summary_of_the_device_frame(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", "tools/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads((tmp_path / "gpu_check.json").read_text())
    # the preflight asked no registry (--offline) and says what CuPy does here
    assert got["exit_codes"] == {"preflight": 0 if cupy_available() else 3, "device_frame": 0}
    assert got["dry_run"] and "missing" not in got and "device_error" not in got
    pre = got["preflight"]
    assert pre["project_imports_missing"] == {} and pre["cupy"]["ok"] is cupy_available()
    if not cupy_available():
        assert pre["cupy_install"] == "not tried (--offline)" and ".whl/" in pre["fix"]
    row = got["dual_rain_device_frame"]
    assert row["physics"] == "device" and row["M_rays_per_s"] > 0 and row["realtime_factor"] > 0
    assert row["transfers"]["to_device_per_copy_to_host"] == 4
    assert row["meets_100M_rays_per_s"] is False  # the CPU build of the kernel is not the target's
    diff = got["dual_rain_device_minus_cpu"]["roof"]
    assert set(diff) == set(gpu_check_summary.STAT_KEYS)
    full = got["beam_full_dual_rain"]  # the issue's scenario: the probe on the device as on the CPU
    assert full["physics"] == "device" and full["cpu_bundled_share"]["roof"] > 0.02
    assert abs(full["bundled_share"]["roof"] - full["cpu_bundled_share"]["roof"]) <= 0.002
    assert set(got["beam_full_device_minus_cpu"]["roof"]) == set(gpu_check_summary.STAT_KEYS)
    # sunlight, a wet road and a second VLP-16's crosstalk: on the device too, their counts recorded
    extras = got["sun_wet_crosstalk_device_frame"]
    assert extras["physics"] == "device" and extras["transfers"]["to_device_per_copy_to_host"] == 5
    keys = set(gpu_check_summary.STAT_KEYS + gpu_check_summary.EXTRA_KEYS)
    assert set(got["sun_wet_crosstalk_device_minus_cpu"]) == {"roof", "front"}
    assert set(got["sun_wet_crosstalk_device_minus_cpu"]["front"]) == keys
    cpu = got["sun_wet_crosstalk_cpu"]["front"]
    assert cpu["false_alarms_per_scan"] > 0 and cpu["ghosts_per_scan"] > 100  # the sun and the wet road


def test_a_run_whose_cupy_failed_keeps_the_cpu_figures_and_the_error(tmp_path: Path) -> None:
    cpu = {"realtime_factor": 0.3, "M_rays_per_s": 2.0, "bundled_share": {"a": 0.1}}
    stats = {"a": {"points_per_scan": 240_000.0, "second_return_share": 0.12}}
    report = {
        "device": "cuda",
        "rig": {"sensors": ["VLS-128"]},
        "device_error": "--device cuda needs CuPy and a CUDA device (pip install 'rt-lidar[gpu]')",
        "frame": {"cpu": cpu},
        "scan_statistics_cpu": stats,
    }
    (tmp_path / "gpu_frame.json").write_text(json.dumps(report))
    (tmp_path / "skipped.txt").write_text("gpu_check: bench skipped: 9s of the 280s budget left\n")
    got = gpu_check_summary.summary(tmp_path, {"preflight": 3, "full_frame": 3, "bench": 125})
    assert got["device"] == "cuda" and "needs CuPy" in got["device_error"]
    row = got["beam_full_dual_rain"]
    assert row["cpu_realtime_factor"] == 0.3 and row["realtime_factor"] is None
    assert row["meets_10x_realtime"] is False and row["cpu_bundled_share"] == {"a": 0.1}
    assert got["beam_full_cpu_statistics"] == stats
    assert got["skipped"] == ["gpu_check: bench skipped: 9s of the 280s budget left"]


def test_summary_marks_the_targets_of_a_gpu_run(tmp_path: Path) -> None:
    stats = {"roof": {"difference": {k: 0.0 for k in gpu_check_summary.STAT_KEYS}}}
    frame = {
        "cpu": {"realtime_factor": 0.3, "M_rays_per_s": 2.0},
        "cuda": {"realtime_factor": 12.5, "M_rays_per_s": 140.0, "rays_cast": 10, "physics": "device"},
    }
    device: dict[str, Any] = {
        "gpu": "NVIDIA H100",
        "rig": {"sensors": ["VLS-128"] * 4},
        "device_frame": {"frame": frame},
    }
    device["device_frame"]["scan_statistics"] = stats
    (tmp_path / "gpu_frame_device.json").write_text(json.dumps(device))
    got = gpu_check_summary.summary(tmp_path, {"device_frame": 0, "full_frame": 124})
    assert got["device"] == "cuda" and got["gpu"] == "NVIDIA H100"
    assert got["dual_rain_device_frame"]["meets_10x_realtime"] is True
    assert got["dual_rain_device_frame"]["meets_100M_rays_per_s"] is True
    assert got["missing"] == ["gpu_frame.json: tools/bench/bench_gpu_frame.py did not finish"]


def test_the_whole_check_keeps_to_its_time_budget_and_says_what_it_skipped(tmp_path: Path) -> None:
    """The GPU run's own path (not --dry-run) under a budget that leaves time for the preflight alone:
    the later steps are skipped and say so, the summary is still written, and the exit code is not 0."""
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "GPU_CHECK_BUDGET_S": "25"}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "nvidia" not in p)
    proc = subprocess.run(["bash", "tools/gpu_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got = json.loads((tmp_path / "gpu_check.json").read_text())
    codes = got["exit_codes"]
    steps = ["preflight", "full_frame", "device_frame", "sun_wet_crosstalk", "tests", "tests_extras", "bench"]
    assert list(codes) == steps
    assert codes["preflight"] in (0, 3) and codes["bench"] == 125 and codes["tests"] == 125
    assert codes["sun_wet_crosstalk"] == codes["tests_extras"] == 125
    # The preflight may end inside its first second, leaving full_frame its 15 s: it then stops at its
    # limit (124) or, with no CUDA device, ends early with 3 and says why in its report.
    assert codes["full_frame"] in (3, 124, 125)
    if codes["full_frame"] == 3:
        assert "device_error" in json.loads((tmp_path / "gpu_frame.json").read_text())
    assert any("bench skipped" in line for line in got["skipped"])
    assert "gpu_check:" in proc.stdout and "preflight=" in proc.stdout


@needs_peer("airsim")
def test_the_preflight_names_the_wheels_a_python_without_this_projects_packages_needs(tmp_path: Path) -> None:
    """A Python that lacks Embree and the others (the stock-AirSim peer's venv stands in for a lent
    machine's image): the preflight says which wheels to bring, in pip's names, and exits 1."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [str(peer_python("airsim")), "tools/bench/gpu_preflight.py", str(tmp_path), "--offline"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got = json.loads((tmp_path / "preflight.json").read_text())
    assert "embreex" in got["project_imports_missing"]
    assert "google-re2" in got["fix_imports"] and "fix_imports: bring wheels for" in proc.stdout
