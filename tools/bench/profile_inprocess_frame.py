"""Where one in-process sim frame's CPU goes, stage by stage, and the real-time factor that CPU allows.

    .venv/bin/python tools/bench/profile_inprocess_frame.py --out docs/bench/profile_inprocess_frame.json \
        [--presets HDL-64E VLS-128] [--frames 40] [--cores 2] [--caster embree] [--return-mode dual]

``--return-mode`` runs the physics as the demo's ``--return-mode`` does (one ray a pulse; the preset's
default without it), e.g. issue 43's VLS-128 dual row.

The stages of ``rt-lidar demo --in-process`` (embedded street, f_sim 20 Hz, the demo's physics and its
PCD + KITTI writers), each run by the function the frame loop runs, one after the other in this thread:

1. **cast**: ``firings_between`` and ``WorldSource.hits`` (the world cast on one thread, as each of the
   demo's frames cast ahead is, with the source's per-ray steps);
2. **physics**: ``SensorPhysics.apply`` with the frame loop's per-frame random stream;
3. **sweep**: ``ScanAssembler.add``;
4. **sinks**: the PCD and KITTI writers of each completed scan, per frame.

Each stage is timed in this thread's CPU time (``time.thread_time``), which a loaded machine disturbs
less than wall time. The demo runs these stages on several threads at once (frames cast ahead, the
sinks' thread), so its wall time per frame is at best their CPU sum divided by the cores: ``ceiling`` is
that bound, ``cores`` x frame period / CPU per frame, the real-time factor the run could reach with every
core busy with this work alone. ``cpu_ms_for`` gives the CPU per frame a factor needs.

``run`` then times the same frames through the frame loop as the demo runs it (``CAST_AHEAD`` frames
cast ahead on the prefetch threads, without the writers): its real-time factor, its CPU per frame (every
thread of the process), how that compares with the stages' sum (cast + physics + sweep) one at a time,
and the share of the cores' time it kept busy (``cores_busy``: its CPU over the cores' time in its wall
time); ``threads`` gives each role of its threads (``loop``, ``rt-lidar-prefetch``, ``rt-lidar-physics``,
``other``) the CPU ms per frame it ran and the ms per frame it was runnable but waited for a core
(``/proc/self/task/*/schedstat``): whether the second core is used, and how much of the cores other
processes took.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.config import CASTERS, DEFAULT_CASTER
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.assembler import ScanAssembler
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.frame_loop import CAST_AHEAD, frame_time_ns
from rt_lidar.pipeline.sources import ThreadedCaster
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import RETURN_MODES
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.session.realtime import tune_allocator
from rt_lidar.sinks.base import SinkContext, make_sink

STAGES = ("cast", "physics", "sweep", "sinks")
SIM_HZ = 20.0
WARMUP = 3


def physics_config(return_mode: str | None) -> PhysicsConfig | None:
    """The demo's physics with ``--return-mode`` (None: the preset's default return, as without it)."""
    return None if return_mode is None else PhysicsConfig(beam=BeamConfig(return_mode=return_mode))


def profile_preset(
    name: str, frames: int, tmp: str, caster: str = DEFAULT_CASTER, return_mode: str | None = None
) -> dict[str, Any]:
    """CPU ms per sim frame of each stage (medians and means over ``frames`` after a warm-up), the world
    casting with ``caster``, the physics with ``return_mode`` (:func:`physics_config`)."""
    world = build_world("street", seed=0, caster=caster)
    built = build_pipeline(name, world, seed=0, sim_hz=SIM_HZ, physics=physics_config(return_mode))
    preset, source, physics = built.preset, built.pipeline.source, built.pipeline.physics
    cast(ThreadedCaster, source).cast_threads = 1  # as each frame the demo casts ahead
    assembler = ScanAssembler(preset)
    sinks = [make_sink(f"pcd:{tmp}/{name}"), make_sink(f"kitti:{tmp}/{name}")]
    for s in sinks:
        s.open(SinkContext(preset, lockstep=True))
    cpu: dict[str, list[float]] = {s: [] for s in STAGES}
    rays, points = [], []
    try:
        for k in range(frames + WARMUP):
            t0, t1 = frame_time_ns(k, SIM_HZ), frame_time_ns(k + 1, SIM_HZ)
            marks = [time.thread_time()]  # one clock read between two stages, in STAGES' order
            firings = firings_between(preset, t0, t1)
            hits = source.hits(firings, t0, t1)
            marks.append(time.thread_time())
            out = physics.apply(hits, np.random.Generator(np.random.PCG64(np.random.SeedSequence([0, k]))))
            marks.append(time.thread_time())
            scans = assembler.add(out.points, hits.firings.t_ns, t1, out.extras())
            marks.append(time.thread_time())
            for scan in scans:
                for s in sinks:
                    s.write(scan)
            marks.append(time.thread_time())
            if k >= WARMUP:
                for stage, seconds in zip(STAGES, np.diff(marks), strict=True):
                    cpu[stage].append(float(seconds) * 1e3)
                rays.append(len(hits))
                points.append(out.points.size)
    finally:
        for s in sinks:
            s.close()
    median = {s: statistics.median(v) for s, v in cpu.items()}
    mean = {s: statistics.fmean(v) for s, v in cpu.items()}
    median["total"], mean["total"] = sum(median.values()), sum(mean.values())
    return {
        "rays_per_frame_median": statistics.median(rays),
        "points_per_frame_median": statistics.median(points),
        "stage_cpu_ms_median": median,
        "stage_cpu_ms_mean": mean,
    }


def thread_schedstats() -> dict[int, tuple[int, int]]:
    """Each thread of this process (native id): its time on a CPU and its time runnable but waiting for
    one (ns, ``/proc/self/task/*/schedstat``; empty where Linux does not give them)."""
    got: dict[int, tuple[int, int]] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return got
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as fh:
                on_cpu, waiting = fh.read().split()[:2]
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile, or no schedstat
        got[int(tid)] = (int(on_cpu), int(waiting))
    return got


def thread_role(name: str | None) -> str:
    """The frame loop's role of a thread by its Python name: ``loop`` (the main thread), the prefix of a
    pool's threads (``rt-lidar-prefetch``, ``rt-lidar-physics``), else ``other`` (threads Python did not
    start, such as NumPy's BLAS threads, or that ended)."""
    if name == "MainThread":
        return "loop"
    if name and name.startswith("rt-lidar-"):
        return name.rsplit("_", 1)[0]
    return "other"


def threads_per_frame(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], frames: int
) -> dict[str, dict[str, float]]:
    """Per role (:func:`thread_role`): threads, CPU ms and ms runnable but waiting for a CPU (another
    process's or this one's threads on every core) per frame, between two :func:`thread_schedstats`."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    roles: dict[str, dict[str, float]] = {}
    for tid, (cpu, wait) in after.items():
        cpu0, wait0 = before.get(tid, (0, 0))
        role = roles.setdefault(thread_role(names.get(tid)), {"threads": 0, "cpu_ms": 0.0, "wait_ms": 0.0})
        role["threads"] += 1
        role["cpu_ms"] += (cpu - cpu0) / 1e6 / frames
        role["wait_ms"] += (wait - wait0) / 1e6 / frames
    return roles


def run_as_the_demo(
    name: str, frames: int, caster: str = DEFAULT_CASTER, return_mode: str | None = None
) -> dict[str, Any]:
    """The frame loop as the demo runs it in-process (frames cast ahead), without the writers: the
    real-time factor of ``frames`` frames after a warm-up, the process's CPU ms per frame, and each of
    its threads' roles' CPU and wait for a CPU per frame (:func:`threads_per_frame`): with both cores
    busy the prefetch threads' CPU is most of it, and their wait says how much other processes took."""
    world = build_world("street", seed=0, caster=caster)
    physics = physics_config(return_mode)
    pipe = build_pipeline(name, world, seed=0, sim_hz=SIM_HZ, prefetch=CAST_AHEAD, physics=physics).pipeline
    try:
        for _ in range(WARMUP):
            pipe.step()
        before = thread_schedstats()
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(frames):
            pipe.step()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        threads = threads_per_frame(before, thread_schedstats(), frames)
    finally:
        pipe.close()
    return {
        "realtime_factor": frames / SIM_HZ / wall,
        "cpu_ms_per_frame": 1e3 * cpu / frames,
        "threads": threads,
    }


def budget(cpu_ms_per_frame: float, cores: int, factors: tuple[float, ...]) -> dict[str, Any]:
    """The real-time factor ``cores`` fully busy cores allow at ``cpu_ms_per_frame``, and the CPU per
    frame each of ``factors`` needs."""
    period_ms = 1e3 / SIM_HZ
    return {
        "frame_period_ms": period_ms,
        "ceiling": cores * period_ms / cpu_ms_per_frame,
        "cpu_ms_for": {f"{f:g}x": cores * period_ms / f for f in factors},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", nargs="+", default=["HDL-64E", "VLS-128"])
    ap.add_argument("--frames", type=int, default=40, help="profiled sim frames (after 3 warm-up frames)")
    ap.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--out", type=Path, default=Path("docs/bench/profile_inprocess_frame.json"))
    ap.add_argument("--caster", choices=CASTERS, default=DEFAULT_CASTER, help="the world's ray caster")
    ap.add_argument(
        "--return-mode", choices=RETURN_MODES, default=None, help="as the demo's (default: the preset's)"
    )
    args = ap.parse_args()
    if args.frames < 1 or args.cores < 1:
        ap.error("--frames and --cores must be at least 1")
    tune_allocator()
    presets = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.presets:
            got = profile_preset(name, args.frames, tmp, args.caster, args.return_mode)
            got["budget"] = budget(got["stage_cpu_ms_mean"]["total"], args.cores, (1.5, 3.0))
            run = run_as_the_demo(name, args.frames, args.caster, args.return_mode)
            mean = got["stage_cpu_ms_mean"]
            alone = mean["cast"] + mean["physics"] + mean["sweep"]
            run["cpu_vs_stages_alone"] = run["cpu_ms_per_frame"] / alone
            # the share of the cores' time the run kept busy (its own CPU and wall, one time window)
            run["cores_busy"] = run["cpu_ms_per_frame"] * run["realtime_factor"] / (args.cores * 1e3 / SIM_HZ)
            got["run"] = run
            presets[name] = got
    result = {
        "bench": "profile_inprocess_frame",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "frames": args.frames,
        "caster": args.caster,
        "return_mode": args.return_mode,
        "cores": args.cores,
        "presets": presets,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "note": "CPU time of the calling thread per stage; the stages run one after the other",
    }
    write_json(args.out, result)
    print(
        json.dumps(
            {n: {k: p[k] for k in ("stage_cpu_ms_mean", "budget", "run")} for n, p in presets.items()},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
