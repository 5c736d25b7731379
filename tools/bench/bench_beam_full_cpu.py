"""CPU time per sim frame of ``--beam full`` and the rows beside it, this checkout against another.

Run: .venv/bin/python tools/bench/bench_beam_full_cpu.py [--before DIR] [--frames 12] [--rounds 3]
     [--out docs/bench/beam_full_cpu.json]

Each configuration's frame loop work (the cast and the physics of each sim frame, 1/20 s, one after the
other in one thread, the street, seed 3: what ``bench_cpu_twins.py`` calls a whole frame) is timed in
CPU seconds of the process (``time.process_time``, every thread), which a shared machine's load moves
far less than wall time. With ``--before`` each round runs the other checkout (its compiled twins
built in place) right before this one, each in a fresh process. A frame loop on C cores runs at most at
C x 50 ms / (CPU ms a frame) of real time; the demo's frames cast ahead on threads reach about 0.8 of
that on two cores.

The configurations: HDL-64E dual returns in 25 mm/h rain with ``--beam full`` (and its bundled share,
probes included), the same with one ray a pulse, and HDL-64E dual returns in clear air (the row
issue 43 measures ``--beam full`` against).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from machine_record import write_json  # tools/bench, beside this script

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {
    "hdl64e_dual_rain25_beam_full": {"full": True, "rain": 25.0},
    "hdl64e_dual_rain25_single_ray": {"full": False, "rain": 25.0},
    "hdl64e_dual": {"full": False, "rain": 0.0},
}
WARMUP = 2

_CHILD = """
import json, sys, time
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.scan_pattern import firings_between

full, rain, frames, warmup = json.loads(sys.argv[1])
beam = BeamConfig(return_mode="dual", full=True) if full else BeamConfig(1, "dual")
cfg = PhysicsConfig(beam=beam, weather=WeatherConfig(rain_mm_h=rain) if rain > 0 else None)
pipe = build_pipeline("HDL-64E", build_world("street", seed=3), seed=3, physics=cfg).pipeline
pipe.source.cast_threads = 1
todo = []
for k in range(1, frames + warmup + 1):
    t0, t1 = pipe.frame_interval(k)
    todo.append(((t0, t1), firings_between(pipe.preset, t0, t1)))
cpu, pulses, bundled = [], 0, 0
for k, (span, f) in enumerate(todo):
    c0 = time.process_time()
    hits = pipe.source.hits(f, *span)
    pipe.physics.apply(hits, pipe._rng(k))
    if k >= warmup:
        cpu.append(time.process_time() - c0)
    counts = getattr(hits, "bundle_counts", None)  # every frame's, as --beam full's summary counts them
    if counts is not None:
        pulses, bundled = pulses + counts.pulses, bundled + counts.bundled
plan = getattr(pipe.source, "full_beam", None)
if plan is None:
    share = None
elif hasattr(plan, "stats"):  # a checkout whose plan counted the casts itself
    share = plan.stats.as_dict()["bundled_share"]
else:
    share = bundled / pulses if pulses else 0.0
print(json.dumps({"cpu_ms": [1e3 * c for c in cpu], "bundled_share": share}))
"""


def run_one(name: str, frames: int, code: Path) -> dict[str, Any]:
    """CPU ms of each of ``frames`` sim frames of configuration ``name`` with the checkout ``code``."""
    c = CONFIGS[name]
    env = {**os.environ, "PYTHONPATH": str(code)}
    arg = json.dumps([c["full"], c["rain"], frames, WARMUP])
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, arg], capture_output=True, text=True, env=env, check=False, cwd=code
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} with {code} failed: {done.stderr.strip()[-2000:]}")
    got: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    got["load_average_1min"] = os.getloadavg()[0]
    return got


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=None, help="the checkout before the change")
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated configurations (default: all)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--note", default="")
    args = parser.parse_args(argv)
    if args.before is not None:  # the runs start in other folders: a relative path would miss it
        args.before = args.before.resolve()
    names = [n for n in args.only.split(",") if n] or list(CONFIGS)
    unknown = set(names) - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configuration(s) {sorted(unknown)}; known: {', '.join(CONFIGS)}")
    codes = ([("before", args.before)] if args.before is not None else []) + [("after", ROOT)]
    runs: dict[str, list[dict[str, Any]]] = {f"{n}/{w}": [] for n in names for w, _ in codes}
    for r in range(max(1, args.rounds)):
        for n in names:
            for which, code in codes:
                got = run_one(n, args.frames, code)
                runs[f"{n}/{which}"].append(got)
                share = got["bundled_share"]
                extra = "" if share is None else f"  bundled {share:.1%}"
                med = statistics.median(got["cpu_ms"])
                print(
                    f"round {r + 1} {n:>32} {which:>6}: {med:6.1f} CPU ms a frame "
                    f"(load {got['load_average_1min']:.1f}){extra}",
                    flush=True,
                )
    results = []
    for key, rs in runs.items():
        per_run = [statistics.median(g["cpu_ms"]) for g in rs]
        results.append(
            {
                "config": key,
                "cpu_ms_per_frame_runs": [round(x, 2) for x in per_run],
                "cpu_ms_per_frame_median": round(statistics.median(per_run), 2),
                "bundled_share": rs[-1]["bundled_share"],
                "load_average_1min": [round(g["load_average_1min"], 2) for g in rs],
            }
        )
    report = {"frames": args.frames, "rounds": args.rounds, "note": args.note, "results": results}
    report["before"] = None if args.before is None else str(args.before)
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
