"""The whole frame with ``--device``: the scene's BVH cast by the CUDA kernel (kernels/bvh_cuda.py), against
the CPU frame (Embree). Prints JSON (and writes it with ``--out``).

- ``cast``: every ``World.cast`` batch of the rig's frames (central rays, ``--beam full`` bundles, the rays
  that go on behind glass) recorded, then replayed: Embree (``World.cast``, its two threads), the kernel
  through ``BvhWorld.cast`` (with the copies in and out on a GPU), and the kernel alone on rays already
  on the device (``kernel_only``; all batches in one launch: ``kernel_one_launch``), in rays per second;
  how many rays' hits agree with Embree's (distance within 1e-4 relative, same object and material).
- ``frame``: the rig (default: four VLS-128s, docs/rigs/four-vls128.toml) with ``--beam full``, dual
  returns and 25 mm/h rain, every sensor's frames cast ahead on threads, run on the CPU and on the device:
  wall time, real-time factor (sim time over wall time), rays cast per second, and each sensor's scan
  statistics on both sides (points a scan, second-return and rain-flag shares, mean range, range and
  intensity medians) with their differences.
- ``device_frame``: the same rig with dual returns and 25 mm/h rain, one ray a pulse, timed and compared
  the same way (``--scenario`` picks ``full``, ``dual-rain`` or ``both``). On the device both run as the
  device-resident frame (hits, physics and packed points on the device): the copies are counted.
- ``sun_wet_crosstalk`` (``--scenario sun-wet-crosstalk``, or ``all``): the same rig, one ray a pulse, dual
  returns and 25 mm/h rain, with full sun low over the street, a road 80 % wet and the sensors'
  crosstalk, on the device as the rest: besides the statistics above, each sensor's sunlight false
  alarms, wet-road ghosts (points under the road), spray and rain points and crosstalk false points a
  scan, against the CPU's.

Targets (issue 43): >= 10x real time and >= 100 M rays/s on one H100 with ``--device cuda``. The CPU
build of the source (``--device cuda-source-on-cpu``) runs the same script on a machine without a GPU.

The CPU frame runs first and its figures are written at once; where the device cannot run (no CuPy, no
GPU) or fails part way (a kernel that does not compile, memory), the report still holds the CPU's figures
and says why under ``device_error``, and the script exits 3 (2: a wrong argument; 1: the CPU side broke).

Run: python tools/bench/bench_gpu_frame.py [--device cuda] [--frames 10] [--rig RIG.toml] [--out x.json]
     [--scenario both|full|dual-rain|sun-wet-crosstalk|all] [--dry-run: one VLP-16 (two for crosstalk),
     one frame, no cast replay]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from machine_record import write_json  # noqa: E402  (tools/bench, beside this script)

from rt_lidar.physics.model import PhysicsConfig, SensorPhysics  # noqa: E402
from rt_lidar.physics.weather import WeatherConfig  # noqa: E402
from rt_lidar.pipeline.beam_full import beam_summary  # noqa: E402
from rt_lidar.pipeline.builder import build_world, negotiate  # noqa: E402
from rt_lidar.pipeline.device_frame import DeviceWorldSource, device_frame_parts  # noqa: E402
from rt_lidar.pipeline.device_world import (  # noqa: E402
    BvhWorld,
    frame_device_unavailable_reason,
    kernels_device_for,
)
from rt_lidar.pipeline.frame_loop import Pipeline  # noqa: E402
from rt_lidar.pipeline.sources import WorldSource  # noqa: E402
from rt_lidar.rig.loop import RigLoop  # noqa: E402
from rt_lidar.rig.model import Rig, load_rig  # noqa: E402
from rt_lidar.sensor.beam import BeamConfig, exit_m_per_rad  # noqa: E402
from rt_lidar.sensor.materials import load_material_table  # noqa: E402
from rt_lidar.unreal_bridge.world import World  # noqa: E402

DEFAULT_RIG = ROOT / "docs" / "rigs" / "four-vls128.toml"
DRY_RUN_RIG = """[[sensor]]
name = "roof"
preset = "VLP-16"
mount = { xyz = [0.0, 0.0, 1.9], rpy_deg = [0.0, 0.0, 0.0] }
phase_deg = 0.0
sinks = []
"""
"""The rig of ``--dry-run``: one VLP-16 on the roof."""
DRY_RUN_PAIR = (
    DRY_RUN_RIG
    + """
[[sensor]]
name = "front"
preset = "VLP-16"
mount = { xyz = [1.5, 0.0, 1.2], rpy_deg = [0.0, 0.0, 0.0] }
phase_deg = 180.0
sinks = []
"""
)
"""The rig of ``--dry-run``'s sunlight, wet road and crosstalk: a second VLP-16 at the front (crosstalk)."""
LOW_SUN_LUX, LOW_SUN_DIRECTION = 100_000.0, (-1.0, 0.0, 0.05)
"""``sun-wet-crosstalk``'s sun: full summer sun, low behind the rig's start (the street lit, blinding)."""
ROAD_WETNESS = 0.8
GHOST_BELOW_ROAD_M = 0.3
"""A point this far under the road (the sensor's mount height) is a wet road's mirror ghost."""
SCENARIOS = {  # report key: (--scenario name, --beam full, sunlight + wet road + crosstalk)
    "full": ("full", True, False),
    "device_frame": ("dual-rain", False, False),
    "sun_wet_crosstalk": ("sun-wet-crosstalk", False, True),
}
SIM_HZ = 20.0
Batch = tuple[np.ndarray, np.ndarray, Any, float]


def rig_loop(
    rig: Rig, world: World, physics: PhysicsConfig, seed: int, crosstalk: bool = False
) -> tuple[RigLoop, list[Any], dict[str, Pipeline]]:
    """The rig's sensors in ``world``, each negotiated with its source as ``build_pipeline`` does (so
    ``--beam full`` applies; on a :class:`BvhWorld` the device-resident frame where the configuration
    runs there), its frames cast ahead on a thread of its own; the device frames' copy counters; and
    each sensor's pipeline (``crosstalk``: the rig's mutual interference on)."""
    table = load_material_table()
    pipes: dict[str, Pipeline] = {}
    counters = []
    for s in rig.sensors:
        arrays = table.arrays(world.material_names, s.preset.optics.wavelength_nm)
        if isinstance(world, BvhWorld):
            source, phys, _why = device_frame_parts(world, s.preset, arrays, physics, s.mount)
            if isinstance(source, DeviceWorldSource):
                counters.append(source.counter)
        else:
            source = WorldSource(
                world, s.preset.range.max_m, arrays.transmission, exit_m_per_rad(s.preset), mount=s.mount
            )
            source.retro_gain = arrays.retro_gain
            phys = SensorPhysics(s.preset, arrays, negotiate(source, s.preset, physics))
        weather = phys.config.weather
        source.use_wet_road(weather.road_wetness if weather is not None else 0.0)  # as RigLoop does
        pipes[s.name] = Pipeline(s.preset, source, phys, sim_hz=SIM_HZ, seed=seed, prefetch=True)
    return RigLoop.over(rig, pipes, SIM_HZ, crosstalk=crosstalk), counters, pipes


class CastRecorder:
    """Counts (and, with ``keep``, keeps) every batch cast into a world: ``world.cast`` wrapped in place."""

    def __init__(self, world: World, keep: bool) -> None:
        self.rays = 0
        self.batches: list[Batch] = []
        inner = world.cast

        def cast(
            origins: Any, directions: Any, t: Any, max_range: float = np.inf, threads: Any = None
        ) -> Any:
            o = np.ascontiguousarray(origins, np.float32).reshape(-1, 3)
            self.rays += o.shape[0]
            if keep:
                d = np.ascontiguousarray(directions, np.float32).reshape(-1, 3)
                self.batches.append(
                    (o.copy(), d.copy(), np.array(t, np.float64, copy=True), float(max_range))
                )
            return inner(origins, directions, t, max_range, threads)

        world.cast = cast  # type: ignore[method-assign]  # with_ego views copy it along
        if isinstance(world, BvhWorld):  # the device frame casts through cast_posed
            posed = world.cast_posed

            def cast_posed(origins: Any, directions: Any, *rest: Any, **kw: Any) -> Any:
                self.rays += int(origins.shape[0])
                return posed(origins, directions, *rest, **kw)

            world.cast_posed = cast_posed  # type: ignore[method-assign]


def _stats(points: list[np.ndarray], mount_z_m: float | None = None) -> dict[str, float]:
    """A sensor's scan statistics; with its mount height ``mount_z_m`` (the sunlight, wet road and
    crosstalk scenario) also its false alarms, points under the road, rain/spray points and crosstalk
    false points a scan."""
    allp: Any = np.concatenate(points) if points else np.zeros(0)
    if not allp.size:
        return {"points_per_scan": 0.0}
    rng = np.sqrt(allp["x"].astype(np.float64) ** 2 + allp["y"] ** 2 + allp["z"] ** 2)
    extra: dict[str, float] = {}
    if mount_z_m is not None:
        scans = len(points)
        extra = {
            "false_alarms_per_scan": round(float(np.count_nonzero(allp["flags"] & 16)) / scans, 2),
            "ghosts_per_scan": round(
                float(np.count_nonzero(allp["z"] < -mount_z_m - GHOST_BELOW_ROAD_M)) / scans, 2
            ),
            "rain_or_spray_per_scan": round(float(np.count_nonzero(allp["flags"] & 1)) / scans, 2),
            "crosstalk_per_scan": round(float(np.count_nonzero(allp["flags"] & 128)) / scans, 2),
        }
    return {
        "points_per_scan": round(allp.size / len(points), 1),
        "second_return_share": round(float((allp["return_id"] == 1).mean()), 5),
        "flagged_share": round(float((allp["flags"] != 0).mean()), 5),
        "rain_share": round(float(((allp["flags"] & 1) != 0).mean()), 5),
        "bloom_share": round(float(((allp["flags"] & 8) != 0).mean()), 5),
        "mean_range_m": round(float(rng.mean()), 4),
        "median_range_m": round(float(np.median(rng)), 4),
        "median_intensity": round(float(np.median(allp["intensity"])), 3),
        **extra,
    }


def run_frames(
    rig: Rig,
    world: World,
    device: str,
    frames: int,
    seed: int,
    full: bool = True,
    keep: bool = True,
    extras: bool = False,
) -> tuple[dict[str, Any], dict[str, list[np.ndarray]], CastRecorder]:
    """The rig's ``frames`` sim frames on ``device`` (``cpu``: Embree): timing and every sensor's scans;
    ``full``: ``--beam full``, else one ray a pulse; ``extras``: with sunlight, a wet road and crosstalk."""
    cast_world: World = world if device == "cpu" else BvhWorld(world, device)
    rec = CastRecorder(cast_world, keep=keep and device == "cpu")
    physics = PhysicsConfig(
        weather=WeatherConfig(rain_mm_h=25.0, road_wetness=ROAD_WETNESS if extras else 0.0),
        beam=BeamConfig(return_mode="dual", full=full),
        kernels_device=kernels_device_for(device, "cpu"),
        sun_illuminance_lux=LOW_SUN_LUX if extras else 0.0,
        sun_direction=LOW_SUN_DIRECTION if extras else None,
    )
    loop, counters, pipes = rig_loop(rig, cast_world, physics, seed, crosstalk=extras)
    scans: dict[str, list[np.ndarray]] = {name: [] for name in rig.names}
    try:
        loop.start()
        loop.step()  # the first frame (threads started, memory touched) is not timed
        rays0 = rec.rays
        t0 = time.perf_counter()
        for _ in range(frames):
            for name, got in loop.step().items():
                scans[name].extend(s.points for s in got)
        wall = time.perf_counter() - t0
    finally:
        loop.close()
    sim = frames / SIM_HZ
    timing: dict[str, Any] = {
        "device": device,
        "sim_frames": frames,
        "sim_time_s": sim,
        "wall_time_s": round(wall, 3),
        "realtime_factor": round(sim / wall, 3),
        "rays_cast": rec.rays - rays0,
        "M_rays_per_s": round((rec.rays - rays0) / wall / 1e6, 3),
        "physics": "device" if counters else "host",
    }
    if full:  # the share of pulses each sensor cast as the bundle (the neighbour test, then the probe)
        timing["bundled_share"] = {
            name: round(float(beam_summary(p).get("bundled_share", 0.0)), 5) for name, p in pipes.items()
        }
    if counters:  # every sensor's copies over the run (its frames fetched ahead included)
        up, down = sum(c.to_device for c in counters), sum(c.to_host for c in counters)
        timing["transfers"] = {
            "to_host": down,
            "to_device": up,
            "to_device_per_copy_to_host": round(up / max(down, 1), 3),
            "MB_per_copy_to_host": round(sum(c.bytes_to_host for c in counters) / max(down, 1) / 1e6, 3),
        }
    return timing, scans, rec


def _timed(fn: Callable[[], Any], sync: Callable[[], None], repeat: int) -> float:
    fn()
    sync()
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return float(best)


def bench_cast(world: World, device: str, batches: list[Batch], repeat: int) -> dict[str, Any]:
    """Embree against the kernel on the recorded batches (see the module docstring)."""
    from rt_lidar.kernels.bvh_cuda import cast_rays

    bw = BvhWorld(world, device)
    rays = sum(b[0].shape[0] for b in batches)
    agree = 0
    for o, d, t, r in batches:
        a, b = world.cast(o, d, t, r), bw.cast(o, d, t, r)
        hit_a, hit_b = np.isfinite(a.distance), np.isfinite(b.distance)
        both = hit_a & hit_b
        close = np.zeros(o.shape[0], bool)
        close[both] = np.abs(a.distance[both] - b.distance[both]) <= 1e-4 * a.distance[both]
        close |= ~hit_a & ~hit_b
        agree += int((close & (a.object_index == b.object_index) & (a.material == b.material)).sum())
    nothing = lambda: None  # noqa: E731
    sync = nothing
    xp: Any = np
    if device == "cuda":
        import cupy as cp

        xp = cp
        sync = cp.cuda.Device().synchronize
    embree_s = _timed(lambda: [world.cast(o, d, t, r) for o, d, t, r in batches], nothing, repeat)
    bvh_s = _timed(lambda: [bw.cast(o, d, t, r) for o, d, t, r in batches], sync, repeat)
    segments = xp.asarray(np.ascontiguousarray(world._segments, np.uint32))
    prepared = []
    for o, d, t, r in batches:
        boxes, poses, index = bw.instance_poses(t, o.shape[0])
        prepared.append([xp.asarray(x) for x in (o, d, boxes, poses, index)] + [r])
    kernel = bw._kernel
    arrays = bw._arrays

    def kernel_only() -> None:
        for o, d, boxes, poses, index, r in prepared:
            cast_rays(arrays, o, d, r, boxes, poses, index, segments, kernel)

    kernel_s = _timed(kernel_only, sync, repeat)
    # every batch in one launch (one time for all: the instance poses of the first batch's start)
    o_all = xp.concatenate([p[0] for p in prepared])
    d_all = xp.concatenate([p[1] for p in prepared])
    b1, p1, i1 = (xp.asarray(x) for x in bw.instance_poses(float(np.min(batches[0][2])), int(o_all.shape[0])))
    one_s = _timed(lambda: cast_rays(arrays, o_all, d_all, 250.0, b1, p1, i1, segments, kernel), sync, repeat)
    return {
        "batches": len(batches),
        "rays": rays,
        "embree_M_rays_per_s": round(rays / embree_s / 1e6, 3),
        "bvh_cast_M_rays_per_s": round(rays / bvh_s / 1e6, 3),
        "kernel_only_M_rays_per_s": round(rays / kernel_s / 1e6, 3),
        "kernel_one_launch_M_rays_per_s": round(rays / one_s / 1e6, 3),
        "same_hit_share": round(agree / max(rays, 1), 6),
        "static_triangles": int(bw.scene_arrays.s_id.shape[0]),
        "static_nodes": bw.scene_arrays.static_nodes,
        "moving_objects": bw.scene_arrays.instances,
    }


def _compare(
    rig: Rig,
    cpu: dict[str, list[np.ndarray]],
    dev: dict[str, list[np.ndarray]],
    device: str,
    mounts: dict[str, float | None],
) -> Any:
    stats = {}
    for name in rig.names:
        c, g = _stats(cpu[name], mounts[name]), _stats(dev[name], mounts[name])
        stats[name] = {"cpu": c, device: g, "difference": {k: round(g[k] - c[k], 5) for k in c if k in g}}
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cuda-source-on-cpu"))
    ap.add_argument("--rig", default=str(DEFAULT_RIG))
    ap.add_argument("--frames", type=int, default=10, help="sim frames timed on each side (20 Hz)")
    ap.add_argument("--repeat", type=int, default=3, help="replays of the cast batches (best kept)")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--skip-cpu-frame", action="store_true", help="time the device frame only")
    ap.add_argument(
        "--scenario",
        default="both",
        choices=("both", "full", "dual-rain", "sun-wet-crosstalk", "all"),
        help="full: --beam full, dual returns, rain; dual-rain: the same with one ray a pulse; "
        "sun-wet-crosstalk: dual-rain with sunlight, a wet road and crosstalk; both: full and dual-rain; "
        "all: the three",
    )
    ap.add_argument(
        "--dry-run", action="store_true", help="one VLP-16, one frame, no cast replay: the plumbing only"
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    why = frame_device_unavailable_reason(args.device)
    if why and args.skip_cpu_frame:
        print(f"bench_gpu_frame: --device {args.device} {why}", file=sys.stderr)
        return 2
    if args.dry_run:
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
            f.write(DRY_RUN_RIG)
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as g:
            g.write(DRY_RUN_PAIR)
        args.rig, args.frames, args.repeat = f.name, 1, 0
    rig = load_rig(args.rig)
    pair = load_rig(g.name) if args.dry_run else rig  # the rig of the crosstalk scenario
    if args.dry_run:
        Path(args.rig).unlink()
        Path(g.name).unlink()
    rig_file = "--dry-run: one VLP-16" if args.dry_run else str(args.rig)
    report: dict[str, Any] = {"rig": {"file": rig_file, "sensors": [s.preset.name for s in rig.sensors]}}
    report["scenario"] = f"dual returns, 25 mm/h rain, street, seed {args.seed}; full: --beam full"
    report["dry_run"] = bool(args.dry_run)
    report["device"] = args.device
    if why:  # the CPU's figures all the same, and why the device's are missing
        report["device_error"] = f"--device {args.device} {why}"
        print(f"bench_gpu_frame: {report['device_error']}: the CPU frame only", file=sys.stderr)
    elif args.device == "cuda":
        try:
            import cupy as cp

            props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
            name = props["name"]
            report["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
        except Exception as exc:  # CuPy imported but the GPU does not answer: the CPU's figures only
            report["device_error"] = _error(exc)

    def save() -> None:  # after each step, so a step cut short leaves what came before it
        if args.out:
            write_json(args.out, report)

    wanted = {"both": ("full", "dual-rain"), "all": ("full", "dual-rain", "sun-wet-crosstalk")}
    for key, (name, full, extras) in SCENARIOS.items():
        if name not in wanted.get(args.scenario, (args.scenario,)):
            continue
        rig_now = pair if extras else rig
        mounts = {s.name: (s.mount.position[2] if extras else None) for s in rig_now.sensors}
        frames: dict[str, Any] = {}
        cpu_scans: dict[str, list[np.ndarray]] | None = None
        batches: list[Batch] = []
        keep = full and args.repeat > 0
        # --beam full keeps the report's first keys (frame, scan_statistics, cast); the device frame its own
        section: dict[str, Any] = report if full else report.setdefault(key, {})
        if extras:
            section["rig"] = {"sensors": [s.preset.name for s in rig_now.sensors]}
        section["frame"] = frames
        if not args.skip_cpu_frame:
            world = build_world("street", seed=args.seed)
            frames["cpu"], cpu_scans, rec = run_frames(
                rig_now, world, "cpu", args.frames, args.seed, full, keep, extras
            )
            batches = rec.batches
            print(json.dumps({key: {"cpu": frames["cpu"]}}), file=sys.stderr)
            section["scan_statistics_cpu"] = {n: _stats(cpu_scans[n], mounts[n]) for n in rig_now.names}
            save()
        if "device_error" in report:
            continue
        try:
            world = build_world("street", seed=args.seed)
            frames[args.device], dev_scans, _ = run_frames(
                rig_now, world, args.device, args.frames, args.seed, full, False, extras
            )
            print(json.dumps({key: {args.device: frames[args.device]}}), file=sys.stderr)
            if cpu_scans is not None:
                section["scan_statistics"] = _compare(rig_now, cpu_scans, dev_scans, args.device, mounts)
                save()
                if batches:
                    world = build_world("street", seed=args.seed)
                    section["cast"] = bench_cast(world, args.device, batches, args.repeat)
        except Exception as exc:  # the device broke part way: keep the CPU's figures and say why
            report["device_error"] = _error(exc)
            print(f"bench_gpu_frame: the device frame failed: {report['device_error']}", file=sys.stderr)
        save()
    text = json.dumps(report, indent=2)
    print(text)
    save()
    return 3 if "device_error" in report else 0


def _error(exc: BaseException) -> str:
    """One line of ``exc`` and where it was raised (the last frame of its traceback)."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}{where}"


if __name__ == "__main__":
    raise SystemExit(main())
