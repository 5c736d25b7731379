"""Running a rig: every sensor's scans into ``OUT/<sensor>/scans`` (PCD + KITTI; its mount in
``OUT/<sensor>/calib.txt``, ``Tr_lidar_to_base_link``, KITTI's 3x4 row-major form) and its own sinks, one
rosbag2 for the rig (``OUT/rosbag``), ``OUT/rig.json`` (the resolved rig) and ``OUT/summary.json``."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from rt_lidar.config import DEFAULT_CASTER, SceneSetup
from rt_lidar.errors import ConfigError
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.builder import build_world
from rt_lidar.points import PointFlag
from rt_lidar.rig.bag import RigBag
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.model import Rig, load_rig
from rt_lidar.rig.stream import RigStream
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
    stream: str | None = None
    """A ZeroMQ endpoint publishing every sensor's scans (header ``sensor``), e.g. tcp://127.0.0.1:5555."""
    write_scans: bool = True
    """Write ``OUT/<sensor>/scans`` (``--no-scans``: only the bag, the stream and the rig's sinks)."""
    scene_setup: SceneSetup | None = None
    """More of the scene than its name (a dataset run's, :class:`rt_lidar.config.SceneSetup`)."""


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
            fan = SinkFanout(sinks)
            fan.open(SinkContext(preset=s.preset, scenario={**(scenario or {}), "sensor": s.name}))
            fans[s.name] = fan
        counts: dict[str, list[int]] = {n: [] for n in rig.names}
        false_pts: dict[str, int] = dict.fromkeys(rig.names, 0)
        bar = tqdm(total=frames * len(rig.sensors), unit="scan", disable=not progress, desc="rig")
        loop.start()
        t_loop = time.perf_counter()
        while min(len(c) for c in counts.values()) < frames:
            for name, scans in loop.step().items():
                for scan in scans[: frames - len(counts[name])]:
                    fans[name].write(scan)
                    counts[name].append(int(scan.points.size))
                    flags = scan.points["flags"]
                    false_pts[name] += int(np.count_nonzero(flags & np.uint8(PointFlag.CROSSTALK)))
                    bar.update(1)
        wall_s = time.perf_counter() - t_loop
        bar.close()
    finally:
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
            "points_per_scan_mean": float(np.mean(counts[s.name])),
            "crosstalk_points": false_pts[s.name],
            "mount": asdict(s.entry.mount),
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
    physics = PhysicsConfig(weather=opts.weather, kernels_device=opts.kernels_device)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rig.json").write_text(json.dumps({"options": asdict(opts), "rig": rig.to_plain()}, indent=2))
    world = build_world(opts.scene, seed=opts.seed, caster=opts.caster, setup=opts.scene_setup)
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
        )
    finally:
        loop.close()
