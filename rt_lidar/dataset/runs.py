"""Expanding a sweep into runs: every scene x trajectory x sensor x weather x seed, with stable ids.

A run's id is made of its parts' names (``street.1_scene_vlp-16_rain20_s0``), so it does not depend on
the order of the sweep file; its ``sequence`` number (the ``sequences/NN`` folder) is its place in the
expansion order. The :func:`run_digest` of a run's whole description tells a finished sequence of
this run from one of another sweep.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rt_lidar.config import EgoConfig, MountConfig, RunConfig, SceneSetup
from rt_lidar.dataset.errors import SweepError
from rt_lidar.dataset.labels import LabelRule
from rt_lidar.dataset.sweep_spec import CameraSettings, SceneSpec, SensorSpec, SweepSpec, TrajectorySpec
from rt_lidar.physics.weather import WeatherConfig

__all__ = [
    "RunSpec",
    "expand_runs",
    "run_config",
    "run_digest",
    "run_to_dict",
    "sequence_name",
    "weather_label",
]


@dataclass(frozen=True)
class RunSpec:
    """Everything one Ray task needs to write one sequence."""

    run_id: str
    sequence: int
    scene: SceneSpec
    trajectory: TrajectorySpec
    sensor: SensorSpec
    weather: WeatherConfig
    seed: int
    frames: int
    sim_hz: float
    camera: CameraSettings
    labels: tuple[LabelRule, ...] = ()
    sinks: tuple[str, ...] = ()
    faults: tuple[Any, ...] = ()
    """Injected faults (:mod:`rt_lidar.faults`); none leaves the run's digest as it was."""

    @property
    def sequence_name(self) -> str:
        """The ``sequences/`` folder name: two digits or more."""
        return sequence_name(self.sequence)


MAX_RUNS = 100_000
"""Most runs one sweep may expand to (a 100x100x100x100 grid would be 1e8)."""


def sequence_name(index: int) -> str:
    """``00``, ``01``, ..., ``99``, ``100``, ..."""
    return f"{index:02d}"


def _g(v: float) -> str:
    return f"{v:g}".replace(".", "p").replace("-", "m")


def weather_label(w: WeatherConfig) -> str:
    """``clear``, or the non-zero parts: ``rain20``, ``fog150``, ``snow2p5``, ``wet0p5``, joined by ``-``."""
    parts = []
    if w.rain_mm_h:
        parts.append(f"rain{_g(w.rain_mm_h)}")
    if w.fog_visibility_m is not None:
        parts.append(f"fog{_g(w.fog_visibility_m)}")
    if w.snow_mm_h:
        parts.append(f"snow{_g(w.snow_mm_h)}")
    if w.road_wetness:
        parts.append(f"wet{_g(w.road_wetness)}")
    return "-".join(parts) or "clear"


def expand_runs(spec: SweepSpec) -> list[RunSpec]:
    """All runs of ``spec`` in a fixed order (scenes, then trajectories, sensors, weathers, seeds)."""
    axes = (spec.scenes, spec.trajectories, spec.sensors, spec.weathers, spec.seeds)
    total = math.prod(len(a) for a in axes)
    if total > MAX_RUNS:
        sizes = " x ".join(str(len(a)) for a in axes)
        raise SweepError(
            spec.source, "(all axes)", f"{sizes} = {total} runs; at most {MAX_RUNS} runs a sweep (split it)"
        )
    runs: list[RunSpec] = []
    combos = itertools.product(spec.scenes, spec.trajectories, spec.sensors, spec.weathers, spec.seeds)
    for i, (scene, traj, sensor, weather, seed) in enumerate(combos):
        rid = f"{scene.name}_{traj.name}_{sensor.name}_{weather_label(weather)}_s{seed}"
        runs.append(
            RunSpec(
                rid,
                i,
                scene,
                traj,
                sensor,
                weather,
                seed,
                spec.frames,
                spec.sim_hz,
                spec.camera,
                spec.labels,
                spec.sinks,
                spec.faults,
            )
        )
    counts = Counter(r.run_id for r in runs)
    dup = sorted(rid for rid, n in counts.items() if n > 1)
    if dup:
        raise SweepError(spec.source, "(run ids)", f"runs with the same id: {', '.join(dup[:5])}")
    return runs


def run_to_dict(run: RunSpec) -> dict[str, Any]:
    """The run as plain JSON-able data (tuples as lists). A preset sensor's ``rig`` (empty) is left out,
    so its runs keep their digests; a rig's carries the SHA-256 of the rig file (a changed rig file is
    another run)."""
    d: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(run)))
    if not d["faults"]:  # runs without faults keep the digests they had before faults existed
        del d["faults"]
    sensor = d["sensor"]
    if not sensor["rig"]:
        del sensor["rig"]
    else:
        sensor["rig_sha256"] = hashlib.sha256(Path(sensor["rig"]).read_bytes()).hexdigest()
    return d


def run_digest(run: RunSpec) -> str:
    """SHA-256 (hex, 16 chars) of the run's canonical JSON: equal digests mean equal output."""
    text = json.dumps(run_to_dict(run), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_config(run: RunSpec, out: str | Path = "") -> RunConfig:
    """The run as the one typed run configuration: an in-process ``demo`` of the run's preset in its
    scene (:class:`~rt_lidar.config.SceneSetup`: the scene's seed, street length and ego speed or the
    mesh, the trajectory, the sensor's mount), seed, rate, frames and weather; ``out`` is where a re-run
    writes unless told (the writer records ``out/<run id>``: no path of the dataset).
    The writer builds the run from it, and its ``config.json`` re-runs it
    (``rt-lidar demo --config sequences/NN/config.json --out NEW``: the same scans). The sweep's
    recordings are not in it (their targets are inside the sequence; ``run.json`` lists them). A rig's
    run names the rig file (``rig``; no ``preset``, the mounts are the rig's)."""
    t = run.trajectory
    ego = None
    if t.kind != "scene":
        ego = EgoConfig(t.kind, t.start, t.yaw_deg, t.speed_mps, t.yaw_rate_deg_s, t.times, t.positions)
    rig = run.sensor.rig or None
    mount = None if rig else MountConfig(run.sensor.mount.xyz, run.sensor.mount.rpy_deg)
    s = run.scene
    if s.kind == "street":
        scene = "street"
        setup = SceneSetup(seed=s.seed, length_m=s.length_m, ego_speed=s.ego_speed, ego=ego, mount=mount)
    else:
        scene = s.path
        setup = SceneSetup(mesh_name=s.name, material=s.material, y_up=s.y_up, ego=ego, mount=mount)
    return RunConfig(
        command="demo",
        preset=run.sensor.preset,
        rig=rig,
        scene=scene,
        scene_setup=setup,
        seed=run.seed,
        sim_hz=run.sim_hz,
        frames=run.frames,
        out=str(out),
        progress=False,
        in_process=True,
        weather=None if run.weather.is_clear else run.weather,
        faults=run.faults,
    )
