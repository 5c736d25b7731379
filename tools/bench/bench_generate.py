"""Dataset generation throughput (frames/s) on a local Ray with 1 and with 2 workers.

    .venv/bin/python tools/bench/bench_generate.py [--runs 4] [--frames 5] [--out bench_generate.json]

A sweep of ``--runs`` procedural streets (one VLP-16, clear air, camera off) with ``--frames`` scans
each is generated twice on one local Ray of ``max(--workers)`` CPUs: once with at most 1 run in flight
and once with 2. Before timing, one small sweep warms the workers up (their first task imports
NumPy/Embree). Frames/s counts written scans over the wall time of ``generate`` (expansion, Ray tasks,
world builds, physics, file writes); Ray's own start is reported apart, and ``run_s_mean`` (one run's
time inside its worker) shows how much the workers slow each other down. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.dataset import generate, parse_sweep


def _sweep(runs: int, frames: int, name: str) -> Any:
    return parse_sweep(
        {
            "sweep": {"name": name, "frames": frames, "seeds": [0]},
            "scenes": [{"name": "street", "kind": "street", "seeds": list(range(runs)), "length_m": 120.0}],
            "sensors": [{"preset": "VLP-16"}],
        },
        f"<bench {name}>",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4, help="runs in the timed sweep (default 4)")
    ap.add_argument("--frames", type=int, default=5, help="VLP-16 scans per run (default 5)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts (default 1 2)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    ray.init(
        num_cpus=max(args.workers),
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=200 * 2**20,
    )
    ray_start_s = time.perf_counter() - t0
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-generate-") as tmp:
            generate(_sweep(max(args.workers), 1, "warmup"), Path(tmp) / "warmup", progress=False)
            for w in args.workers:
                s = generate(
                    _sweep(args.runs, args.frames, f"w{w}"), Path(tmp) / f"w{w}", workers=w, progress=False
                )
                if not s.ok:
                    raise SystemExit(f"bench sweep failed: {s.failures}")
                results[str(w)] = {
                    "runs": s.written,
                    "frames": s.frames,
                    "points": s.points,
                    "wall_s": round(s.wall_s, 3),
                    "frames_per_s": round(s.frames_per_s, 2),
                    "points_per_s": round(s.points / s.wall_s),
                    "run_s_mean": round(sum(r.wall_s for r in s.results) / len(s.results), 3),
                    "load_avg_1min": round(os.getloadavg()[0], 2),
                }
    finally:
        ray.shutdown()
    fps = {w: r["frames_per_s"] for w, r in results.items()}
    report = {
        "bench": "generate",
        "preset": "VLP-16",
        "scene": "street (120 m)",
        "runs": args.runs,
        "frames_per_run": args.frames,
        "ray_start_s": round(ray_start_s, 2),
        "ray_version": ray.__version__,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "results": results,
        "scaling": round(fps["2"] / fps["1"], 2) if "1" in fps and "2" in fps else None,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
