"""Where the CPU of an HDL-64E ``--beam full`` frame goes (dual returns, 25 mm/h rain), step by step.

    PYTHONPATH=. .venv/bin/python tools/bench/profile_beam_full_steps.py [--frames 10] [--out FILE]

The street, seed 3, each sim frame's cast and physics one after the other in this thread (the source's
cast on one thread), two frames of warm-up; each step timed in process CPU time (``time.process_time``)
by a wrapper around the function that runs it: the central rays' cast, the neighbour tests
(``bundle_steps``), the probes' cast and their test, the bundles' cast, taking the two groups apart
(``take_pulses``), the waveform search of the single-ray pulses and of the bundled ones, and the merge.
``hits`` and ``physics`` are the two halves of the frame (their steps and the rest). Run it with
``PYTHONPATH`` naming another checkout to profile that one: it wraps functions both have.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _timed(table: dict[str, float], label: Callable[..., str], fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kw: Any) -> Any:
        c = time.process_time()
        try:
            return fn(*args, **kw)
        finally:
            table[label(*args, **kw)] += time.process_time() - c

    return run


def profile(frames: int) -> dict[str, Any]:
    """CPU ms a frame of each step over ``frames`` frames, and the bundled share."""
    import rt_lidar.physics.beam_full as physics_full
    import rt_lidar.pipeline.beam_probe as probe
    from rt_lidar.physics.model import PhysicsConfig
    from rt_lidar.physics.weather import WeatherConfig
    from rt_lidar.pipeline.beam_full import BundleStats
    from rt_lidar.pipeline.builder import build_pipeline, build_world
    from rt_lidar.sensor.beam import BeamConfig
    from rt_lidar.sensor.scan_pattern import firings_between

    steps: dict[str, float] = collections.defaultdict(float)
    for mod, name in ((probe, "_probe_hits"), (probe, "probe_marks"), (physics_full, "take_pulses")):
        setattr(mod, name, _timed(steps, lambda *a, _n=name, **k: _n, getattr(mod, name)))
    physics_full.merge_detections = _timed(steps, lambda *a, **k: "merge", physics_full.merge_detections)
    physics_full.waveform_detections = _timed(
        steps,
        lambda echo, hits, *a, **k: "waveform, bundled" if hits.subrays > 1 else "waveform, one ray",
        physics_full.waveform_detections,
    )
    cfg = PhysicsConfig(beam=BeamConfig(return_mode="dual", full=True), weather=WeatherConfig(rain_mm_h=25.0))
    pipe = build_pipeline("HDL-64E", build_world("street", seed=3), seed=3, physics=cfg).pipeline
    source: Any = pipe.source  # a WorldSource: its steps are wrapped below
    source.cast_threads = 1
    source.beam_hits = _timed(
        steps,
        lambda f, t0, t1, pattern, sun=None: "cast, central" if len(pattern) == 1 else "cast, bundles",
        source.beam_hits,
    )
    source.ops.bundle_steps = _timed(steps, lambda *a: "neighbour tests", source.ops.bundle_steps)
    warmup, halves = 2, {"hits": 0.0, "physics": 0.0}
    counted = BundleStats()
    for k in range(warmup + frames):
        if k == warmup:
            steps.clear()
        t0, t1 = pipe.frame_interval(k + 1)
        f = firings_between(pipe.preset, t0, t1)
        c0 = time.process_time()
        hits = source.hits(f, t0, t1)
        c1 = time.process_time()
        if getattr(hits, "bundle_counts", None) is not None:
            counted.add(hits.bundle_counts)
        pipe.physics.apply(hits, pipe._rng(k))
        if k >= warmup:
            halves["hits"] += c1 - c0
            halves["physics"] += time.process_time() - c1
    pipe.close()
    out = {k: round(1e3 * v / frames, 2) for k, v in {**steps, **halves}.items()}
    out["whole frame"] = round(out["hits"] + out["physics"], 2)
    plan = source.full_beam  # a checkout whose plan counted the casts itself: its counts
    beam = plan.stats.as_dict() if hasattr(plan, "stats") else counted.as_dict()
    return {"cpu_ms_per_frame": out, "frames": frames, "beam": beam}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    got = profile(args.frames)
    for k, v in got["cpu_ms_per_frame"].items():
        print(f"{k:>20}: {v:7.1f} CPU ms a frame")
    print(f"bundled share {got['beam']['bundled_share']:.3f}", file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps(got, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
