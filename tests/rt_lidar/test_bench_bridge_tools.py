"""Smoke runs of the bridge benchmarks of tools/bench (tiny sizes): each runs headless and writes its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tools" / "bench"


def _run(script: str, out: Path, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, str(BENCH / script), "--out", str(out), *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    d = json.loads(out.read_text())
    assert d["machine"]["logical_cpus"] >= 1 and d["machine"]["cpu"]  # tools/bench/machine_record.py
    return d


def _report(bench: Path) -> str:
    """docs/performance.md as write_report.py makes it from the JSON in ``bench``."""
    report = bench / "performance.md"
    subprocess.run(
        [sys.executable, str(BENCH / "write_report.py"), "--bench", str(bench), "--out", str(report)],
        check=True,
        capture_output=True,
        cwd=bench,
    )
    return report.read_text()


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm")
def test_shm_transfer_bench_finds_both_paths_identical(tmp_path):
    d = _run("bench_shm_transfer.py", tmp_path / "t.json", "--preset", "VLP-16", "--frames", "10")
    assert d["identical_answers"] is True
    assert d["calls_per_transport"] >= 10 and d["tcp_ms_median"] > 0 and d["shm_ms_median"] > 0


def test_controller_cost_bench_keeps_the_schedule(tmp_path):
    d = _run("bench_controller_cost.py", tmp_path / "c.json", "--presets", "VLP-16", "--scans", "2")
    (row,) = d["rows"]
    assert row["preset"] == "VLP-16" and row["transport"] == "tcp" and row["sector_mismatches"] == 0
    assert row["rays"] > 0 and row["M_points_per_s_cpu"] > 0


def test_profile_bench_times_every_stage(tmp_path):
    d = _run("profile_bridged_frame.py", tmp_path / "p.json", "--preset", "VLP-16", "--frames", "3")
    assert d["identical_hits"] is True
    for transport in ("tcp", "shm"):
        assert set(d["stage_ms_median"][transport]) >= {"server_cast", "pack", "transfer", "decode", "sinks"}


def test_decode_bench_checks_both_decoders(tmp_path):
    d = _run("bench_decode.py", tmp_path / "d.json", "--points", "3000", "--reps", "2")
    assert d["mixed"]["answer_bytes"] > d["uniform"]["answer_bytes"]
    assert d["mixed"]["ours_ms_median"] > 0


def test_inprocess_profile_gives_each_stage_and_the_ceiling_its_cpu_allows(tmp_path):
    out = tmp_path / "profile_inprocess_frame.json"
    args = ("--presets", "VLP-16", "--frames", "4", "--cores", "2", "--return-mode", "dual")
    d = _run("profile_inprocess_frame.py", out, *args)
    assert d["return_mode"] == "dual"
    p = d["presets"]["VLP-16"]
    mean = p["stage_cpu_ms_mean"]
    assert set(mean) == {"cast", "physics", "sweep", "sinks", "total"} and mean["cast"] > 0
    assert mean["total"] == pytest.approx(sum(v for k, v in mean.items() if k != "total"))
    assert p["budget"]["ceiling"] == pytest.approx(2 * 50.0 / mean["total"])
    assert p["budget"]["cpu_ms_for"]["3x"] == pytest.approx(2 * 50.0 / 3)
    assert p["run"]["realtime_factor"] > 0 and p["run"]["cpu_ms_per_frame"] > 0 and p["run"]["cores_busy"] > 0
    threads = p["run"]["threads"]
    if threads:  # Linux's per-thread schedstat: the frames ran on the prefetch thread and the loop's
        assert threads["loop"]["threads"] == 1 and threads["rt-lidar-prefetch"]["cpu_ms"] > 0
        assert all(r["wait_ms"] >= 0 for r in threads.values())
        # the threads' CPU is the process's, within the clocks' ticks (2 ms a thread over 4 frames)
        ran = sum(r["cpu_ms"] for r in threads.values())
        ticks = 2.0 * sum(r["threads"] for r in threads.values())
        assert ran == pytest.approx(p["run"]["cpu_ms_per_frame"], abs=ticks)
    assert "One in-process frame, stage by stage" in _report(tmp_path)


def test_thread_roles_name_the_frame_loop_s_threads(monkeypatch):
    import importlib

    monkeypatch.syspath_prepend(str(BENCH))
    tool = importlib.import_module("profile_inprocess_frame")
    assert tool.thread_role("MainThread") == "loop"
    assert tool.thread_role("rt-lidar-prefetch_1") == "rt-lidar-prefetch"
    assert tool.thread_role("rt-lidar-physics_0") == "rt-lidar-physics"
    assert tool.thread_role("ThreadPoolExecutor-0_0") == tool.thread_role(None) == "other"
    before = {1: (1_000_000, 0), 2: (0, 5_000_000)}
    after = {1: (9_000_000, 2_000_000), 2: (4_000_000, 5_000_000), 3: (2_000_000, 0)}
    roles = tool.threads_per_frame(before, after, frames=2)  # no live thread has these ids: all "other"
    assert roles == {"other": {"threads": 3, "cpu_ms": 7.0, "wait_ms": 1.0}}


def test_page_cache_bench_runs_both_modes_and_reports_them(tmp_path):
    d = _run(
        "bench_page_cache.py",
        tmp_path / "page_cache.json",
        "--files",
        "4",
        "--mb",
        "0.5",
        "--rounds",
        "1",
        "--no-drain",
        "--dir",
        str(tmp_path / "w"),
    )
    modes = {r["mode"]: r for r in d["runs"]}
    assert set(modes) == {"drop", "keep"} and modes["keep"]["active"] is False
    assert modes["keep"]["dropped_files"] == 0 and modes["drop"]["writer_cpu_ms_per_file"] > 0
    if modes["drop"]["active"]:  # Linux: 4 files of 0.5 MB under the 48 MB kept, none let go of yet
        assert modes["drop"]["dropped_files"] == 0
    assert d["keep_over_drop"]["writer_cpu_ms_per_file"] > 0  # the VM-wide figure may round to 0 ticks
    assert not any((tmp_path / "w").iterdir())  # its files are gone with it
    assert "the page cache let go of behind the writer" in _report(tmp_path)
