"""The embedded world at one time as OSI ``GroundTruth``: the ego (host vehicle), the moving objects and
the static objects, with their poses, sizes and velocities, and the environmental conditions.

Ids: an object's id is its segmentation id (the id a lidar reflection's ``object_id`` carries, so a
reflection names its ground-truth object); an object whose segmentation id another object already
has gets :data:`SHARED_SEGMENT_ID_BASE` + its scene index instead (its reflections then name the first).
The host vehicle is :data:`HOST_VEHICLE_ID`. Positions are bounding-box centres in the world frame
(x, y, z in m, z up), orientations roll/pitch/yaw (rad), velocities m/s. The ego has no mesh in the
world: its box is a nominal car (:data:`EGO_DIMENSION_M`) standing on its reference point, which is
the vehicle origin rt-lidar mounts the sensor on (``bbcenter_to_rear`` says where it is).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rt_lidar.osi.frames import set_pose, set_timestamp, set_vector
from rt_lidar.osi.weather import weather_to_conditions
from rt_lidar.unreal_bridge.world import World
from rt_lidar.unreal_bridge.world.pose import quat_rotate

__all__ = [
    "EGO_DIMENSION_M",
    "HOST_VEHICLE_ID",
    "SHARED_SEGMENT_ID_BASE",
    "fill_ground_truth",
    "moving_segment_velocities",
    "object_ids",
]

HOST_VEHICLE_ID = 100_000
"""OSI id of the ego vehicle (segmentation ids are 0..255: no object has it)."""
SHARED_SEGMENT_ID_BASE = 200_000
"""Ids of objects whose segmentation id an earlier object has: this + the scene index."""
EGO_DIMENSION_M = (4.6, 1.9, 1.5)
"""Length, width, height of the ego's nominal bounding box (m)."""
_VELOCITY_DT_S = 1e-3

_STATIONARY_TYPES = (
    ("tree", "TYPE_TREE"),
    ("building", "TYPE_BUILDING"),
    ("house", "TYPE_BUILDING"),
    ("wall", "TYPE_WALL"),
    ("light", "TYPE_POLE"),
    ("pole", "TYPE_POLE"),
    ("sign", "TYPE_POLE"),
    ("kerb", "TYPE_CURBSTONE"),
    ("curb", "TYPE_CURBSTONE"),
    ("barrier", "TYPE_BARRIER"),
    ("rock", "TYPE_OTHER"),
)


def object_ids(world: World) -> list[int]:
    """OSI id of every scene object (in scene order)."""
    seen: set[int] = set()
    out = []
    for i, obj in enumerate(world.scene.objects):
        sid = int(obj.segment_id)
        if sid in seen:
            out.append(SHARED_SEGMENT_ID_BASE + i)
        else:
            seen.add(sid)
            out.append(sid)
    return out


def _velocity(traj: Any, t: float) -> np.ndarray:
    """Velocity at ``t`` from the positions 1 ms either side: the smaller of the two one-sided
    differences (a looping trajectory jumps back to its start on one side of its wrap)."""
    a, m, b = (np.asarray(traj.pose_at(x).position) for x in (t - _VELOCITY_DT_S, t, t + _VELOCITY_DT_S))
    back, ahead = (m - a) / _VELOCITY_DT_S, (b - m) / _VELOCITY_DT_S
    return back if np.linalg.norm(back) <= np.linalg.norm(ahead) else ahead


def moving_segment_velocities(world: World, t: float) -> dict[int, np.ndarray]:
    """World velocity (m/s) of each moving object at ``t``, by segmentation id."""
    return {
        int(o.segment_id): _velocity(o.trajectory, t)
        for o in world.scene.objects
        if o.triangle_count and not o.is_static
    }


def _box(vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = vertices.min(axis=0).astype(np.float64), vertices.max(axis=0).astype(np.float64)
    return (lo + hi) / 2.0, hi - lo


def _stationary_type(name: str) -> str:
    low = name.lower()
    for key, value in _STATIONARY_TYPES:
        if key in low:
            return value
    return "TYPE_OTHER"


def fill_ground_truth(
    gt: Any,
    world: World | None,
    t_ns: int,
    ego_pose: tuple[np.ndarray, np.ndarray],
    ego_velocity: np.ndarray,
    weather: dict[str, float] | None = None,
    sun_lux: float = 0.0,
    static: bool = True,
) -> None:
    """Fill a ``GroundTruth`` at sim time ``t_ns``: the ego at ``ego_pose`` (vehicle origin, quaternion)
    moving at ``ego_velocity``, the world's objects (none without a world), the weather."""
    from osi3.osi_object_pb2 import MovingObject, StationaryObject

    set_timestamp(gt.timestamp, t_ns)
    gt.host_vehicle_id.value = HOST_VEHICLE_ID
    t = t_ns * 1e-9
    pos, quat = np.asarray(ego_pose[0], np.float64), np.asarray(ego_pose[1], np.float64)
    length, width, height = EGO_DIMENSION_M
    ego = gt.moving_object.add()
    ego.id.value = HOST_VEHICLE_ID
    ego.type = MovingObject.TYPE_VEHICLE
    ego.vehicle_classification.type = MovingObject.VehicleClassification.TYPE_MEDIUM_CAR
    ego.vehicle_classification.role = MovingObject.VehicleClassification.ROLE_CIVIL
    ego.base.dimension.length, ego.base.dimension.width, ego.base.dimension.height = length, width, height
    centre = pos + quat_rotate(quat, np.array([0.0, 0.0, height / 2.0]))
    set_pose(ego.base.position, ego.base.orientation, centre, quat)
    set_vector(ego.base.velocity, ego_velocity)
    set_vector(ego.vehicle_attributes.bbcenter_to_rear, (0.0, 0.0, -height / 2.0))
    if world is not None:
        ids = object_ids(world)
        for oid, obj in zip(ids, world.scene.objects, strict=True):
            if not obj.triangle_count:
                continue
            local_c, dim = _box(obj.vertices)
            pose = obj.trajectory.pose_at(t)
            centre = np.asarray(pose.position) + quat_rotate(np.asarray(pose.rotation), local_c)
            if obj.is_static:
                if not static:
                    continue
                so = gt.stationary_object.add()
                so.id.value = oid
                so.classification.type = StationaryObject.Classification.Type.Value(
                    _stationary_type(obj.name)
                )
                base = so.base
            else:
                mo = gt.moving_object.add()
                mo.id.value = oid
                mo.type = MovingObject.TYPE_VEHICLE
                mo.vehicle_classification.type = MovingObject.VehicleClassification.TYPE_MEDIUM_CAR
                set_vector(mo.base.velocity, _velocity(obj.trajectory, t))
                set_vector(mo.vehicle_attributes.bbcenter_to_rear, (0.0, 0.0, -dim[2] / 2.0))
                mo.model_reference = obj.name
                base = mo.base
            base.dimension.length, base.dimension.width, base.dimension.height = (float(v) for v in dim)
            set_pose(base.position, base.orientation, centre, pose.rotation)
    weather_to_conditions(gt.environmental_conditions, weather, sun_lux)
