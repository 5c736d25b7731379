"""Smoke runs of tools/fuzz/run.py and tools/soak/run.py: short, headless, their JSON reports read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_fuzz_tool_runs_chosen_attacks_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "fuzz.json"
    done = _run(
        ["tools/fuzz/run.py", "--only", "nan_steering", "deep_nesting", "--settle", "0", "--out", str(out)],
        120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert [a["name"] for a in report["attacks"]] == ["nan_steering", "deep_nesting"]
    assert "not a finite number" in report["attacks"][0]["outcome"]
    assert all(a["recover_s"] < 5 and a["rss_bytes"] > 0 for a in report["attacks"])


def test_soak_tool_logs_memory_and_latency(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    done = _run(["tools/soak/run.py", "--seconds", "3", "--out", str(out)], 120)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert len(report["samples"]) >= 2 and report["totals"]["normal_calls"] > 0
    assert report["totals"]["unrecovered_errors"] == 0 and report["attacks"]
    assert all(s["rss_mib"] > 0 for s in report["samples"])
