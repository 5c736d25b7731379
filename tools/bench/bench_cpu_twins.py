"""Issue 43's compiled twins, step by step: each step's time with its twin and with the NumPy code, in one
process, on the same frames, alternating.

Run: .venv/bin/python tools/bench/bench_cpu_twins.py [--out docs/bench/cpu_twins.json] [--repeats 5]

Steps (each on real frames of the street, seed 3):

- ``waveform``: the waveform search of HDL-64E dual returns in 25 mm/h rain, one ray a pulse
  (kernels/_waveform_pulses.c against kernels.waveform's NumPy code);
- ``physics_full``: the whole physics of an HDL-64E ``--beam full`` dual-return frame in rain (the
  waveform search, the texture and the intensity chain twins on / off);
- ``physics_plain``: the whole physics of a plain HDL-64E frame (strongest return, clear air: the
  texture and intensity chain twins on / off);
- ``cast_full``: an HDL-64E ``--beam full`` frame's cast (the bundle's choice and sub-rays on / off);
- ``crosstalk``: the example rig's crosstalk of one sim frame (rt_lidar/rig/_crosstalk.c on / off).

- ``frame_*``: a frame loop's whole work of a frame (cast and physics; for the rig every sensor's, the
  crosstalk and the stitching) for HDL-64E ``--beam full`` dual returns in rain, VLS-128 dual returns,
  plain HDL-64E and the example rig with ``--crosstalk``: all twins on / off.

Each figure is the median over ``--repeats`` rounds of the step's milliseconds per sim frame (1/20 s),
wall and CPU (``time.process_time``: every thread of the process, the caster's included, so a figure a
shared machine's load barely moves); within a round the twin and the NumPy code run one right after the
other on the same input. A frame loop on two cores can run at most at 2 x 50 ms / (CPU ms a frame) of
real time. The JSON keeps every round and the machine (tools/bench/machine_record.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.kernels import waveform_pulses
from rt_lidar.physics import intensity_fused, texture_fused
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline import beam_steps
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.rig import crosstalk, crosstalk_fused
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.model import load_rig
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.scan_pattern import firings_between

ROOT = Path(__file__).resolve().parents[2]
TWINS = (waveform_pulses, texture_fused, intensity_fused, beam_steps, crosstalk_fused)
FRAMES = 4


@contextmanager
def twins(on: bool) -> Iterator[None]:
    """Issue 43's compiled twins on or off (the project's earlier twins stay on)."""
    for m in TWINS:
        m.enabled = on
    try:
        yield
    finally:
        for m in TWINS:
            m.enabled = True


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall ms, CPU ms of the whole process: every thread's, the caster's included) of ``fn()``."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3


def _pipeline(preset: str, beam: BeamConfig | None, weather: WeatherConfig | None) -> Any:
    cfg = PhysicsConfig(beam=beam, weather=weather)
    return build_pipeline(preset, build_world("street", seed=3), seed=3, physics=cfg).pipeline


def _frames(pipe: Any) -> list[Any]:
    out = []
    for k in range(1, FRAMES + 1):
        t0, t1 = pipe.frame_interval(k)
        out.append(((t0, t1), firings_between(pipe.preset, t0, t1)))
    return out


def physics_step(pipe: Any) -> Callable[[], None]:
    hits = [pipe.source.hits(f, *span) for span, f in _frames(pipe)]

    def run() -> None:
        for k, h in enumerate(hits):
            pipe.physics.apply(h, pipe._rng(k))

    return run


def waveform_step() -> Callable[[], None]:
    from rt_lidar.backend import CompiledBackend

    pipe = _pipeline("HDL-64E", BeamConfig(return_mode="dual", sub_rays=1), WeatherConfig(rain_mm_h=25))
    calls: list[tuple[Any, ...]] = []
    backend = CompiledBackend()  # the twin where on, else the NumPy code: the choice a pipeline makes
    search = CompiledBackend.waveform_returns

    def keep(self: Any, *args: Any) -> Any:
        calls.append(args)
        return search(self, *args)

    CompiledBackend.waveform_returns = keep  # type: ignore[method-assign]
    try:
        physics_step(pipe)()
    finally:
        CompiledBackend.waveform_returns = search  # type: ignore[method-assign]

    def run() -> None:
        for args in calls:
            backend.waveform_returns(*args)

    return run


def cast_step(pipe: Any) -> Callable[[], None]:
    frames = _frames(pipe)

    def run() -> None:
        for span, f in frames:
            pipe.source.hits(f, *span)

    return run


def frame_step(pipe: Any) -> Callable[[], None]:
    """The frame loop's work of each frame: the cast and the physics, one after the other."""
    frames = _frames(pipe)

    def run() -> None:
        for k, (span, f) in enumerate(frames):
            pipe.physics.apply(pipe.source.hits(f, *span), pipe._rng(k))

    return run


def rig_frame_step(crosstalk_on: bool) -> Callable[[], None]:
    """The example rig's frames (every sensor's cast and physics, the crosstalk, the stitching), each
    timed run on a rig loop of its own (built before the clock starts)."""
    rig, world = load_rig(ROOT / "docs/rigs/roof-and-corners.toml"), build_world("street", seed=3)
    loops: list[RigLoop] = []

    def prepare() -> None:
        loops.append(RigLoop(rig, world, seed=3, crosstalk=crosstalk_on))

    def run() -> None:
        loop = loops.pop()
        for _ in range(FRAMES):
            loop.step()

    run.prepare = prepare  # type: ignore[attr-defined]
    return run


def crosstalk_step() -> Callable[[], None]:
    loop = RigLoop(load_rig(ROOT / "docs/rigs/roof-and-corners.toml"), build_world("street", seed=3), seed=3)
    sensed = []
    for _ in range(FRAMES):
        got = {name: u.pipeline.sense() for name, u in loop.units.items()}
        for name, u in loop.units.items():
            u.pipeline.commit(got[name])
        sensed.append(got)
    sensors = [u.sensor for u in loop.units.values()]

    def run() -> None:
        for got in sensed:
            crosstalk.false_points(sensors, got)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--note", default="")
    args = parser.parse_args(argv)
    full = BeamConfig(return_mode="dual", full=True)
    rain = WeatherConfig(rain_mm_h=25)
    full_pipe = _pipeline("HDL-64E", full, rain)
    plain_pipe = _pipeline("HDL-64E", None, None)
    vls_pipe = _pipeline("VLS-128", BeamConfig(return_mode="dual", sub_rays=1), None)
    steps: dict[str, Callable[[], None]] = {
        "waveform": waveform_step(),
        "physics_full": physics_step(full_pipe),
        "physics_plain": physics_step(plain_pipe),
        "cast_full": cast_step(full_pipe),
        "crosstalk": crosstalk_step(),
        "frame_hdl64e_dual_rain25_beam_full": frame_step(full_pipe),
        "frame_vls128_dual_single_ray": frame_step(vls_pipe),
        "frame_hdl64e_plain": frame_step(plain_pipe),
        "frame_rig_crosstalk": rig_frame_step(True),
    }
    rows: dict[str, dict[str, list[float]]] = {
        n: {k: [] for k in ("twins", "numpy", "twins_cpu", "numpy_cpu")} for n in steps
    }
    for name, fn in steps.items():
        prepare = getattr(fn, "prepare", None)
        for on in (True, False):  # once each, untimed: caches, first-use checks
            with twins(on):
                if prepare is not None:
                    prepare()
                fn()
        for _ in range(max(1, args.repeats)):
            for on in (True, False):
                with twins(on):
                    if prepare is not None:
                        prepare()
                    wall, cpu = timed(fn)
                key = "twins" if on else "numpy"
                rows[name][key].append(wall / FRAMES)
                rows[name][key + "_cpu"].append(cpu / FRAMES)
        med = {k: statistics.median(v) for k, v in rows[name].items()}
        line = (
            f"{name:>36}: CPU {med['twins_cpu']:7.1f} ms a frame with the twins, {med['numpy_cpu']:7.1f} "
            f"with NumPy (wall {med['twins']:.1f} / {med['numpy']:.1f})"
        )
        print(line, flush=True)
    report = {
        "frames": FRAMES,
        "repeats": args.repeats,
        "note": args.note,
        "unit": "ms per sim frame (1/20 s): wall, and CPU of the whole process (every thread)",
        "results": {
            n: {
                **{f"{k}_ms": [round(x, 2) for x in v] for k, v in r.items()},
                **{f"{k}_median_ms": round(statistics.median(v), 2) for k, v in r.items()},
            }
            for n, r in rows.items()
        },
    }
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
