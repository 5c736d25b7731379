"""Ray-casting engines side by side: the same scene, the same lidar rays, the same two cores.

Builds two scenes (the embedded default world's street, seed 0, and the street plus 40 dense boulders,
about 1 M triangles), freezes every object at one time into one world-frame mesh, and casts the same
HDL-64E rays into it (20 scans in firing order, from the sensor pose at each firing time, as the
pipeline casts them: about 2.67 M rays) with every engine that is installed:

- ``embreex``: Embree 4 through embreex's ``EmbreeScene.run`` (one ``rtcIntersect1`` per ray, serial per
  call; the rays are split over two threads as the pipeline does), in its default robust mode (what
  World's EmbreeCaster gets: embreex 4 makes ``EmbreeScene()`` robust) and in its non-robust mode;
- ``embree_packetN``: Embree's own packet queries (``rtcIntersect4/8/16``, and ``rtcIntersect1`` through
  the same loop for reference), robust, over a BVH built at Embree's high quality (as World builds it;
  ``embree_packet8_medium``: its medium default, as World built it before; ``embree_packet8_fast``:
  non-robust, the ``embree-fast`` caster), on the libembree4 that the embreex wheel bundles. embreex does
  not bind them, and Embree 4 has no stream API (``rtcIntersect1M`` went with Embree 3), so they go
  through the pipeline's own compiled packet caster (``unreal_bridge/world/_embree_packets.c``, built at
  install where there is a C compiler; World's EmbreeCaster casts with its 8-wide packets); the rays are
  packed in firing order (a packet is consecutive rings of one column: already coherent);
- ``open3d``: ``open3d.t.geometry.RaycastingScene.cast_rays`` (Embree inside, TBB threads);
- ``mitsuba_llvm``: Mitsuba 3 / Dr.Jit LLVM ``Scene.ray_intersect_preliminary`` (coherent and not);
- ``world_cast``: the pipeline's own ``World.cast`` on the same frozen scene with one time, and on the
  live scene (moving objects, per-ray firing times) exactly as ``rt_lidar.pipeline.sources`` calls it,
  in one batch and in the pipeline's batches (one simulation frame each, ``--sim-hz``); ``*_frames``:
  embreex, Embree packets and Mitsuba in those batches too (an engine's per-call cost shows there);
  ``world_fast_cast_*``: the same with ``World(caster="embree-fast")``;
- ``robust_at_lower_isa``: World's robust packets again with Embree held to the next lower instruction
  set (``embree_isa_probe.py``): robust hit distances depend on the CPU's (its reciprocal estimate), the
  same kind of last-bit change as the non-robust mode's, counted beside it.

Every engine's time counts numpy in and numpy distance + face out (what the pipeline needs). Each is
timed 3 times (``--repeats``) and the best wall time is kept, with the CPU time of that run: the machine
may be shared, so compare ratios within one run. Hit distances are checked against embreex: a ray
mismatches when one engine hits and the other misses, or the distances differ by more than 1 mm + 1e-5
of the distance (``mismatch_vs_embreex``); ``bits_differ_vs_embreex`` counts every distance that is
not bit for bit embreex's (what a byte-identical scan needs). Writes docs/bench/casters.json (``--out``).

Run: PYTHONPATH=. .venv/bin/python tools/bench/bench_casters.py [--scans 20] [--repeats 3]
Optional engines: ``pip install -e .[bench]`` (open3d, mitsuba).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import itertools
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from embree_isa_probe import isa_pair, robust_distances_at, ulps_apart  # beside this script
from machine_record import cpu_flags, write_json  # tools/bench, beside this script

from rt_lidar.pipeline.pose_samples import _interpolated_sensor_poses
from rt_lidar.pipeline.sources import _rotate_f32
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between, scan_period_ns
from rt_lidar.unreal_bridge.world import MeshObject, Scene, StaticTrajectory, World, street_scene
from rt_lidar.unreal_bridge.world.raycast import embree_packets

HERE = Path(__file__).resolve().parent
Rays = tuple[np.ndarray, np.ndarray, np.ndarray]
Cast = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""(origins, directions) -> (distance float32, inf = miss; face int, -1 = miss)."""


def million_triangle_scene() -> Scene:
    """The street plus 40 dense boulders (~20k triangles each): about 1 M triangles (bench_raycast's)."""
    from bench_raycast import million_triangle_scene as make

    return make()


def lidar_rays(world: World, preset_name: str, scans: int) -> Rays:
    """Origins, unit directions (float32, world frame) and firing times (s) of ``scans`` whole scans,
    in firing order, from the sensor pose at each firing time (as the pipeline computes them)."""
    preset = load_preset(preset_name)
    firings = firings_between(preset, 0, scans * scan_period_ns(preset))
    pos, quat = _interpolated_sensor_poses(world, firings.t_ns, None)
    dirs = _rotate_f32(quat.astype(np.float32), firings.directions())
    return pos.astype(np.float32), dirs, firings.t_ns.astype(np.float64) * 1e-9


def frozen(scene: Scene, t: float) -> Scene:
    """The scene with every object static at its pose at ``t``."""
    objs = [
        MeshObject(
            o.name,
            o.vertices,
            o.faces,
            o.face_material,
            o.segment_id,
            StaticTrajectory(o.trajectory.pose_at(t)),
        )
        for o in scene.objects
    ]
    return Scene(**{**scene.__dict__, "objects": objs})


def flat_mesh(scene: Scene) -> tuple[np.ndarray, np.ndarray]:
    """All static objects as one world-frame mesh, in scene order (as World builds its static BVH)."""
    verts, faces, offset = [], [], 0
    for o in scene.objects:
        if o.triangle_count == 0:
            continue
        verts.append(o.trajectory.pose_at(0.0).transform_points(o.vertices).astype(np.float32))
        faces.append(o.faces + offset)
        offset += o.vertices.shape[0]
    return np.ascontiguousarray(np.concatenate(verts)), np.ascontiguousarray(np.concatenate(faces))


_pool = ThreadPoolExecutor(max_workers=2)


def _two_halves(fn: Cast, o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = o.shape[0] // 2
    parts = list(_pool.map(lambda s: fn(o[s], d[s]), [slice(0, half), slice(half, None)]))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def embreex_engine(v: np.ndarray, f: np.ndarray, max_range: float, robust: bool) -> Cast:
    """embreex EmbreeScene.run, the rays split over two threads; ``robust`` is embreex 4's default and
    what World's EmbreeCaster gets."""
    from embreex import rtcore_scene
    from embreex.mesh_construction import TriangleMesh

    scene = rtcore_scene.EmbreeScene(robust=robust)
    TriangleMesh(scene, v, f)
    scene.run(np.zeros((1, 3), np.float32), np.array([[0.0, 0.0, 1.0]], np.float32))

    def one(o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        res = scene.run(o, d, dists=np.full(o.shape[0], max_range, np.float32), output=1)
        face = res["primID"]
        dist = res["tfar"]
        dist[face < 0] = np.inf
        return dist, face

    return lambda o, d: _two_halves(one, o, d)


def packet_engine(
    mod: Any,
    v: np.ndarray,
    f: np.ndarray,
    max_range: float,
    width: int,
    robust: bool = True,
    high_quality: bool = True,
) -> Cast:
    """Embree rtcIntersect<width> on consecutive rays through the pipeline's own compiled packet caster
    (``rt_lidar.unreal_bridge.world.raycast.embree_packets``), two threads (it lets go of the GIL); robust and
    over a high-quality BVH as World's EmbreeCaster casts, unless told otherwise."""
    fu = np.ascontiguousarray(f, dtype=np.uint32)
    vf = np.ascontiguousarray(v, np.float32)
    scene = mod.new_scene(vf, v.shape[0], fu, fu.shape[0], robust, high_quality)

    def one(o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        o, d = np.ascontiguousarray(o), np.ascontiguousarray(d)
        dist = np.full(o.shape[0], max_range, np.float32)
        face = np.empty(o.shape[0], np.int32)
        mod.intersect(scene, o, d, dist, face, width)
        return dist, face

    return lambda o, d: _two_halves(one, o, d)


def open3d_engine(v: np.ndarray, f: np.ndarray, max_range: float) -> Cast:
    """Open3D RaycastingScene.cast_rays on (N, 6) rays, its own threads (nthreads=0: all cores)."""
    o3d: Any = importlib.import_module("open3d")

    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.core.Tensor(v), o3d.core.Tensor(f.astype(np.uint32)))

    def cast(o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rays = o3d.core.Tensor.from_numpy(np.concatenate([o, d], axis=1))
        res = scene.cast_rays(rays, nthreads=0)
        dist = res["t_hit"].numpy()
        face = res["primitive_ids"].numpy().astype(np.int32)
        miss = ~(dist <= max_range)
        dist[miss], face[miss] = np.inf, -1
        return dist, face

    return cast


def mitsuba_engine(v: np.ndarray, f: np.ndarray, max_range: float, coherent: bool) -> Cast:
    """Mitsuba 3 (Dr.Jit LLVM backend) Scene.ray_intersect_preliminary, Dr.Jit's threads."""
    dr: Any = importlib.import_module("drjit")
    mi: Any = importlib.import_module("mitsuba")

    mi.set_variant("llvm_ad_rgb")
    mesh = mi.Mesh("m", v.shape[0], f.shape[0])
    params = mi.traverse(mesh)
    params["vertex_positions"] = mi.Float(v.ravel())
    params["faces"] = mi.UInt32(f.astype(np.uint32).ravel())
    params.update()
    scene = mi.load_dict({"type": "scene", "mesh": mesh})

    def cast(o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ot, dt = np.ascontiguousarray(o.T), np.ascontiguousarray(d.T)
        ray = mi.Ray3f(mi.Point3f(ot[0], ot[1], ot[2]), mi.Vector3f(dt[0], dt[1], dt[2]))
        ray.maxt = mi.Float(max_range)
        pi = scene.ray_intersect_preliminary(ray, coherent=coherent)
        valid = pi.is_valid()
        t = dr.select(valid, pi.t, dr.inf)
        prim = dr.select(valid, mi.Int32(pi.prim_index), -1)
        dr.eval(t, prim)
        return np.array(t, dtype=np.float32), np.array(prim, dtype=np.int32)

    return cast


def _distances(cast: Cast, o: np.ndarray, d: np.ndarray) -> np.ndarray:
    return np.asarray(cast(o, d)[0])


def _batched(cast: Cast, o: np.ndarray, d: np.ndarray, batches: list[slice]) -> np.ndarray:
    return np.concatenate([np.asarray(cast(o[b], d[b])[0]) for b in batches])


def timed_round_robin(
    casts: dict[str, Callable[[], np.ndarray]], repeats: int
) -> tuple[dict[str, float], dict[str, float], dict[str, np.ndarray]]:
    """Each cast ``repeats`` times, in turns (every cast once per round, so that a spell of load from
    other work falls on all of them alike): the best wall time, the best CPU time (all threads of this
    process) and the first run's distances of each."""
    walls = dict.fromkeys(casts, np.inf)
    cpus = dict.fromkeys(casts, np.inf)
    results: dict[str, np.ndarray] = {}
    for _ in range(repeats):
        for label, fn in casts.items():
            c0, t0 = time.process_time(), time.perf_counter()
            res = fn()
            walls[label] = min(walls[label], time.perf_counter() - t0)
            cpus[label] = min(cpus[label], time.process_time() - c0)
            results.setdefault(label, res)
    return walls, cpus, results


def agreement(ref: np.ndarray, dist: np.ndarray) -> float:
    """Fraction of rays whose hit distance disagrees with the reference (hit vs miss, or > 1 mm)."""
    rh, dh = np.isfinite(ref), np.isfinite(dist)
    both = rh & dh
    far = np.zeros(ref.shape, bool)
    far[both] = np.abs(ref[both] - dist[both]) > 1e-3 + 1e-5 * ref[both]
    return float(((rh != dh) | far).mean())


def bench_scene(
    scene: Scene, preset: str, scans: int, repeats: int, t_freeze: float, sim_period: float
) -> dict:
    """Every engine on one scene: a dict of per-engine entries plus the scene's facts."""
    live = World(scene)
    o, d, t_ray = lidar_rays(live, preset, scans)
    max_range = float(load_preset(preset).range.max_m)
    fz = frozen(scene, t_freeze)
    t0 = time.perf_counter()
    world = World(fz)
    world_build = time.perf_counter() - t0
    fast_world, fast_live = World(fz, caster="embree-fast"), World(scene, caster="embree-fast")
    v, f = flat_mesh(fz)
    n = o.shape[0]
    entry: dict = {
        "triangles": int(f.shape[0]),
        "rays": n,
        "max_range_m": max_range,
        "world_build_s": round(world_build, 3),
        "engines": {},
    }
    engines: dict[str, Callable[[], Cast]] = {
        "embreex": lambda: embreex_engine(v, f, max_range, robust=True),
        "embreex_nonrobust": lambda: embreex_engine(v, f, max_range, robust=False),
    }
    packets = embree_packets()
    if packets is not None:
        for w in (1, 4, 8, 16):
            engines[f"embree_packet{w}"] = functools.partial(packet_engine, packets, v, f, max_range, w)
        engines["embree_packet8_medium"] = functools.partial(
            packet_engine, packets, v, f, max_range, 8, high_quality=False
        )
        engines["embree_packet8_fast"] = functools.partial(packet_engine, packets, v, f, max_range, 8, False)
    for mod, label, make in (
        ("open3d", "open3d", lambda: open3d_engine(v, f, max_range)),
        ("mitsuba", "mitsuba_llvm", lambda: mitsuba_engine(v, f, max_range, coherent=False)),
        ("mitsuba", "mitsuba_llvm_coherent", lambda: mitsuba_engine(v, f, max_range, coherent=True)),
    ):
        try:
            __import__(mod)
        except Exception:  # not installed, or its native library does not load
            entry["engines"][label] = {"skipped": "not installed"}
            continue
        engines[label] = make
    frames = np.searchsorted(t_ray, np.arange(0.0, float(t_ray[-1]) + sim_period, sim_period))
    batches = [slice(int(a), int(b)) for a, b in itertools.pairwise(frames) if b > a]
    casts: dict[str, Callable[[], np.ndarray]] = {}
    raw: dict[str, Cast] = {}
    for label, make in engines.items():
        b0 = time.perf_counter()
        try:
            cast = make()
            cast(o[:4096], d[:4096])  # a JIT's compile, a lazy BVH build: not in the timed runs
        except Exception as exc:  # an engine that cannot run here is reported, not fatal
            entry["engines"][label] = {"skipped": f"{type(exc).__name__}: {exc}"}
            continue
        entry["engines"][label] = {"build_s": round(time.perf_counter() - b0, 3)}
        casts[label] = functools.partial(_distances, cast, o, d)
        raw[label] = cast
    for label in ("embreex", "mitsuba_llvm", "embree_packet8", "embree_packet8_fast"):  # in frame batches too
        if label in raw:
            casts[f"{label}_frames"] = functools.partial(_batched, raw[label], o, d, batches)
    casts["world_cast_frozen"] = lambda: world.cast(o, d, t_freeze, max_range).distance
    casts["world_cast_live"] = lambda: live.cast(o, d, t_ray, max_range).distance
    casts["world_cast_live_frames"] = lambda: np.concatenate(
        [live.cast(o[b], d[b], t_ray[b], max_range).distance for b in batches]
    )
    casts["world_fast_cast_frozen"] = lambda: fast_world.cast(o, d, t_freeze, max_range).distance
    casts["world_fast_cast_live_frames"] = lambda: np.concatenate(
        [fast_live.cast(o[b], d[b], t_ray[b], max_range).distance for b in batches]
    )
    entry["frame_batch_rays"] = int(np.median([b.stop - b.start for b in batches]))
    walls, cpus, results = timed_round_robin(casts, repeats)
    ref = results["embreex"]
    for label, dist in results.items():
        e = entry["engines"].setdefault(label, {})
        e.update(
            {
                "wall_s": round(walls[label], 4),
                "cpu_s": round(cpus[label], 4),
                "mrays_per_s": round(n / walls[label] / 1e6, 2),
                "mrays_per_cpu_s": round(n / cpus[label] / 1e6, 2),
                "hit_fraction": round(float(np.isfinite(dist).mean()), 4),
                "mismatch_vs_embreex": round(agreement(ref, dist), 6),
                "bits_differ_vs_embreex": round(
                    float((dist.view(np.uint32) != ref.view(np.uint32)).mean()), 6
                ),
            }
        )
    if "embree_packet8" in results:
        entry["robust_at_lower_isa"] = isa_dependence(results, o, d, v, f, max_range)
    for key, per in (("mrays_per_s", "wall"), ("mrays_per_cpu_s", "cpu")):
        rates = {k: e[key] for k, e in entry["engines"].items() if key in e}
        engines_only = {k: r for k, r in rates.items() if not k.startswith("world_")}
        fastest = max(engines_only, key=engines_only.__getitem__)
        entry[f"fastest_engine_by_{per}"] = fastest
        for label in [k for k in rates if k.startswith("world_")]:
            entry[f"{label}_share_of_fastest_by_{per}"] = round(rates[label] / engines_only[fastest], 3)
        in_frames = {k: r for k, r in engines_only.items() if k.endswith("_frames")}
        if in_frames:  # like with like: the engines in the pipeline's batches
            best = max(in_frames, key=in_frames.__getitem__)
            entry[f"fastest_engine_in_frames_by_{per}"] = best
            for label in ("world_cast_live_frames", "world_fast_cast_live_frames"):
                share = rates[label] / in_frames[best]
                entry[f"{label}_share_of_fastest_in_frames_by_{per}"] = round(share, 3)
    return entry


def isa_dependence(
    results: dict[str, np.ndarray],
    o: np.ndarray,
    d: np.ndarray,
    v: np.ndarray,
    f: np.ndarray,
    max_range: float,
) -> dict:
    """World's robust packets run again with Embree held to the next lower instruction set: how many
    hit distances change (and by how many float32 steps), beside how many the non-robust mode changes."""
    pair = isa_pair(cpu_flags())
    if pair is None:
        return {"skipped": "neither AVX-512 nor AVX2 on this CPU"}
    ref = results["embree_packet8"]
    lower = robust_distances_at(pair[1], o, d, v, f, max_range)
    both = np.isfinite(ref) & np.isfinite(lower)
    steps = ulps_apart(ref[both], lower[both])
    out = {
        "isa_default": pair[0],
        "isa_lower": pair[1],
        "bits_differ": round(float((lower.view(np.uint32) != ref.view(np.uint32)).mean()), 6),
        "hit_or_miss_differs": int((np.isfinite(ref) != np.isfinite(lower)).sum()),
        "max_ulps": int(steps.max()) if steps.size else 0,
        "max_abs_m": float(np.abs(ref[both] - lower[both]).max()) if steps.size else 0.0,
        "over_1mm": int((np.abs(ref[both] - lower[both]) > 1e-3).sum()),
    }
    if "embree_packet8_fast" in results:  # the non-robust mode, on the default instruction set
        fast = results["embree_packet8_fast"]
        both = np.isfinite(ref) & np.isfinite(fast)
        out["nonrobust_bits_differ"] = round(float((fast.view(np.uint32) != ref.view(np.uint32)).mean()), 6)
        out["nonrobust_hit_or_miss_differs"] = int((np.isfinite(ref) != np.isfinite(fast)).sum())
        moved = ulps_apart(ref[both], fast[both])
        out["nonrobust_median_ulps_of_those_moved"] = (
            float(np.median(moved[moved > 0])) if moved.any() else 0.0
        )
        out["nonrobust_over_1mm"] = int((np.abs(ref[both] - fast[both]) > 1e-3).sum())
    return out


def versions() -> dict[str, str]:
    """Versions of the engines' packages that are installed."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("embreex", "open3d", "mitsuba", "drjit", "numpy"):
        with contextlib.suppress(PackageNotFoundError):
            out[pkg] = version(pkg)
    return out


def main() -> None:
    """Run every engine on both scenes and write the JSON report."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("docs/bench/casters.json"))
    ap.add_argument("--preset", default="HDL-64E")
    ap.add_argument("--scans", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sim-hz", type=float, default=20.0, help="the pipeline's frame rate (its cast batches)")
    ap.add_argument("--scenes", default="street,1M_triangles")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    makers = {"street": lambda: street_scene(0), "1M_triangles": million_triangle_scene}
    report: dict = {
        "versions": versions(),
        "preset": args.preset,
        "scans": args.scans,
        "timing": f"every cast {args.repeats} times in turns; the best wall time and the best CPU time (all "
        "threads of the process) of each; the machine may be shared, so compare ratios within one run",
        "load_average_before": os.getloadavg()[0],
        "scenes": {},
    }
    for name in args.scenes.split(","):
        report["scenes"][name] = bench_scene(
            makers[name](), args.preset, args.scans, args.repeats, 1.0, 1.0 / args.sim_hz
        )
        print(json.dumps({name: report["scenes"][name]}, indent=1), flush=True)
    report["load_average_after"] = os.getloadavg()[0]
    write_json(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
