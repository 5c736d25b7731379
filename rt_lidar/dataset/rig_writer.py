"""A dataset run of a rig: every sensor of the rig file in one frame loop, a sequence per sensor.

``sequences/NN/`` holds ``rig.json`` (the resolved rig), ``run.json`` (the run, as a one-sensor run's),
``config.json`` (the run configuration with its ``rig``: ``rt-lidar demo --config
sequences/NN/config.json --out NEW`` re-runs it, ``NEW/<sensor>/scans`` the same scans) and one folder
per sensor, ``sequences/NN/<sensor>/``, laid out as a one-sensor sequence
(:class:`~rt_lidar.dataset.writer.SequenceWriter`): ``velodyne/``, ``labels/``, ``image_2/`` (when the
sweep asks for images), ``calib.txt`` (``Tr``: that sensor -> camera 0; ``Tr_lidar_to_base_link``:
its mount, as ``demo --rig`` writes it), ``poses.txt``,
``times.txt``, ``run.json`` and the sweep's recordings in ``recordings/<kind>``. The rig file's own
sinks (network outputs) are not run: a dataset holds files only.

The frame loop is :class:`~rt_lidar.rig.loop.RigLoop` in the run's world without interference, so each
sensor's scans are byte for byte those of ``rt-lidar demo --rig`` with the same scene, seed and rate.
"""

from __future__ import annotations

import json
from pathlib import Path

from rt_lidar.config import CONFIG_FILE
from rt_lidar.dataset.runs import RunSpec, run_config, run_digest, run_to_dict
from rt_lidar.dataset.writer import SequenceWriter, _recording_sinks, run_physics, run_world
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.model import load_rig
from rt_lidar.rig.run import rig_fault_plans
from rt_lidar.schema import to_plain
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.fanout import SinkFanout

__all__ = ["write_rig_sequence"]


def write_rig_sequence(run: RunSpec, seq: Path) -> tuple[int, int]:
    """Simulate the rig of ``run`` and write one sequence per sensor under ``seq``; returns (scans of
    every sensor: ``frames`` x sensors, points of every sensor)."""
    rig = load_rig(run.sensor.rig)
    world, lut = run_world(run)
    (seq / "rig.json").write_text(json.dumps({"rig": rig.to_plain()}, indent=2, sort_keys=True) + "\n")
    config = {"config": to_plain(run_config(run, f"out/{run.run_id}")), "rig": rig.source}
    (seq / CONFIG_FILE).write_text(json.dumps(config, indent=2))
    digest = run_digest(run)
    writers: dict[str, SequenceWriter] = {}
    fans: dict[str, SinkFanout] = {}
    loop = RigLoop(rig, world, sim_hz=run.sim_hz, seed=run.seed, physics=run_physics(run))
    plans = rig_fault_plans(rig, run.faults, run.seed)
    for name, plan in plans.items():
        loop.units[name].pipeline.on_hits = plan.on_hits
    try:
        for s in rig.sensors:
            sdir = seq / s.name
            writers[s.name] = SequenceWriter(
                sdir, world, lut, float(s.preset.output.intensity_max), run.camera, s.mount
            )
            fan = SinkFanout(_recording_sinks(run.sinks, sdir))
            scenario = {"run_id": run.run_id, "digest": digest, "sensor": s.name}
            fan.open(SinkContext(preset=s.preset, scenario=scenario, faults=plans.get(s.name)))
            fans[s.name] = fan
        counts = dict.fromkeys(rig.names, 0)
        while min(counts.values()) < run.frames:
            for name, scans in loop.step().items():
                for got in scans[: run.frames - counts[name]]:
                    counts[name] += 1  # a scan a reboot holds back counts too
                    scan = plans[name].on_scan(got) if name in plans else got
                    if scan is not None:
                        writers[name].write(scan)
                        fans[name].write(scan)
    finally:
        loop.close()
        for fan in fans.values():
            fan.close()
    meta: dict[str, object] = {"digest": digest, "run": run_to_dict(run), "frames": run.frames}
    if plans:
        meta["faults"] = {name: plan.report() for name, plan in plans.items()}
    for s in rig.sensors:
        w = writers[s.name]
        mount = " ".join(f"{v:.12e}" for v in s.mount.matrix()[:3].reshape(-1))
        w.finish({**meta, "sensor": s.name, "points": w.points}, (f"Tr_lidar_to_base_link: {mount}",))
    points = sum(w.points for w in writers.values())
    (seq / "run.json").write_text(
        json.dumps({**meta, "points": points, "sensors": rig.names}, indent=2, sort_keys=True) + "\n"
    )
    return run.frames * len(rig.sensors), points
