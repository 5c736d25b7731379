"""Ray-casting throughput of the embedded world (unreal_bridge.world).

Casts lidar-like ray fans (rings x azimuth steps from the sensor pose) into the default street scene and
into a ~1 M-triangle scene, through World.cast (static BVH + moving objects) and prints JSON with
rays/s. Run: .venv/bin/python tools/bench/bench_raycast.py [--out bench.json] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.unreal_bridge.world import MeshObject, Pose, Scene, StaticTrajectory, World, street_scene
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder

RAY_COUNTS = {"133k": (64, 2084), "1M": (128, 8192)}


def lidar_rays(world: World, t: float, rings: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Origins and unit directions of a full rotation of a rings x steps lidar at the sensor pose."""
    pose = world.sensor_pose(t)
    az = np.linspace(-np.pi, np.pi, steps, endpoint=False)
    el = np.radians(np.linspace(-25.0, 15.0, rings))
    a, e = np.meshgrid(az, el, indexing="ij")
    d = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], axis=-1).reshape(-1, 3)
    dirs = pose.rotate(d).astype(np.float32)
    return np.broadcast_to(pose.position.astype(np.float32), dirs.shape).copy(), dirs


def million_triangle_scene() -> Scene:
    """The street plus 40 dense boulders (~20k triangles each) around the start: about 1 M triangles."""
    scene = street_scene(0)
    rng = np.random.default_rng(1)
    extra: list[MeshObject] = []
    for k in range(40):
        b = MeshBuilder()
        b.sphere((0.0, 0.0, 0.8), (1.2, 1.0, 0.8), "rock", subdivisions=5, jitter=0.05, rng=rng)
        x = float(rng.uniform(-20.0, 60.0))
        y = float(rng.choice([-1.0, 1.0]) * rng.uniform(4.0, 9.0))
        extra.append(b.build(f"boulder_{k}", 200, StaticTrajectory(Pose.from_xyz_rpy(x, y, 0.0))))
    scene.objects.extend(extra)
    return scene


def bench(world: World, repeats: int) -> dict[str, float]:
    """Best-of-``repeats`` rays/s for each ray count, plus the hit fraction."""
    out: dict[str, float] = {}
    for label, (rings, steps) in RAY_COUNTS.items():
        o, d = lidar_rays(world, 0.5, rings, steps)
        best = np.inf
        hits = None
        for _ in range(repeats):
            t0 = time.perf_counter()
            hits = world.cast(o, d, 0.5, 200.0)
            best = min(best, time.perf_counter() - t0)
        assert hits is not None
        out[f"rays_per_s_{label}"] = round(len(o) / best)
        out[f"hit_fraction_{label}"] = round(float(np.isfinite(hits.distance).mean()), 3)
    return out


def main() -> None:
    """Run the benchmark and print (and optionally write) the JSON report."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=None, help="write the JSON report here too")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    report: dict[str, dict[str, float]] = {}
    for name, make in (("street", lambda: street_scene(0)), ("1M_triangles", million_triangle_scene)):
        t0 = time.perf_counter()
        scene = make()
        t1 = time.perf_counter()
        world = World(scene)
        t2 = time.perf_counter()
        entry: dict[str, float] = {
            "triangles": scene.triangle_count,
            "scene_build_s": round(t1 - t0, 3),
            "world_build_s": round(t2 - t1, 3),
        }
        entry.update(bench(world, args.repeats))
        report[name] = entry
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        write_json(args.out, report)


if __name__ == "__main__":
    main()
