"""``rt-lidar serve --flavor cosys``: the embedded world answering as Cosys-AirSim's lidars do.

``getLidarData`` answers Cosys-AirSim's CPU lidar (the last whole rotation, organised, misses as zeros,
the hit actors' names in ``groundtruth``) and ``getGPULidarData`` its GPU lidar (five floats a cell:
x, y, z, the segmentation colour, an intensity), on the grid the preset's settings.json block asks a
Cosys lidar for (:class:`~rt_lidar.bridge.cosys.CosysGrid`); the wire layout is described in
:mod:`rt_lidar.bridge.cosys`. Each rotation is cast once, every column from the sensor pose at its own
time. The GPU lidar's intensity is emulated as Cosys computes it: the material's reflectivity at the
preset's wavelength times the cosine of incidence, and a return under Cosys's threshold
(``range_max / rangeMaxLambertianPercentage / 100 * range``) reads as a miss.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.bridge.cosys import OUT_OF_RANGE, CosysGrid, packed_colours
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimServer, FluPose
from rt_lidar.unreal_bridge.rpc import Raw
from rt_lidar.unreal_bridge.wire import flu_to_ned_points_msgpack, pose_flu_to_ned
from rt_lidar.unreal_bridge.world.pose import quat_rotate

__all__ = ["COSYS_LAMBERTIAN_PERCENT", "CosysLidars", "serve_cosys"]

COSYS_LAMBERTIAN_PERCENT = 80.0
"""Cosys-AirSim's ``rangeMaxLambertianPercentage`` default in its docs' example."""


@dataclass
class _Rotation:
    """One cast rotation: every cell's point (sensor frame), hit object, colour, intensity."""

    index: int
    points: np.ndarray  # (cells, 3) float32, zeros for a miss
    labels: list[str]
    rgb: np.ndarray  # (cells,) float32
    intensity: np.ndarray  # (cells,) float32
    kept: np.ndarray  # (cells,) bool: above the GPU lidar's threshold
    pose: FluPose
    t_end_ns: int


class CosysLidars:
    """The CPU and GPU answers of the embedded sim's (default) lidar in Cosys-AirSim's form."""

    def __init__(self, sim: EmbeddedSim, lambertian_percent: float = COSYS_LAMBERTIAN_PERCENT) -> None:
        self.sim = sim
        self.grid = CosysGrid.of_preset(sim.preset)
        table = load_material_table()
        # Cosys's reflectivity is the material's whole (hemispherical) reflectance, not the diffuse lobe
        # of our echo model: a rough road's lobe is only the incidence-dependent part of Hapke's fit.
        arrays = table.arrays(sim.world.material_names, sim.preset.optics.wavelength_nm)
        self._reflectivity = arrays.hemispherical()
        self._threshold_per_m = self.grid.range_m / lambertian_percent / 100.0
        self._colours = packed_colours(256).astype(np.float32)
        self._cache: dict[bool, _Rotation] = {}
        self._lock = threading.Lock()

    def _rotation_now(self) -> int:
        """The last whole rotation before now (-1: none yet)."""
        period = 1e9 / self.grid.rotation_hz
        return int(self.sim.now_ns() // period) - 1

    def rotation(self, gpu: bool) -> _Rotation | None:
        """The last whole rotation, cast once (None before the first has ended)."""
        k = self._rotation_now()
        if k < 0:
            return None
        with self._lock:
            got = self._cache.get(gpu)
            if got is None or got.index != k:
                got = self._cache[gpu] = self._cast(k, gpu)
            return got

    def _cast(self, k: int, gpu: bool) -> _Rotation:
        sim, grid = self.sim, self.grid
        period = 1e9 / grid.rotation_hz
        world = sim.frozen_world()
        mount = sim.source.mount
        t0 = k * period
        col_t = (t0 + np.arange(grid.measurements) / grid.measurements * period) * 1e-9
        pos, quat = world.sensor_poses(col_t, mount)
        d_sensor = grid.directions(gpu)
        rows = np.repeat(np.arange(grid.measurements), grid.channels)
        d_world = quat_rotate(quat[rows], d_sensor)
        hits = world.cast(pos[rows], d_world, col_t[rows], max_range=grid.range_m)
        hit = np.isfinite(hits.distance)
        dist = np.where(hit, hits.distance, 0.0)
        points = (d_sensor * dist[:, None]).astype(np.float32)
        names = world.objects
        actor = [sim.actor_names[n] for n in names]
        labels = [actor[i] if i >= 0 else OUT_OF_RANGE for i in hits.object_index.tolist()]
        cos = np.abs(np.einsum("ij,ij->i", hits.normal.astype(np.float64), d_world))
        refl = self._reflectivity[np.maximum(hits.material, 0)]
        intensity = np.where(hit, refl * cos, 0.0).astype(np.float32)
        kept = hit & (intensity >= self._threshold_per_m * dist)
        rgb = self._colours[np.minimum(hits.segment, 255)]
        t_end = round((k + 1) * period)
        end_pos, end_quat = world.sensor_poses(np.array([t_end * 1e-9]), mount)
        pose = FluPose(
            tuple(float(v) for v in end_pos[0]),  # type: ignore[arg-type]
            tuple(float(v) for v in end_quat[0]),  # type: ignore[arg-type]
        )
        return _Rotation(k, points, labels, rgb, intensity, kept, pose, t_end)

    def cpu_answer(self, lidar_name: Any, vehicle_name: Any) -> dict[str, Any]:
        """``getLidarData`` in Cosys-AirSim's form."""
        self.sim.check_lidar(str(lidar_name), str(vehicle_name))
        rot = self.rotation(gpu=False)
        if rot is None:
            return _answer(0, np.zeros(1, np.float32), self._pose_now(), [])
        cloud = Raw(flu_to_ned_points_msgpack(rot.points))
        return _answer(rot.t_end_ns, cloud, rot.pose, rot.labels)

    def gpu_answer(self, lidar_name: Any, vehicle_name: Any) -> dict[str, Any]:
        """``getGPULidarData`` in Cosys-AirSim's form."""
        self.sim.check_lidar(str(lidar_name), str(vehicle_name))
        rot = self.rotation(gpu=True)
        if rot is None:
            return _answer(0, np.zeros(1, np.float32), self._pose_now(), None)
        rows = np.zeros((len(rot.points), 5), np.float32)
        rows[:, :3] = rot.points
        rows[:, 3] = rot.rgb
        rows[:, 4] = rot.intensity
        rows[~rot.kept] = 0.0
        return _answer(rot.t_end_ns, rows.ravel(), rot.pose, None)

    def _pose_now(self) -> FluPose:
        return self.sim.vehicle_pose("")

    def instance_names(self) -> list[str]:
        """``simListInstanceSegmentationObjects``: the actor names (Cosys lists its meshes by name)."""
        return list(self.sim.actor_names.values())


def _answer(t_ns: int, cloud: Any, pose: FluPose, labels: list[str] | None) -> dict[str, Any]:
    """The map in Cosys-AirSim's field order (``MSGPACK_DEFINE_MAP``): the GPU answer has no labels."""
    out: dict[str, Any] = {"time_stamp": int(t_ns), "point_cloud": cloud}
    if labels is not None:
        out["groundtruth"] = labels
    out["pose"] = pose_flu_to_ned(pose).to_msgpack()
    return out


def serve_cosys(server: AirSimServer, sim: EmbeddedSim) -> CosysLidars:
    """Bind Cosys-AirSim's lidar calls on ``server`` (``getLidarData`` replaced)."""
    lidars = CosysLidars(sim)
    server.rpc.register("getLidarData", lidars.cpu_answer, 2)
    server.rpc.register("getGPULidarData", lidars.gpu_answer, 2)
    server.rpc.register("simListInstanceSegmentationObjects", lidars.instance_names, 0)
    return lidars
