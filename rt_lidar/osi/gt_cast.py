"""A ``SensorView`` with ground truth but no ``LidarSensorView`` (an environment simulator without a lidar
ray tracer, e.g. esmini's OSMP source): rt-lidar casts its own firing schedule into the ground truth's
objects and makes the reflections itself, which the model then reads as any view's.

The ground truth becomes an embedded world (:class:`~rt_lidar.unreal_bridge.world.World`) for the frame:
every moving object but the host, every stationary object and every traffic sign's main sign as its
bounding box (``base.dimension``, ``position``, ``orientation``), on a flat asphalt ground at the host's
wheels (OSI has no road surface geometry). Materials (rt-lidar's table at the preset's wavelength) come
from :data:`MOVING_MATERIALS`, :data:`STATIONARY_MATERIALS` (by ``classification.material``, else by
``type``) and ``sign_sheeting`` for signs. The sensor is at the host vehicle's pose composed with the
view's ``mounting_position``; every ray of the frame is cast from that pose (no motion within the frame);
Doppler shifts come from the objects' and the host's ``base.velocity``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.osi.frames import NO_ID, quat_from_rpy, timestamp_ns
from rt_lidar.osi.reflections import fill_lidar_view
from rt_lidar.physics.echo import EchoModel
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.sensor.beam import exit_m_per_rad, subray_pattern
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge.world import Pose, Scene, StaticTrajectory, World
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.pose import quat_rotate

__all__ = ["GROUND_HALF_SIZE_M", "MOVING_MATERIALS", "STATIONARY_MATERIALS", "GroundTruthCaster"]

GROUND_HALF_SIZE_M = 250.0
"""Half the side of the flat ground square around the host."""
MOVING_MATERIALS = {"TYPE_VEHICLE": "car_paint_white", "TYPE_PEDESTRIAN": "rubber", "TYPE_ANIMAL": "rubber"}
"""rt-lidar material of a moving object by ``MovingObject.type`` (others: ``car_paint_white``)."""
STATIONARY_MATERIALS = {
    "MATERIAL_WOOD": "bark",
    "MATERIAL_PLASTIC": "car_paint_white",
    "MATERIAL_CONCRETE": "concrete",
    "MATERIAL_METAL": "metal_pole",
    "MATERIAL_STONE": "rock",
    "MATERIAL_GLASS": "glass",
    "MATERIAL_GLAS": "glass",
    "MATERIAL_MUD": "grass_dry",
    "TYPE_BRIDGE": "concrete",
    "TYPE_BUILDING": "building_plaster",
    "TYPE_POLE": "metal_pole",
    "TYPE_PYLON": "metal_pole",
    "TYPE_DELINEATOR": "plate_sheeting",
    "TYPE_TREE": "vegetation",
    "TYPE_BARRIER": "concrete",
    "TYPE_VEGETATION": "vegetation",
    "TYPE_CURBSTONE": "concrete",
    "TYPE_WALL": "brick",
}
"""rt-lidar material of a stationary object by ``classification.material``, else by ``type`` (others:
``concrete``)."""
_DEFAULT_MOVING, _DEFAULT_STATIONARY = "car_paint_white", "concrete"


def _pose(base: Any) -> tuple[np.ndarray, np.ndarray]:
    p = np.array([base.position.x, base.position.y, base.position.z], np.float64)
    o = base.orientation
    return p, quat_from_rpy(o.roll, o.pitch, o.yaw)


def _velocity(base: Any) -> np.ndarray:
    v = base.velocity
    return np.array([v.x, v.y, v.z], np.float64)


class GroundTruthCaster:
    """Reflections of ``preset``'s firing schedule off a ``SensorView``'s ground truth."""

    def __init__(self, preset: SensorPreset, sub_rays: int = 1) -> None:
        self.preset = preset
        self.table = load_material_table()
        self.sub_rays = sub_rays
        self._materials: dict[tuple[str, ...], Any] = {}

    def _box(self, b: MeshBuilder, base: Any, material: str) -> bool:
        d = base.dimension
        size = (d.length, d.width, d.height)
        if min(size) <= 0 or not base.HasField("position"):
            return False
        o = base.orientation
        center = (base.position.x, base.position.y, base.position.z)
        b.box(center, size, material, yaw=o.yaw, pitch=o.pitch, roll=o.roll)
        return True

    def world(
        self, sensor_view: Any
    ) -> tuple[World, Pose, dict[int, int], dict[int, np.ndarray], np.ndarray]:
        """(world, sensor pose, segment -> OSI id, segment -> velocity, host velocity) of a view."""
        from osi3.osi_object_pb2 import MovingObject, StationaryObject

        gt = sensor_view.global_ground_truth
        host_id = (
            gt.host_vehicle_id.value if gt.HasField("host_vehicle_id") else sensor_view.host_vehicle_id.value
        )
        host = next((m for m in gt.moving_object if m.id.value == host_id), None)
        if host is None:
            raise ConfigError(
                f"SensorView: no LidarSensorView, and its ground truth has no host vehicle (id {host_id}) "
                "to place the sensor on"
            )
        h_pos, h_quat = _pose(host.base)
        rear = host.vehicle_attributes.bbcenter_to_rear
        origin = h_pos + quat_rotate(h_quat, np.array([rear.x, rear.y, rear.z]))
        mp = sensor_view.mounting_position
        mount = Pose(
            np.array([mp.position.x, mp.position.y, mp.position.z]),
            quat_from_rpy(mp.orientation.roll, mp.orientation.pitch, mp.orientation.yaw),
        )
        objects = []
        ids: dict[int, int] = {}
        velocity: dict[int, np.ndarray] = {}
        seg = 0
        entries: list[tuple[Any, str, int, np.ndarray]] = []
        for m in gt.moving_object:
            if m.id.value != host_id:
                kind = MovingObject.Type.Name(m.type)
                entries.append(
                    (m.base, MOVING_MATERIALS.get(kind, _DEFAULT_MOVING), m.id.value, _velocity(m.base))
                )
        for s in gt.stationary_object:
            c = s.classification
            mat = STATIONARY_MATERIALS.get(StationaryObject.Classification.Material.Name(c.material))
            mat = mat or STATIONARY_MATERIALS.get(
                StationaryObject.Classification.Type.Name(c.type), _DEFAULT_STATIONARY
            )
            entries.append((s.base, mat, s.id.value, np.zeros(3)))
        for t in gt.traffic_sign:
            entries.append((t.main_sign.base, "sign_sheeting", t.id.value, np.zeros(3)))
        for base, material, oid, vel in entries:
            b = MeshBuilder()
            if not self._box(b, base, material):
                continue
            seg += 1
            ids[seg] = int(oid)
            velocity[seg] = vel
            objects.append(b.build(f"osi_{oid}", seg, StaticTrajectory(Pose.identity())))
        ground_z = float(h_pos[2] - host.base.dimension.height / 2.0)
        g = MeshBuilder()
        r = GROUND_HALF_SIZE_M
        x, y = float(origin[0]), float(origin[1])
        g.quad(
            [
                (x - r, y - r, ground_z),
                (x + r, y - r, ground_z),
                (x + r, y + r, ground_z),
                (x - r, y + r, ground_z),
            ],
            "asphalt",
        )
        seg += 1
        objects.append(g.build("osi_ground", seg, StaticTrajectory(Pose.identity())))
        scene = Scene(objects=objects, ego=StaticTrajectory(Pose(origin, h_quat)), sensor_mount=mount)
        return World(scene), mount, ids, velocity, _velocity(host.base)

    def fill(self, view: Any, sensor_view: Any, t1_ns: int) -> int:
        """Fill the ``LidarSensorView`` ``view`` with our schedule's reflections in ``[timestamp, t1_ns)``
        off ``sensor_view``'s ground truth; returns the rays that reflected."""
        preset = self.preset
        t0 = timestamp_ns(sensor_view.timestamp)
        world, mount, ids, velocity, v_host = self.world(sensor_view)
        names = tuple(world.material_names)
        arrays = self._materials.get(names)
        if arrays is None:
            arrays = self._materials[names] = self.table.arrays(list(names), preset.optics.wavelength_nm)
        source = WorldSource(world, preset.range.max_m, arrays.transmission, exit_m_per_rad(preset), mount)
        source.keep_normals = True
        if self.sub_rays > 1:
            source.use_beam(subray_pattern(preset, self.sub_rays))
        firings = firings_between(preset, t0, max(t1_ns, t0 + 1))
        hits = source.hits(firings, t0, t1_ns)
        hits.interval = (t0, t1_ns)
        if hits.pose_start is not None:  # the frame is cast from one pose: the host's speed gives Doppler
            p0, q0 = hits.pose_start
            hits.pose_end = (np.asarray(p0) + v_host * (t1_ns - t0) * 1e-9, q0)
        top = max(ids, default=0)
        osi_ids = np.full(top + 1, NO_ID, np.uint64)
        for k, oid in ids.items():
            osi_ids[k] = oid
        echo = EchoModel(preset, arrays)
        mount_t = (*(float(v) for v in mount.position), *(float(v) for v in mount.rotation))
        seg_v = {k: v for k, v in velocity.items() if np.any(v)}
        return fill_lidar_view(view, hits, echo, t0, t1_ns, mount_t, 0, seg_v, osi_ids)
