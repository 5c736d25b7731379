"""One run -> one SemanticKITTI / KITTI-odometry sequence, written whole or not at all.

``sequences/NN/``: ``velodyne/NNNNNN.bin`` (float32 x, y, z, reflectance in [0, 1]),
``labels/NNNNNN.label`` (uint32: semantic class low 16 bits, segmentation id high 16),
``image_2/NNNNNN.png`` (when the sweep asks for images), ``calib.txt`` (``P0:``..``P3:`` and ``Tr:``
velodyne -> camera 0), ``poses.txt`` (camera 0 in the first frame's camera 0, 12 numbers a line, as
SemanticKITTI), ``times.txt`` (scan start, s), ``run.json`` (the run, so it can be reproduced) and
``config.json`` (the run as the one run configuration, :func:`~rt_lidar.dataset.runs.run_config`:
``rt-lidar demo --config sequences/NN/config.json --out NEW`` re-runs it to the same scan bytes). A
rig's run writes such a sequence per sensor (:mod:`rt_lidar.dataset.rig_writer`).

The sequence is written into ``sequences/.NN.partial-<pid>-<random>`` and renamed to ``NN`` when
complete; a sequence folder therefore always holds a whole run. Output depends only on the run (its
sweep entries and seed): the same run gives the same bytes on any worker.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from rt_lidar.config import write_run_config
from rt_lidar.dataset.errors import DatasetError
from rt_lidar.dataset.labels import DEFAULT_RULES, LabelRule, class_lut, make_labels
from rt_lidar.dataset.runs import RunSpec, run_config, run_digest, run_to_dict
from rt_lidar.dataset.sweep_spec import CameraSettings, MountSpec, SceneSpec
from rt_lidar.faults.wiring import fault_plan, with_faults
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.pipeline.scan_loop import run_scans
from rt_lidar.sinks.base import ScanSink, SinkContext, make_sink
from rt_lidar.sinks.kitti import to_kitti_array
from rt_lidar.unreal_bridge.world import (
    CameraSpec,
    Pose,
    World,
)

__all__ = [
    "RunResult",
    "SequenceWriter",
    "build_run",
    "calibration",
    "calibration_of",
    "partial_dirs",
    "run_physics",
    "run_world",
    "sequence_state",
    "write_run",
]

RUN_FILE = "run.json"
PARTIAL = ".partial-"
# velodyne frame -> camera optical frame (z along the axis, x right = mount -y, y down = mount -z)
_MOUNT_TO_OPTICAL = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


@dataclass(frozen=True)
class RunResult:
    """What one run wrote (``skipped``: the sequence was already complete)."""

    run_id: str
    sequence: int
    frames: int
    """Scans written (a rig's run: of every sensor)."""
    points: int
    wall_s: float
    skipped: bool = False
    worker_pid: int = 0
    started_s: float = 0.0
    """When the worker began it (``time.time()``): with ``wall_s``, when it ran."""


def _pose(m: MountSpec) -> Pose:
    r, p, y = np.radians(m.rpy_deg)
    return Pose.from_xyz_rpy(*m.xyz, roll=float(r), pitch=float(p), yaw=float(y))


def _extra_rules(spec: SceneSpec) -> list[LabelRule]:
    """A mesh scene's one class for all of it."""
    return [] if spec.kind == "street" else [LabelRule(f"{spec.name}*", "*", spec.label)]


def _main_material(world: World, index: int) -> str:
    obj = world.scene.objects[index]
    if obj.face_material.size == 0:
        return ""
    return world.material_names[int(np.bincount(obj.face_material).argmax())]


def run_world(run: RunSpec) -> tuple[World, np.ndarray]:
    """The world of ``run`` (its scene, ego trajectory and sensor mount, built from its
    :func:`~rt_lidar.dataset.runs.run_config` as ``demo --config`` builds it) and its class table
    (:func:`~rt_lidar.dataset.labels.class_lut`)."""
    cfg = run_config(run)
    world = build_world(cfg.scene, seed=cfg.seed, setup=cfg.scene_setup)
    ids = world.segment_ids()
    objects = [(n, ids[n], _main_material(world, i)) for i, n in enumerate(world.objects)]
    try:
        lut = class_lut(objects, [*run.labels, *_extra_rules(run.scene), *DEFAULT_RULES])
    except ValueError as exc:
        raise DatasetError(f"run {run.run_id}: {exc}") from None
    return world, lut


def run_physics(run: RunSpec) -> PhysicsConfig:
    """The physics scenario of ``run`` (its weather; None when clear)."""
    return run_config(run).physics()


def build_run(run: RunSpec) -> tuple[Pipeline, World, np.ndarray]:
    """The pipeline of ``run``, its world and its class table (:func:`~rt_lidar.dataset.labels.class_lut`)."""
    cfg = run_config(run)
    world, lut = run_world(run)
    built = build_pipeline(cfg.preset, world, seed=cfg.seed, sim_hz=cfg.sim_hz, physics=cfg.physics())
    return built.pipeline, world, lut


def _camera_spec(c: CameraSettings) -> CameraSpec:
    return CameraSpec(c.width, c.height, c.fov_deg, _pose(c.mount))


def calibration(run: RunSpec) -> tuple[np.ndarray, np.ndarray]:
    """(P2 (3, 4), Tr (4, 4) velodyne -> camera 0) of the run's camera and lidar mounts."""
    return calibration_of(run.camera, _pose(run.sensor.mount))


def calibration_of(camera: CameraSettings, mount: Pose) -> tuple[np.ndarray, np.ndarray]:
    """(P2 (3, 4), Tr (4, 4) velodyne -> camera 0) of a camera and a lidar at ``mount`` (ego frame)."""
    cam = _camera_spec(camera)
    p2 = np.hstack([cam.intrinsics(), np.zeros((3, 1))])
    ego_opt = cam.mount.matrix()
    ego_opt[:3, :3] = ego_opt[:3, :3] @ _MOUNT_TO_OPTICAL
    return p2, np.linalg.inv(ego_opt) @ mount.matrix()


def _row(m: np.ndarray) -> str:
    return " ".join(f"{v:.12e}" for v in np.asarray(m, dtype=np.float64).reshape(-1)[:12])


def _sensor_matrix(scan: Scan) -> np.ndarray:
    return Pose(scan.sensor_position, scan.sensor_rotation).matrix()


def sequence_state(run: RunSpec, out: str | Path) -> str:
    """``complete`` (this run, whole), ``foreign`` (another run's sequence), ``partial`` (only an
    unfinished temporary folder) or ``missing``."""
    seq = Path(out) / "sequences" / run.sequence_name
    if seq.is_dir():
        try:
            digest = json.loads((seq / RUN_FILE).read_text()).get("digest")
        except (OSError, ValueError):
            return "foreign"
        return "complete" if digest == run_digest(run) else "foreign"
    return "partial" if partial_dirs(run, out) else "missing"


def partial_dirs(run: RunSpec, out: str | Path) -> list[Path]:
    """Temporary folders of unfinished attempts at ``run``."""
    root = Path(out) / "sequences"
    return sorted(root.glob(f".{run.sequence_name}{PARTIAL}*")) if root.is_dir() else []


def write_run(run: RunSpec, out: str | Path) -> RunResult:
    """Simulate ``run`` and write its sequence under ``out/sequences/``; returns what was written."""
    t_wall, started = time.perf_counter(), time.time()
    root = Path(out) / "sequences"
    final = root / run.sequence_name
    if sequence_state(run, out) == "complete":
        return RunResult(
            run.run_id, run.sequence, 0, 0, 0.0, skipped=True, worker_pid=os.getpid(), started_s=started
        )
    tmp = root / f".{run.sequence_name}{PARTIAL}{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir(parents=True)
    try:
        frames, points = _write_sequence(run, tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if sequence_state(run, out) != "complete":
                raise DatasetError(f"{final}: exists and holds another run; use a new --out") from None
            shutil.rmtree(tmp, ignore_errors=True)  # another attempt finished first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    wall = time.perf_counter() - t_wall
    pid = os.getpid()
    return RunResult(run.run_id, run.sequence, frames, points, wall, worker_pid=pid, started_s=started)


def _recording_sinks(sinks: tuple[str, ...], seq: Path) -> list[ScanSink]:
    """The run's extra recordings, each in ``seq/recordings/<kind>`` (inside the temporary sequence
    folder, so they appear complete with it or not at all)."""
    out = []
    for spec in sinks:
        kind, _, options = spec.partition(":")
        target = seq / "recordings" / kind
        out.append(make_sink(f"{kind}:{target}" + (f",{options}" if options else "")))
    return out


class SequenceWriter:
    """One sensor's KITTI-odometry sequence in ``seq``: a scan at a time (:meth:`write`), then the
    calibration, poses, times and ``run.json`` (:meth:`finish`). A rig run has one per sensor."""

    def __init__(
        self,
        seq: Path,
        world: World,
        lut: np.ndarray,
        intensity_max: float,
        camera_settings: CameraSettings,
        mount: Pose,
    ) -> None:
        self.seq, self.world, self.lut, self.intensity_max = seq, world, lut, intensity_max
        self.p2, self.tr = calibration_of(camera_settings, mount)
        self.camera = _camera_spec(camera_settings) if camera_settings.enabled else None
        (seq / "velodyne").mkdir(parents=True, exist_ok=True)
        (seq / "labels").mkdir()
        if self.camera is not None:
            (seq / "image_2").mkdir()
        self.tr_inv = np.linalg.inv(self.tr)
        self.poses: list[str] = []
        self.times: list[str] = []
        self.points = 0
        self._cam0_first: np.ndarray | None = None

    def write(self, scan: Scan) -> None:
        """Write one scan: its points, labels, image (when asked), pose and time."""
        seq = self.seq
        stem = f"{len(self.times):06d}"
        (seq / "velodyne" / f"{stem}.bin").write_bytes(
            to_kitti_array(scan.points, self.intensity_max).tobytes()
        )
        labels = make_labels(scan.points["segment"], self.lut).astype("<u4")
        (seq / "labels" / f"{stem}.label").write_bytes(labels.tobytes())
        if self.camera is not None:
            rgb = self.world.render_camera(self.camera, scan.start_ns * 1e-9).rgb
            Image.fromarray(rgb).save(seq / "image_2" / f"{stem}.png", format="PNG")
        cam0 = _sensor_matrix(scan) @ self.tr_inv  # camera 0 in the world
        if self._cam0_first is None:
            self._cam0_first = cam0
        self.poses.append(_row(np.linalg.inv(self._cam0_first) @ cam0))
        self.times.append(f"{scan.start_ns * 1e-9:.6e}")
        self.points += int(scan.points.size)

    def finish(self, meta: dict[str, object], calib_extra: tuple[str, ...] = ()) -> None:
        """Write ``calib.txt`` (with ``calib_extra`` lines after ``Tr``), ``poses.txt``, ``times.txt``
        and ``run.json`` (``meta``)."""
        seq = self.seq
        p_line = _row(self.p2)
        calib = [f"P{i}: {p_line}" for i in range(4)] + [f"Tr: {_row(self.tr)}", *calib_extra]
        (seq / "calib.txt").write_text("\n".join(calib) + "\n")
        (seq / "poses.txt").write_text("\n".join(self.poses) + "\n")
        (seq / "times.txt").write_text("\n".join(self.times) + "\n")
        (seq / RUN_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _write_sequence(run: RunSpec, seq: Path) -> tuple[int, int]:
    if run.sensor.rig:
        from rt_lidar.dataset.rig_writer import write_rig_sequence

        return write_rig_sequence(run, seq)
    pipeline, world, lut = build_run(run)
    cfg = run_config(run, f"out/{run.run_id}")  # a re-run's default: no path of this dataset
    write_run_config(seq, cfg.resolved(pipeline.physics.config), pipeline.preset)
    writer = SequenceWriter(
        seq, world, lut, float(pipeline.preset.output.intensity_max), run.camera, _pose(run.sensor.mount)
    )
    context = SinkContext(preset=pipeline.preset, scenario={"run_id": run.run_id, "digest": run_digest(run)})
    sinks = _recording_sinks(run.sinks, seq)
    plan = fault_plan(run.faults, pipeline.preset, run.seed) if run.faults else None
    post = None
    if plan is not None:
        sinks, context, post = with_faults(plan, pipeline, sinks, context, None)
    try:
        loop = run_scans(
            pipeline, run.frames, sinks, context, post=post, on_scan=writer.write, background=False
        )
    finally:
        pipeline.close()
    points = sum(loop.points)
    meta: dict[str, object] = {"digest": run_digest(run), "run": run_to_dict(run), "frames": run.frames}
    if plan is not None:
        meta["faults"] = plan.report()
    writer.finish({**meta, "points": points})
    return run.frames, points
