"""tools/bench/bench_frame_steps.py times each step with this checkout and another one, alternating, in
fresh processes, and records every round's CPU figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench"


def test_each_step_runs_with_both_checkouts_and_is_recorded(tmp_path: Path) -> None:
    out = tmp_path / "steps.json"
    root = BENCH.parents[1]
    argv = ["--only", "rig_crosstalk,rig_bag", "--rounds", "1", "--frames", "2", "--before", str(root)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run(
        [sys.executable, str(BENCH / "bench_frame_steps.py"), *argv, "--out", str(out)],
        check=True,
        capture_output=True,
        env=env,
        timeout=300,
    )
    d = json.loads(out.read_text())
    assert set(d["runs"]) == {"rig_crosstalk", "rig_bag"} and d["machine"]["logical_cpus"] >= 1
    for step in d["runs"].values():
        assert set(step) == {"before", "after"}
        assert all(len(v) == 1 and v[0] > 0 for v in step.values())


def test_an_unknown_step_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_frame_steps.py"), "--only", "nope"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(BENCH.parents[1])},
        timeout=60,
    )
    assert done.returncode == 2 and "unknown step" in done.stderr
