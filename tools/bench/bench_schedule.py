"""How a demo's frame loop spreads over the cores: CPU per sim frame of the whole process and of the
frame loop's own thread, before and after a change, measured side by side.

Run: .venv/bin/python tools/bench/bench_schedule.py [--before DIR] [--frames 30] [--repeats 2]
     [--only NAME,...] [--out docs/bench/schedule.json]

Each configuration is ``rt-lidar demo --in-process`` (seed 3, street, scans written as the demo writes
them) run twice in a fresh process: with 2 scans and with ``--frames`` scans, so that the start-up
(imports, the world's BVH, the first frames' page faults) cancels out of the figures:

- ``cpu_ms_per_frame``: CPU time of every thread of the process (``time.process_time``) per sim frame;
- ``loop_ms_per_frame``: CPU time of the frame loop's own thread (``time.thread_time``) per sim frame;
- ``allowed_factor_2_cores``: the real-time factor two otherwise idle cores allow, at best:
  frame period / max(cpu / 2, loop thread) (a frame of 1/20 s is 50 ms);
- ``realtime_factor``: the demo's own (summary.json), which a shared machine's load moves most.

CPU time is what another process's load moves least, so before and after compare best by it. With
``--before DIR`` (a checkout of the code before, its compiled twins built in place) every configuration
also runs with that code, right before this checkout's run, as ``NAME_before``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from machine_record import write_json  # tools/bench, beside this script

ROOT = Path(__file__).resolve().parents[2]
RIG = ROOT / "docs" / "rigs" / "roof-and-corners.toml"
HDL_RAIN = ["--preset", "HDL-64E", "--return-mode", "dual", "--rain", "25"]
CONFIGS: dict[str, list[str]] = {
    "hdl64e_dual_rain25_beam_full": [*HDL_RAIN, "--beam", "full"],
    "vls128_dual": ["--preset", "VLS-128", "--return-mode", "dual"],
    "rig_crosstalk": ["--rig", str(RIG), "--crosstalk"],
}
BEFORE_SUFFIX = "_before"

_CHILD = """
import json, sys, time
from rt_lidar.cli.main import main
c0, m0 = time.process_time(), time.thread_time()
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "cpu_s": time.process_time() - c0, "loop_s": time.thread_time() - m0}))
"""


def run_once(args: list[str], frames: int, code: Path) -> dict[str, Any]:
    """One demo in a fresh process: its CPU times and summary figures."""
    env = dict(os.environ, PYTHONPATH=str(code))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-c", _CHILD, "demo", "--in-process", "--quiet", "--seed", "3"]
        cmd += ["--frames", str(frames), "--out", str(out), *args]
        done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[3:])} failed: {done.stderr.strip()[-2000:]}")
        got = json.loads(done.stdout.strip().splitlines()[-1])
        summary = json.loads((out / "summary.json").read_text())
    got["sim_time_s"] = float(summary["sim_time_s"])
    got["sim_hz"] = float(summary.get("sim_hz", 20.0))
    got["realtime_factor"] = float(summary["realtime_factor"])
    return got


def measure(args: list[str], frames: int, code: Path) -> dict[str, Any]:
    """Per-frame CPU of the whole process and of the loop's thread, start-up subtracted."""
    short, long = run_once(args, 2, code), run_once(args, frames, code)
    sim_frames = round((long["sim_time_s"] - short["sim_time_s"]) * long["sim_hz"])
    period_ms = 1e3 / long["sim_hz"]
    cpu = (long["cpu_s"] - short["cpu_s"]) * 1e3 / sim_frames
    loop = (long["loop_s"] - short["loop_s"]) * 1e3 / sim_frames
    return {
        "cpu_ms_per_frame": round(cpu, 1),
        "loop_ms_per_frame": round(loop, 1),
        "allowed_factor_2_cores": round(period_ms / max(cpu / 2.0, loop), 2),
        "realtime_factor": round(long["realtime_factor"], 3),
        "load_average": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=30, help="scans of the long run (default 30)")
    parser.add_argument("--repeats", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--only", default="", help="comma-separated configurations (default: all)")
    parser.add_argument("--before", type=Path, default=None, help="a checkout of the code before a change")
    parser.add_argument("--out", type=Path, default=None, help="write the figures here (JSON)")
    parser.add_argument("--note", default="", help="a note kept in the JSON")
    args = parser.parse_args()
    names = [n for n in CONFIGS if not args.only or n in args.only.split(",")]
    runs: dict[str, list[dict[str, Any]]] = {}
    for round_no in range(max(1, args.repeats)):
        for name in names:
            order = [(name + BEFORE_SUFFIX, args.before)] if args.before is not None else []
            for label, code in [*order, (name, ROOT)]:
                got = measure(CONFIGS[name], args.frames, code)
                runs.setdefault(label, []).append(got)
                print(f"round {round_no + 1} {label:>36}: {json.dumps(got)}", flush=True)
    rows = {
        label: {
            "args": CONFIGS[label.removesuffix(BEFORE_SUFFIX)],
            "runs": got,
            **{
                f"{k}_median": statistics.median(r[k] for r in got)
                for k in (
                    "cpu_ms_per_frame",
                    "loop_ms_per_frame",
                    "allowed_factor_2_cores",
                    "realtime_factor",
                )
            },
        }
        for label, got in runs.items()
    }
    if args.out is not None:
        write_json(
            args.out,
            {
                "frames": args.frames,
                "before": None if args.before is None else str(args.before),
                "note": args.note,
                "rows": rows,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
