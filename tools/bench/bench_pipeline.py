"""Throughput of the whole frame loop per preset on the default street: rays/s, points/s, real-time factor.

Run: .venv/bin/python tools/bench/bench_pipeline.py [--out FILE.json] [--scans 10] [--preset NAME ...]

The real-time factor is simulated seconds per wall second of the pipeline alone (firings, ray cast,
physics, sweep), and again with the demo's writers (PCD + KITTI .bin per scan) included; and the
pipeline alone with the ``embree-fast`` caster (unless ``--no-fast-caster``). The presets run in
rounds (``--repeats`` of them), each preset once per round with each caster in turns, so that every
preset's runs are spread over the whole benchmark and a 2-core VM's drift in speed shows as the range
of each preset's runs. The JSON keeps every run's factor and the fields of each preset's best run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.config import DEFAULT_CASTER
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.frame_loop import CAST_AHEAD
from rt_lidar.sensor.presets import list_presets
from rt_lidar.sensor.scan_pattern import firings_per_scan, scan_period_ns
from rt_lidar.session.realtime import tune_allocator
from rt_lidar.sinks import write_kitti_bin, write_pcd


def bench_preset(
    name: str, scans: int, sim_hz: float, world_seed: int = 0, caster: str = DEFAULT_CASTER
) -> dict[str, float | int | str]:
    """Figures of ``scans`` scans of preset ``name`` (after one warm-up scan), the world casting with
    ``caster``."""
    world = build_world("street", seed=world_seed, caster=caster)
    built = build_pipeline(name, world, sim_hz=sim_hz, prefetch=CAST_AHEAD)  # as the demo runs
    pipe = built.pipeline
    pipe.scans(1)
    sim0 = pipe.sim_time_s
    t0 = time.perf_counter()
    out = pipe.scans(scans)
    compute = time.perf_counter() - t0
    pipe.close()
    sim = pipe.sim_time_s - sim0
    with tempfile.TemporaryDirectory() as tmp:
        t1 = time.perf_counter()
        for i, s in enumerate(out):
            write_pcd(Path(tmp) / f"{i}.pcd", s.points)
            write_kitti_bin(Path(tmp) / f"{i}.bin", s.points, built.preset.output.intensity_max)
        write = time.perf_counter() - t1
    rays = sum(s.fired for s in out)
    points = sum(s.points.size for s in out)
    return {
        "preset": built.preset.name,
        "rays_per_scan": firings_per_scan(built.preset),
        "scan_hz": 1e9 / scan_period_ns(built.preset),
        "sim_hz": sim_hz,
        "scans": scans,
        "rays_per_s": rays / compute,
        "points_per_s": points / compute,
        "realtime_factor": sim / compute,
        "realtime_factor_with_writers": sim / (compute + write),
        "ms_per_scan": 1e3 * compute / scans,
    }


def best_of(runs: list[dict], fast: list[dict]) -> dict:
    """The fields of the fastest run, with every run's factors (and the ``embree-fast`` runs' best and
    all) beside them."""

    def factors(of: list[dict], key: str) -> list[float]:
        return [round(float(x[key]), 3) for x in of]

    best = dict(max(runs, key=lambda x: float(x["realtime_factor"])))
    best["runs"] = len(runs)
    best["realtime_factor_runs"] = factors(runs, "realtime_factor")
    best["realtime_factor_with_writers_runs"] = factors(runs, "realtime_factor_with_writers")
    if fast:
        best["realtime_factor_embree_fast"] = max(float(x["realtime_factor"]) for x in fast)
        best["realtime_factor_embree_fast_runs"] = factors(fast, "realtime_factor")
    return best


def main(argv: list[str] | None = None) -> int:
    tune_allocator()  # as the rt-lidar CLI runs the product
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--scans", type=int, default=10)
    parser.add_argument("--sim-hz", type=float, default=20.0)
    parser.add_argument("--preset", action="append", default=None)
    parser.add_argument(
        "--no-fast-caster", action="store_true", help="skip the runs of each preset with embree-fast"
    )
    parser.add_argument("--repeats", type=int, default=3, help="rounds: runs of each preset with each caster")
    args = parser.parse_args(argv)
    names = args.preset or list_presets()
    runs: dict[str, list[dict]] = {n: [] for n in names}
    fast: dict[str, list[dict]] = {n: [] for n in names}
    for round_no in range(max(1, args.repeats)):
        for name in names:
            runs[name].append(bench_preset(name, args.scans, args.sim_hz))
            if not args.no_fast_caster:
                fast[name].append(bench_preset(name, args.scans, args.sim_hz, caster="embree-fast"))
            r = runs[name][-1]
            print(
                f"round {round_no + 1} {r['preset']:>12}: {r['rays_per_s'] / 1e6:6.2f} M rays/s  "
                f"{r['points_per_s'] / 1e6:6.2f} M points/s  "
                f"RTF {r['realtime_factor']:5.2f} (with writers {r['realtime_factor_with_writers']:5.2f})",
                flush=True,
            )
    results = [best_of(runs[n], fast[n]) for n in names]
    report = {"rounds": max(1, args.repeats), "results": results}
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
