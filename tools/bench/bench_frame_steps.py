"""CPU per sim frame of the steps of two of issue 43's rows, this checkout against another one, alternating.

Run: .venv/bin/python tools/bench/bench_frame_steps.py [--before DIR] [--rounds 5] [--out FILE.json]

Each round runs every step once with each checkout's code (``--before DIR``: a checkout with its compiled
twins built in place; without it only this one), each in a fresh process, one right after the other;
every figure is CPU time (``time.process_time``: every thread of the process), which a shared machine's
load moves far less than the wall clock, per sim frame (1/20 s) or per scan, on the same frames of the
street (seed 3), the median of the frames' figures of a process. The steps:

- ``vls128_frame``: a VLS-128 dual-return frame (one ray a pulse) stepped in the calling thread: the
  cast, the physics and the stitching (``Pipeline.step`` without frames fetched ahead);
- ``vls128_physics``: its physics alone (``SensorPhysics.apply`` of cast frames);
- ``rig_frame``: a frame of the example rig with ``--crosstalk`` (docs/rigs/roof-and-corners.toml):
  every sensor's cast and physics, the crosstalk and the stitching (``RigLoop.step`` in one thread);
- ``rig_crosstalk``: its crosstalk alone (``false_points`` of sensed frames);
- ``rig_bag``: a scan of the rig written into its rosbag2 (``RigBag.write``, ms a scan: the mean over
  the HDL-64E's and the two VLP-16s' scans in turn).

The JSON keeps every round's figure of every step and checkout, and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RIG = ROOT / "docs" / "rigs" / "roof-and-corners.toml"
STEPS = ("vls128_frame", "vls128_physics", "rig_frame", "rig_crosstalk", "rig_bag")
WARM = 2
"""Frames run before the clock starts (the first frames build tables and touch fresh memory)."""


def _cpu_each(items: list[Any], fn: Callable[[Any], Any]) -> float:
    """Median CPU ms of ``fn(item)`` over ``items``."""
    got = []
    for item in items:
        c0 = time.process_time()
        fn(item)
        got.append((time.process_time() - c0) * 1e3)
    return statistics.median(got)


def _vls(frames: int) -> Any:
    from rt_lidar.physics.model import PhysicsConfig
    from rt_lidar.pipeline.builder import build_pipeline, build_world
    from rt_lidar.sensor.beam import BeamConfig

    cfg = PhysicsConfig(beam=BeamConfig(sub_rays=1, return_mode="dual"))
    return build_pipeline("VLS-128", build_world("street", seed=3), seed=3, physics=cfg).pipeline


def _rig(crosstalk: bool) -> Any:
    from rt_lidar.pipeline.builder import build_world
    from rt_lidar.rig.loop import RigLoop
    from rt_lidar.rig.model import load_rig

    return RigLoop(load_rig(RIG), build_world("street", seed=3), seed=3, crosstalk=crosstalk)


def measure(step: str, frames: int) -> float:
    """CPU ms of ``step`` per sim frame (``rig_bag``: per scan), with the code on ``PYTHONPATH``."""
    if step == "vls128_frame":
        pipe = _vls(frames)
        for _ in range(WARM):
            pipe.step()
        return _cpu_each(list(range(frames)), lambda _k: pipe.step())
    if step == "vls128_physics":
        from rt_lidar.sensor.scan_pattern import firings_between

        pipe = _vls(frames)
        pipe.source.cast_threads = 1
        hits = []
        for k in range(WARM + frames):
            t0, t1 = pipe.frame_interval(k)
            hits.append((k, pipe.source.hits(firings_between(pipe.preset, t0, t1), t0, t1)))
        for k, h in hits[:WARM]:
            pipe.physics.apply(h, pipe._rng(k))
        return _cpu_each(hits[WARM:], lambda kh: pipe.physics.apply(kh[1], pipe._rng(kh[0])))
    if step == "rig_frame":
        loop = _rig(True)
        for _ in range(WARM):
            loop.step()
        return _cpu_each(list(range(frames)), lambda _k: loop.step())
    if step == "rig_crosstalk":
        from rt_lidar.rig import crosstalk

        loop = _rig(False)
        sensed = []
        for _ in range(WARM + frames):
            got = {n: u.pipeline.sense() for n, u in loop.units.items()}
            for n, u in loop.units.items():
                u.pipeline.commit(got[n])
            sensed.append(got)
        sensors = [u.sensor for u in loop.units.values()]
        for got in sensed[:WARM]:
            crosstalk.false_points(sensors, got)
        return _cpu_each(sensed[WARM:], lambda got: crosstalk.false_points(sensors, got))
    if step == "rig_bag":
        from rt_lidar.rig.bag import RigBag

        loop = _rig(False)
        scans: list[tuple[str, Any]] = []
        while len(scans) < 3:
            for name, got in loop.step().items():
                scans.extend((name, s) for s in got)
        with tempfile.TemporaryDirectory() as tmp:
            bag = RigBag(Path(tmp) / "bag", loop.rig)
            bag.open()
            for name, s in scans:
                bag.write(name, s)
            each = scans * max(1, frames // len(scans))
            c0 = time.process_time()
            for name, s in each:
                bag.write(name, s)
            got_ms = (time.process_time() - c0) * 1e3 / len(each)  # the mean: the scans differ in size
            bag.close()
        return got_ms
    raise ValueError(f"unknown step {step!r}")


def _worker(step: str, frames: int, code: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(code)}
    cmd = [sys.executable, str(Path(__file__)), "--measure", step, "--frames", str(frames)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{step} with {code} failed: {done.stderr.strip()[-2000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["cpu_ms"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=None, help="a checkout of the code before a change")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--frames", type=int, default=8, help="frames (rig_bag: about as many scans) timed")
    parser.add_argument("--only", default="", help="comma-separated steps (default: all)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps({"cpu_ms": measure(args.measure, args.frames)}))
        return 0
    steps = [s for s in args.only.split(",") if s] or list(STEPS)
    unknown = set(steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown step(s) {sorted(unknown)}; known: {', '.join(STEPS)}")
    codes = ([("before", args.before)] if args.before is not None else []) + [("after", ROOT)]
    runs: dict[str, dict[str, list[float]]] = {s: {c: [] for c, _ in codes} for s in steps}
    for r in range(max(1, args.rounds)):
        for step in steps:
            for label, code in codes:
                ms = _worker(step, args.frames, code)
                runs[step][label].append(round(ms, 2))
                load = os.getloadavg()[0]
                print(f"round {r + 1} {step:>15} {label:>6}: {ms:7.2f} ms CPU  load {load:.1f}", flush=True)
    summary = {s: {c: statistics.median(v) for c, v in by.items()} for s, by in runs.items()}
    for s, by in summary.items():
        print(f"{s:>15}: " + "  ".join(f"{c} {v:.2f} ms" for c, v in by.items()))
    if args.out:
        sys.path.insert(0, str(Path(__file__).parent))
        from machine_record import write_json

        write_json(args.out, {"rounds": args.rounds, "frames": args.frames, "runs": runs, "median": summary})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
