"""Running a rig: every sensor's scans into ``OUT/<sensor>/scans`` (PCD + KITTI; its mount in
``OUT/<sensor>/calib.txt``, ``Tr_lidar_to_base_link``, KITTI's 3x4 row-major form) and its own sinks, one
rosbag2 for the rig (``OUT/rosbag``), ``OUT/rig.json`` (the resolved rig) and ``OUT/summary.json``."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from rt_lidar.config import DEFAULT_CASTER, SceneSetup, SunConfig
from rt_lidar.errors import ConfigError
from rt_lidar.faults.wiring import message_sinks_with_faults
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.beam_full import beam_summary
from rt_lidar.pipeline.builder import build_world
from rt_lidar.pipeline.device_frame import device_summary
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.points import PointFlag
from rt_lidar.rig.bag import RigBag
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.model import Rig, load_rig
from rt_lidar.rig.stream import RigStream
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sinks.base import ScanSink, SinkContext, make_sink
from rt_lidar.sinks.fanout import SinkFanout
from rt_lidar.unreal_bridge.world import Pose

__all__ = ["RigRunOptions", "drive_rig", "run_rig_demo", "write_mount_calib"]


@dataclass(frozen=True)
class RigRunOptions:
    """What ``rt-lidar demo --rig`` runs."""

    rig: str
    frames: int = 10
    """Scans written per sensor."""
    seed: int = 0
    sim_hz: float = 20.0
    out: str = "out/rig"
    scene: str = "street"
    caster: str = DEFAULT_CASTER
    """The world's ray caster (:data:`rt_lidar.config.CASTERS`)."""
    progress: bool = True
    rosbag: bool = True
    """One rosbag2 of every sensor in ``OUT/rosbag``."""
    crosstalk: bool = False
    """Mutual interference between the rig's sensors (:mod:`rt_lidar.rig.crosstalk`)."""
    weather: WeatherConfig | None = None
    kernels_device: str = "cpu"
    """Where the weather and echo-waveform kernels run (``--kernels-device``): ``cpu`` or ``cuda``."""
    device: str = "cpu"
    """Where the frame runs (``--device``): ``cpu``, ``cuda`` or ``cuda-source-on-cpu`` (docs/gpu.md)."""
    stream: str | None = None
    """A ZeroMQ endpoint publishing every sensor's scans (header ``sensor``), e.g. tcp://127.0.0.1:5555."""
    write_scans: bool = True
    """Write ``OUT/<sensor>/scans`` (``--no-scans``: only the bag, the stream and the rig's sinks)."""
    scene_setup: SceneSetup | None = None
    """More of the scene than its name (a dataset run's, :class:`rt_lidar.config.SceneSetup`)."""
    beam: BeamConfig | None = None
    """Every sensor's beam (``--sub-rays``, ``--return-mode``, ``--epw``, ``--beam full``), resolved
    against each sensor's preset; None = each preset's."""
    sun: SunConfig | None = None
    """Sunlight on every sensor (``--sun-lux``, ``--sun-elevation``, ``--sun-azimuth``); None = night."""
    faults: tuple[Any, ...] = ()
    """Run-wide faults (``--faults``); one naming a ``sensor`` acts on that sensor alone. Each sensor's
    own ``faults`` file adds to them."""


def rig_fault_plans(rig: Rig, faults: tuple[Any, ...], seed: int) -> dict[str, Any]:
    """Each sensor's :class:`~rt_lidar.faults.plan.FaultPlan`: the run-wide ``faults`` that target it
    (or every sensor) and its own file's; a run-wide fault naming no sensor of the rig is an error."""
    from rt_lidar.errors import FieldError
    from rt_lidar.faults.plan import FaultPlan, faults_for_sensor

    for i, f in enumerate(faults):
        if f.sensor is not None and f.sensor not in rig.names:
            raise FieldError(
                "faults",
                f"fault[{i}].sensor",
                f"no sensor {f.sensor!r} in {rig.source}; sensors: {', '.join(rig.names)}",
            )
    plans: dict[str, Any] = {}
    for s in rig.sensors:
        mine = (*faults_for_sensor(tuple(faults), s.name), *s.faults)
        if mine:
            plans[s.name] = FaultPlan(mine, s.preset, seed, f"rig sensor {s.name}", key=s.name)
    return plans


def write_mount_calib(path: Path, mount: Pose) -> None:
    """``Tr_lidar_to_base_link:`` the sensor -> vehicle transform as a KITTI-style 3x4 row-major line."""
    values = " ".join(f"{v:.12e}" for v in mount.matrix()[:3].reshape(-1))
    path.write_text(f"Tr_lidar_to_base_link: {values}\n")


def drive_rig(
    loop: RigLoop,
    frames: int,
    out: Path,
    *,
    bag: RigBag | None = None,
    stream: RigStream | None = None,
    scenario: dict[str, Any] | None = None,
    progress: bool = False,
    write_scans: bool = True,
    faults: tuple[Any, ...] = (),
    seed: int = 0,
) -> dict[str, Any]:
    """Step ``loop`` until every sensor wrote ``frames`` scans; returns (and writes) the summary.

    With ``write_scans`` off no sensor writes ``OUT/<sensor>/scans``: only the bag, the stream and the
    rig file's own sinks (at least one of them must be there)."""
    if frames < 1:
        raise ValueError(f"--frames must be >= 1, got {frames}")
    own_sinks = any(s.entry.sinks for s in loop.rig.sensors)
    if not write_scans and bag is None and stream is None and not own_sinks:
        raise ConfigError("--no-scans: the rig has no other output (no rosbag, no stream, no sinks)")
    rig = loop.rig
    plans = rig_fault_plans(rig, faults, seed)
    for name, plan in plans.items():
        loop.units[name].pipeline.on_hits = plan.on_hits
    fans: dict[str, SinkFanout] = {}
    stream_stats: dict[str, int] | None = None
    try:
        if bag is not None:
            bag.open()
        if stream is not None:
            stream.open()
        for s in rig.sensors:
            scans_dir = out / s.name / "scans"
            (scans_dir if write_scans else out / s.name).mkdir(parents=True, exist_ok=True)
            write_mount_calib(out / s.name / "calib.txt", s.mount)
            sinks: list[ScanSink] = []
            if write_scans:
                sinks += [make_sink(f"pcd:{scans_dir}"), make_sink(f"kitti:{scans_dir}")]
            sinks += [make_sink(spec) for spec in s.entry.sinks]
            if bag is not None:
                sinks.append(bag.sink(s.name))
            if stream is not None:
                sinks.append(stream.sink(s.name))
            fan = SinkFanout(message_sinks_with_faults(plans.get(s.name), sinks))
            context = SinkContext(preset=s.preset, scenario={**(scenario or {}), "sensor": s.name})
            fan.open(dataclasses.replace(context, faults=plans.get(s.name)))
            fans[s.name] = fan
        counts: dict[str, list[int]] = {n: [] for n in rig.names}
        false_pts: dict[str, int] = dict.fromkeys(rig.names, 0)
        bar = tqdm(total=frames * len(rig.sensors), unit="scan", disable=not progress, desc="rig")
        loop.start()
        t_loop = time.perf_counter()
        held: dict[str, int] = dict.fromkeys(rig.names, 0)
        while min(len(counts[n]) + held[n] for n in rig.names) < frames:
            loop.fetch_until({n: frames - len(counts[n]) - held[n] for n in rig.names})
            for name, scans in loop.step().items():
                for got in scans[: frames - len(counts[name]) - held[name]]:
                    plan = plans.get(name)
                    scan = plan.on_scan(got) if plan is not None else got
                    if scan is None:  # the sensor is down (an injected reboot): the scan counts
                        held[name] += 1
                        bar.update(1)
                        continue
                    if bag is not None:  # the bag writes each frame in order, whichever thread is first
                        bag.expect(name, scan)
                    fans[name].write(scan)
                    counts[name].append(int(scan.points.size))
                    flags = scan.points["flags"]
                    false_pts[name] += int(np.count_nonzero(flags & int(PointFlag.CROSSTALK)))
                    bar.update(1)
            if bag is not None:
                bag.end_frame()
        wall_s = time.perf_counter() - t_loop
        bar.close()
    finally:
        for unit in loop.units.values():
            unit.pipeline.on_hits = None
        for fan in fans.values():
            fan.close()
        if bag is not None:
            bag.close()
        if stream is not None:
            if stream.publisher is not None:
                st = stream.publisher.stats
                stream_stats = {"sent": st.sent, "dropped": st.dropped, "unheard": st.unheard}
            stream.close()
    sensors = {
        s.name: {
            "preset": s.preset.name,
            "scans_written": fans[s.name].written,
            "points_per_scan_mean": float(np.mean(counts[s.name])) if counts[s.name] else 0.0,
            "crosstalk_points": false_pts[s.name],
            "mount": asdict(s.entry.mount),
            "beam": _beam_section(loop.units[s.name].pipeline),
            "device": device_summary(loop.units[s.name].pipeline.source, loop.units[s.name].pipeline.physics),
            **(
                {"scans_suppressed": held[s.name], "faults": plans[s.name].report()}
                if s.name in plans
                else {}
            ),
        }
        for s in rig.sensors
    }
    summary: dict[str, Any] = {
        "rig": rig.source,
        "sensors": sensors,
        "sim_frames": loop.frame,
        "sim_hz": loop.sim_hz,
        "sim_time_s": loop.sim_time_s,
        "wall_time_s": wall_s,
        "realtime_factor": loop.sim_time_s / wall_s if wall_s > 0 else float("inf"),
        "crosstalk": loop.crosstalk,
        "rosbag": None if bag is None else str(bag.path),
        "stream": None if stream is None else {"address": stream.requested_address, **(stream_stats or {})},
        "scenario": scenario or {},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


def run_rig_demo(opts: RigRunOptions, rig: Rig | None = None) -> dict[str, Any]:
    """``rt-lidar demo --rig``: the rig in the embedded world, in-process."""
    rig = rig or load_rig(opts.rig)
    # a device this machine lacks is refused here, before any file is written
    from rt_lidar.pipeline.device_world import kernels_device_for, world_on_device

    sun = opts.sun or SunConfig()
    physics = PhysicsConfig(
        weather=opts.weather,
        kernels_device=kernels_device_for(opts.device, opts.kernels_device),
        beam=opts.beam,
        sun_illuminance_lux=sun.lux,
        sun_direction=sun.direction,
    )
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rig.json").write_text(json.dumps({"options": asdict(opts), "rig": rig.to_plain()}, indent=2))
    world = build_world(opts.scene, seed=opts.seed, caster=opts.caster, setup=opts.scene_setup)
    world = world_on_device(world, opts.device)  # --device: cast by the BVH kernel (docs/gpu.md)
    loop = RigLoop(
        rig,
        world,
        sim_hz=opts.sim_hz,
        seed=opts.seed,
        prefetch=True,
        crosstalk=opts.crosstalk,
        physics=physics,
    )
    bag = RigBag(out / "rosbag", rig) if opts.rosbag else None
    stream = RigStream(opts.stream, rig) if opts.stream else None
    try:
        return drive_rig(
            loop,
            opts.frames,
            out,
            bag=bag,
            stream=stream,
            scenario={"demo": asdict(opts)},
            progress=opts.progress,
            write_scans=opts.write_scans,
            faults=opts.faults,
            seed=opts.seed,
        )
    finally:
        loop.close()


def _beam_section(pipeline: Pipeline) -> dict[str, Any]:
    """A sensor's summary ``beam`` section: the beam that ran (:func:`beam_summary`)."""
    return beam_summary(pipeline)
