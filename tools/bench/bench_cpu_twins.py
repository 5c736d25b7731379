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

Each figure is the median over ``--repeats`` rounds of the step's milliseconds per sim frame (1/20 s);
within a round the twin and the NumPy code run one right after the other on the same input. The JSON
keeps every round and the machine (tools/bench/machine_record.py).
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

import numpy as np
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


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


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
    from rt_lidar.kernels import waveform

    pipe = _pipeline("HDL-64E", BeamConfig(return_mode="dual", sub_rays=1), WeatherConfig(rain_mm_h=25))
    calls: list[tuple[Any, ...]] = []
    search = waveform._waveform_returns

    def keep(*args: Any, **kw: Any) -> Any:
        calls.append(args)
        return search(*args, **kw)

    waveform._waveform_returns = keep  # type: ignore[assignment]
    try:
        physics_step(pipe)()
    finally:
        waveform._waveform_returns = search  # type: ignore[assignment]

    def run() -> None:
        with np.errstate(invalid="ignore", over="ignore"):
            for args in calls:
                search(*args)

    return run


def cast_step(pipe: Any) -> Callable[[], None]:
    frames = _frames(pipe)

    def run() -> None:
        for span, f in frames:
            pipe.source.hits(f, *span)

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
    steps: dict[str, Callable[[], None]] = {
        "waveform": waveform_step(),
        "physics_full": physics_step(full_pipe),
        "physics_plain": physics_step(_pipeline("HDL-64E", None, None)),
        "cast_full": cast_step(full_pipe),
        "crosstalk": crosstalk_step(),
    }
    rows: dict[str, dict[str, list[float]]] = {n: {"twins": [], "numpy": []} for n in steps}
    for name, fn in steps.items():
        for on in (True, False):  # once each, untimed: caches, first-use checks
            with twins(on):
                fn()
        for _ in range(max(1, args.repeats)):
            for on in (True, False):
                with twins(on):
                    rows[name]["twins" if on else "numpy"].append(timed(fn) / FRAMES)
        med = {k: statistics.median(v) for k, v in rows[name].items()}
        print(
            f"{name:>14}: {med['twins']:7.1f} ms a frame with the twins, {med['numpy']:7.1f} with NumPy",
            flush=True,
        )
    report = {
        "frames": FRAMES,
        "repeats": args.repeats,
        "note": args.note,
        "unit": "ms per sim frame (1/20 s)",
        "results": {
            n: {
                "twins_ms": [round(x, 2) for x in r["twins"]],
                "numpy_ms": [round(x, 2) for x in r["numpy"]],
                "twins_median_ms": round(statistics.median(r["twins"]), 2),
                "numpy_median_ms": round(statistics.median(r["numpy"]), 2),
            }
            for n, r in rows.items()
        },
    }
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
