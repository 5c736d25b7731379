"""tools/bench/bench_pipeline.py runs the presets in rounds and keeps every run's factor; the report
shows each preset's highest factor with the range of its runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench"
sys.path.insert(0, str(BENCH))

import bench_pipeline  # noqa: E402  (tools/bench)
import write_report  # noqa: E402


def test_rounds_keep_every_run_and_the_report_gives_their_range(tmp_path):
    out = tmp_path / "pipeline.json"
    argv = ["--preset", "VLP-16", "--preset", "Mid-40", "--scans", "1", "--repeats", "2", "--out", str(out)]
    # its own process: the benchmark tunes the allocator as the CLI does, which this one must not get
    env = {**os.environ, "PYTHONPATH": str(BENCH.parents[1])}
    cmd = [sys.executable, str(BENCH / "bench_pipeline.py"), *argv, "--no-fast-caster"]
    subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=300)
    d = json.loads(out.read_text())
    assert d["rounds"] == 2 and [r["preset"] for r in d["results"]] == ["VLP-16", "Mid-40"]
    for r in d["results"]:
        runs = r["realtime_factor_runs"]
        assert r["runs"] == 2 and len(runs) == 2 and len(r["realtime_factor_with_writers_runs"]) == 2
        assert round(r["realtime_factor"], 3) == max(runs)  # the fields are the fastest run's
        assert "realtime_factor_embree_fast" not in r
    report = tmp_path / "performance.md"
    write_report.main(["--bench", str(tmp_path), "--out", str(report), "--extra", str(tmp_path / "none.md")])
    row = next(line for line in report.read_text().splitlines() if line.startswith("| VLP-16 |"))
    runs = d["results"][0]["realtime_factor_runs"]
    assert f"| {max(runs):.2f} ({min(runs):.2f}-{max(runs):.2f}) |" in row
    assert "ran in 2 rounds" in report.read_text()


def test_best_of_takes_the_fastest_run_and_the_fast_casters_best():
    runs = [
        {"realtime_factor": 2.0, "realtime_factor_with_writers": 1.9, "rays_per_s": 1.0},
        {"realtime_factor": 3.0, "realtime_factor_with_writers": 2.5, "rays_per_s": 2.0},
    ]
    fast = [{"realtime_factor": 3.5}, {"realtime_factor": 3.2}]
    best = bench_pipeline.best_of(runs, fast)
    assert best["rays_per_s"] == 2.0 and best["realtime_factor_runs"] == [2.0, 3.0]
    assert best["realtime_factor_embree_fast"] == 3.5
    assert best["realtime_factor_embree_fast_runs"] == [3.5, 3.2]
    assert runs[1] == {"realtime_factor": 3.0, "realtime_factor_with_writers": 2.5, "rays_per_s": 2.0}
