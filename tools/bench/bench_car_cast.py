"""What the street's curved car bodies (issue 40, change 37) cost the world cast: the same rays against the
street with today's cars and with the box-bodied cars before change 37, in one process, alternated.

Run: .venv/bin/python tools/bench/bench_car_cast.py [--out docs/bench/car_cast.json] [--frames 4]
     [--rounds 40] [--preset VLS-128] [--return-mode dual] [--seed 3]

The street (seed ``--seed``) is built twice: as it is, and with every car's body a 4.5 x 1.8 x 0.64 m
box with one straight chrome strip a side and no door mirrors (``add_car`` as it was before change 37).
The rays of ``--frames`` sim frames (every cast the frame loop makes, first surfaces and the glass steps
and mirror rays after them, one thread) are recorded against today's street, then cast again against
each world in turn, ``--rounds`` times, the order reversed every other round so that a shared machine's
drift falls on both. The JSON keeps each world's triangles, each round's CPU ms per frame of the cast
(``time.thread_time``: one thread, which a loaded machine moves less than wall time), their minimum and
median, and how many rays of each cast hit something in each world (the work is the same rays; only the
BVH each traverses differs). Speed only: nothing here changes a scan.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

import rt_lidar.unreal_bridge.world.props as props
import rt_lidar.unreal_bridge.world.street as street
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.frame_loop import frame_time_ns
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge.world import World
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder

SIM_HZ = 20.0
Cast = tuple[np.ndarray, np.ndarray, np.ndarray, float]


def add_box_car(
    b: MeshBuilder, paint: str, windscreen: str = "car_glass", rear_glass: str = "car_glass"
) -> None:
    """Today's car with the body before change 37: a box, one straight chrome strip a side, no mirrors
    (the glazing, cabin, tyres and plates as today's)."""
    half_w = props.CAR_WIDTH / 2
    b.box((0.0, 0.0, 0.62), (props.CAR_LENGTH, props.CAR_WIDTH, 0.64), paint)
    for s in (-1.0, 1.0):
        b.box((0.0, s * (half_w + 0.005), 0.75), (3.6, 0.01, 0.05), "chrome")
    saved_body, saved_box = props.add_car_body, MeshBuilder.box
    skip = {"n": 0}

    def no_body(_b: MeshBuilder, _paint: str) -> None:
        return None

    def box_but_trims(self: MeshBuilder, center: Any, size: Any, material: str, **kw: Any) -> Any:
        # today's chrome strips (1.2 m pieces) and mirrors (at MIRROR_X_M) are left out
        is_strip = material == "chrome" and abs(size[0] - 1.2) < 1e-9 and abs(size[1] - 0.01) < 1e-9
        is_mirror = abs(abs(center[1]) - props.MIRROR_Y_M) < 1e-9 and abs(center[2] - 1.02) < 1e-9
        if is_strip or is_mirror:
            skip["n"] += 1
            return None
        return saved_box(self, center, size, material, **kw)

    props.add_car_body = no_body  # type: ignore[assignment]
    MeshBuilder.box = box_but_trims  # type: ignore[method-assign,assignment]
    try:
        props.add_car(b, paint, windscreen, rear_glass)
    finally:
        props.add_car_body = saved_body
        MeshBuilder.box = saved_box  # type: ignore[method-assign]
    if skip["n"] != 10:  # 6 strip pieces and 4 mirror boxes: add_car changed, this bench must follow
        raise SystemExit(f"bench_car_cast: expected 10 trim boxes of today's car, found {skip['n']}")


def street_world(seed: int, add_car: Callable[..., None] | None) -> World:
    """The street with today's cars (``add_car`` None) or with ``add_car``'s."""
    saved = street.add_car
    if add_car is not None:
        street.add_car = add_car
    try:
        return build_world("street", seed=seed)
    finally:
        street.add_car = saved


def record_casts(world: World, preset: str, mode: str, seed: int, frames: int) -> list[Cast]:
    """Every ``world.cast`` of ``frames`` sim frames (spread over the scan) as the frame loop makes them."""
    physics = PhysicsConfig(beam=BeamConfig(return_mode=mode))
    built = build_pipeline(preset, world, seed=seed, sim_hz=SIM_HZ, physics=physics)
    source = built.pipeline.source
    source.cast_threads = 1  # type: ignore[attr-defined]
    casts: list[Cast] = []
    original = world.cast

    def recording(o: np.ndarray, d: np.ndarray, t: np.ndarray, r: float, threads: int | None = None) -> Any:
        casts.append((o.copy(), d.copy(), t.copy(), r))
        return original(o, d, t, r, threads=threads)

    world.cast = recording  # type: ignore[method-assign,assignment]
    try:
        for k in range(frames):
            t0, t1 = frame_time_ns(9 * k, SIM_HZ), frame_time_ns(9 * k + 1, SIM_HZ)
            source.hits(firings_between(built.preset, t0, t1), t0, t1)
    finally:
        world.cast = original  # type: ignore[method-assign]
    return casts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("docs/bench/car_cast.json"))
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--preset", default="VLS-128")
    ap.add_argument("--return-mode", default="dual")
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    if args.frames < 1 or args.rounds < 1:
        print("bench_car_cast: --frames and --rounds must be at least 1", file=sys.stderr)
        raise SystemExit(2)
    worlds = {"curved_car": street_world(args.seed, None), "box_car": street_world(args.seed, add_box_car)}
    casts = record_casts(worlds["curved_car"], args.preset, args.return_mode, args.seed, args.frames)
    ms: dict[str, list[float]] = {name: [] for name in worlds}
    for r in range(args.rounds):
        for name in list(worlds) if r % 2 == 0 else list(worlds)[::-1]:
            world, t = worlds[name], time.thread_time()
            for o, d, tr, rng in casts:
                world.cast(o, d, tr, rng, threads=1)
            ms[name].append((time.thread_time() - t) * 1e3 / args.frames)
    hits = {
        name: [int(np.isfinite(w.cast(o, d, t, r, threads=1).distance).sum()) for o, d, t, r in casts]
        for name, w in worlds.items()
    }
    rows = {
        name: {
            "triangles": worlds[name].triangle_count,
            "cast_cpu_ms_per_frame_min": min(v),
            "cast_cpu_ms_per_frame_median": statistics.median(v),
            "cast_cpu_ms_per_frame": v,
            "hits_per_cast": hits[name],
        }
        for name, v in ms.items()
    }
    curved, box = ms["curved_car"], ms["box_car"]
    report = {
        "bench": "car_cast",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "preset": args.preset,
        "return_mode": args.return_mode,
        "frames": args.frames,
        "rounds": args.rounds,
        "rays_per_cast": [len(c[0]) for c in casts],
        "worlds": rows,
        "curved_over_box_min": min(curved) / min(box),
        "curved_over_box_median": statistics.median(curved) / statistics.median(box),
        "load_average": os.getloadavg(),
    }
    write_json(args.out, report)
    for name, v in ms.items():
        tris = worlds[name].triangle_count
        print(
            f"{name:10s} {tris:7d} triangles  cast CPU {min(v):.1f} ms/frame min,"
            f" {statistics.median(v):.1f} median"
        )
    ratio_min, ratio_median = min(curved) / min(box), statistics.median(curved) / statistics.median(box)
    print(f"curved / box: {ratio_min:.3f} (min), {ratio_median:.3f} (median)")


if __name__ == "__main__":
    main()
