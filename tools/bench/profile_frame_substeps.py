"""Where one in-process HDL-64E frame's CPU goes, step by step inside its cast and physics stages.

    PYTHONPATH=CHECKOUT .venv/bin/python tools/bench/profile_frame_substeps.py --frames 15 \
        [--preset HDL-64E] [--out docs/bench/NAME.json]

The stages of ``rt-lidar demo --in-process`` as :mod:`profile_inprocess_frame` runs them (the embedded
street, f_sim 20 Hz, the cast on one thread, the demo's physics, the PCD and KITTI writers), with the
functions the frame calls wrapped: each step's **exclusive** thread CPU time (``time.thread_time``; a
wrapped call inside another is its own step, not its caller's), the mean per sim frame over
``--frames`` frames after 3 of warm-up. Steps:

- ``cast.first`` / ``cast.glass_mirror`` / ``cast.behind_glass``: ``World.cast`` of the first surfaces,
  of the mirror rays off the first pane (the glass ghosts), of the rounds behind glass;
- ``cast.other``: the rest of ``WorldSource.hits`` (poses, directions, first-surface fields, slant
  losses, the mirror rays' making);
- ``phys.*``: ``SensorPhysics.apply``'s object echoes, glass and ghost echo powers, ghosts, each laser's
  focus, detection and selection, range noise, noise detections, normal draws, intensity chain,
  texture, packing; ``phys.other`` the rest;
- ``sweep`` and ``sinks``.

A step a checkout does not have is absent (0), so the same script measures an older checkout (set
``PYTHONPATH`` to it): the functions are found by name where they exist. Run checkouts alternately,
several rounds each, and compare rounds of one run only: the machine's load moves every figure.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, cast

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

WARMUP = 3
SIM_HZ = 20.0


class StepClock:
    """Exclusive thread CPU seconds per step label: the innermost running wrapped call is charged."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self._stack: list[list[Any]] = []

    def run(self, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, its CPU (less that of wrapped calls inside it) charged to ``label``."""
        now = time.thread_time()
        if self._stack:
            self.seconds[self._stack[-1][0]] += now - self._stack[-1][1]
        self._stack.append([label, now])
        try:
            return fn(*args, **kwargs)
        finally:
            now = time.thread_time()
            lab, start = self._stack.pop()
            self.seconds[lab] += now - start
            if self._stack:
                self._stack[-1][1] = now

    @property
    def current(self) -> str | None:
        """The label of the innermost running step (None outside every step)."""
        return self._stack[-1][0] if self._stack else None

    def wrap(self, owner: Any, attr: str, label: str) -> None:
        """Charge ``owner.attr`` (a function or method, where it exists) to ``label``."""
        fn = getattr(owner, attr, None)
        if fn is None:
            return

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            return self.run(label, fn, *args, **kwargs)

        setattr(owner, attr, wrapped)


def profile(preset_name: str, frames: int) -> dict[str, Any]:
    """Each step's mean CPU ms per sim frame (and the frame's total), and the rays and points a frame."""
    from rt_lidar.pipeline.assembler import ScanAssembler
    from rt_lidar.pipeline.builder import build_pipeline, build_world
    from rt_lidar.pipeline.frame_loop import frame_time_ns
    from rt_lidar.sensor.scan_pattern import firings_between
    from rt_lidar.sinks.base import SinkContext, make_sink

    world = build_world("street", seed=0)
    built = build_pipeline(preset_name, world, seed=0, sim_hz=SIM_HZ)
    preset, source, physics = built.preset, built.pipeline.source, built.pipeline.physics
    cast(Any, source).cast_threads = 1  # one thread, as each frame the demo casts ahead
    clock = StepClock()
    casts = [0]
    world_cast = world.cast

    def counted_cast(*args: Any, **kwargs: Any) -> Any:
        label = "cast.first" if casts[0] == 0 else "cast.behind_glass"
        if clock.current == "cast.glass_mirror":
            label = "cast.glass_mirror"
        casts[0] += 1
        return clock.run(label, world_cast, *args, **kwargs)

    world.cast = counted_cast  # type: ignore[method-assign]
    clock.wrap(type(source), "_mirror_cast", "cast.glass_mirror")
    echo = importlib.import_module("rt_lidar.physics.echo").EchoModel
    model = importlib.import_module("rt_lidar.physics.model")
    backend = type(getattr(physics, "backend", None))
    for owner, attr, label in [
        (echo, "object_echoes", "phys.object_echoes"),
        (echo, "object_echoes_kept", "phys.object_echoes"),
        (echo, "power", "phys.glass_and_ghost_echo_power"),
        (echo, "beam_focus", "phys.beam_focus"),
        (model, "glass_ghost_echoes", "phys.ghosts"),
        (model, "glass_ghost_rows", "phys.ghosts"),
        (model, "noise_detections", "phys.noise_detections"),
        (model, "standard_normal", "phys.normal_draws"),
        # the backend layer's operations, or (older checkouts) the model's module-level twins
        (backend, "detect", "phys.detect_select"),
        (backend, "select_detections", "phys.detect_select"),
        (backend, "range_noise", "phys.range_noise"),
        (backend, "measure_intensity", "phys.intensity"),
        (backend, "pack_points", "phys.pack_points"),
        (backend, "texture_apply", "phys.texture"),
        (model, "detect", "phys.detect_select"),
        (model, "detections", "phys.detect_select"),
        (model, "range_noise", "phys.range_noise"),
        (model, "pack_points", "phys.pack_points"),
        (model, "calibrated_reflectivity_output", "phys.intensity"),
    ]:
        if owner is not type(None):
            clock.wrap(owner, attr, label)
    assembler = ScanAssembler(preset)
    per_frame: dict[str, list[float]] = collections.defaultdict(list)
    rays, points = [], []
    with tempfile.TemporaryDirectory() as tmp:
        sinks = [make_sink(f"pcd:{tmp}/s"), make_sink(f"kitti:{tmp}/s")]
        for s in sinks:
            s.open(SinkContext(preset, lockstep=True))
        for k in range(frames + WARMUP):
            clock.seconds.clear()
            casts[0] = 0
            t0, t1 = frame_time_ns(k, SIM_HZ), frame_time_ns(k + 1, SIM_HZ)
            start = time.thread_time()
            firings = clock.run("cast.other", firings_between, preset, t0, t1)
            hits = clock.run("cast.other", source.hits, firings, t0, t1)
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([0, k])))
            out = clock.run("phys.other", physics.apply, hits, rng)
            scans = clock.run("sweep", assembler.add, out.points, hits.firings.t_ns, t1, out.extras())
            for scan in scans:
                for s in sinks:
                    clock.run("sinks", s.write, scan)
            total = time.thread_time() - start
            if k >= WARMUP:
                for label, seconds in clock.seconds.items():
                    per_frame[label].append(seconds * 1e3)
                per_frame["total"].append(total * 1e3)
                rays.append(len(hits))
                points.append(int(out.points.size))
        for s in sinks:
            s.close()
    mean = {label: sum(v) / frames for label, v in sorted(per_frame.items())}
    mean["cast"] = sum(v for k, v in mean.items() if k.startswith("cast."))
    mean["physics"] = sum(v for k, v in mean.items() if k.startswith("phys."))
    return {
        "preset": preset_name,
        "frames": frames,
        "rays_per_frame_median": statistics.median(rays),
        "points_per_frame_median": statistics.median(points),
        "cpu_ms_per_frame_mean": mean,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="HDL-64E")
    parser.add_argument("--frames", type=int, default=15)
    parser.add_argument("--out", default=None, help="a JSON report (else printed)")
    args = parser.parse_args()
    import rt_lidar

    report: dict[str, Any] = {
        "checkout": os.path.dirname(os.path.dirname(os.path.abspath(rt_lidar.__file__)))
    }
    report.update(profile(args.preset, args.frames))
    report["load_average"] = os.getloadavg()
    if args.out:
        write_json(args.out, report)
    for label, ms in report["cpu_ms_per_frame_mean"].items():
        print(f"{label:34s} {ms:7.2f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
