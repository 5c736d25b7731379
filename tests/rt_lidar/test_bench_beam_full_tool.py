"""tools/bench/bench_beam_full.py alternates whole demos in rounds and records each one's factors, the
bundled share of ``--beam full`` and the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench"


def test_rounds_record_every_run_the_bundled_share_and_the_machine(tmp_path: Path) -> None:
    out = tmp_path / "beam_full.json"
    only = "vls128_dual_single_ray,vls128_dual_beam_full"
    argv = ["--only", only, "--repeats", "2", "--frames", "1", "--note", "a test", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(BENCH.parents[1])}
    subprocess.run(
        [sys.executable, str(BENCH / "bench_beam_full.py"), *argv],
        check=True,
        capture_output=True,
        env=env,
        timeout=300,
    )
    d = json.loads(out.read_text())
    assert d["rounds"] == 2 and d["note"] == "a test" and d["machine"]["logical_cpus"] >= 1
    rows = {r["config"]: r for r in d["results"]}
    assert list(rows) == only.split(",")
    for r in rows.values():
        runs = r["realtime_factor_runs"]
        assert (
            len(runs) == 2 and r["realtime_factor_min"] == min(runs) and r["realtime_factor_max"] == max(runs)
        )
        cpu = r["cpu_ms_per_sim_frame_runs"]  # the frame loop's CPU (tools/bench/cpu_probe.py)
        assert len(cpu) == 2 and all(c > 0 for c in cpu) and r["cpu_ms_per_sim_frame_median"] > 0
    assert rows["vls128_dual_single_ray"]["beam"] == {"mode": "fixed", "sub_rays": 1, "return_mode": "dual"}
    full = rows["vls128_dual_beam_full"]["beam"]
    assert full["mode"] == "full" and 0 < full["bundled_share"] < 1


def test_an_unknown_configuration_is_refused(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(BENCH.parents[1])}
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_beam_full.py"), "--only", "nope"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2 and "unknown configuration" in done.stderr


def test_before_runs_each_configuration_with_the_other_checkout_first(tmp_path: Path) -> None:
    out = tmp_path / "beam_full.json"
    root = BENCH.parents[1]
    argv = ["--only", "vls128_dual_single_ray", "--repeats", "1", "--frames", "1", "--before", str(root)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run(
        [sys.executable, str(BENCH / "bench_beam_full.py"), *argv, "--out", str(out)],
        check=True,
        capture_output=True,
        env=env,
        timeout=300,
    )
    d = json.loads(out.read_text())
    assert d["before"] == str(root)
    names = [r["config"] for r in d["results"]]
    assert names == ["vls128_dual_single_ray_before", "vls128_dual_single_ray"]
    assert all(len(r["realtime_factor_runs"]) == 1 for r in d["results"])
