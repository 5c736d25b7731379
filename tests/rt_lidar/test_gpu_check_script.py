"""tools/gpu_check.sh --dry-run: the device check's frame benchmark and its summary run end to end without
a GPU (the CUDA source built for the CPU, one VLP-16, one frame), so a lent GPU's run finds no broken
plumbing; and the summary reads a GPU run's report against the targets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    assert got["exit_codes"] == {"device_frame": 0} and got["dry_run"] and "missing" not in got
    row = got["dual_rain_device_frame"]
    assert row["physics"] == "device" and row["M_rays_per_s"] > 0 and row["realtime_factor"] > 0
    assert row["transfers"]["to_device_per_copy_to_host"] == 4
    assert row["meets_100M_rays_per_s"] is False  # the CPU build of the kernel is not the target's
    diff = got["dual_rain_device_minus_cpu"]["roof"]
    assert set(diff) == set(gpu_check_summary.STAT_KEYS)


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
