"""CARLA-shaped semantic lidar measurements cast in the embedded world (no CARLA server runs here).

:func:`semantic_lidar_tick` sweeps a :class:`~rt_lidar.bridge.carla.CarlaLidarSetup` over one tick as
CARLA's ``RayCastSemanticLidar`` does (``points_per_second * dt / channels`` points a channel, each
channel's points at ``current + i * step`` degrees, clockwise, all from the sensor's pose at the tick,
only the rays that hit kept) and writes the measurement's ``raw_data`` in CARLA's layout and axes
(Unreal's left-handed x forward, y right, z up), with the per-channel counts. The tests and the
comparison of docs/simulators.md read these buffers with :func:`~rt_lidar.bridge.carla.decode_semantic_lidar`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rt_lidar.bridge.carla import SEMANTIC_DETECTION, CarlaLidarSetup
from rt_lidar.unreal_bridge.world import Pose, World
from rt_lidar.unreal_bridge.world.pose import quat_rotate

__all__ = ["MATERIAL_TAGS", "CarlaTick", "semantic_lidar_tick"]

MATERIAL_TAGS: dict[str, int] = {
    "asphalt": 1,  # Roads
    "lane_paint": 24,  # RoadLine
    "concrete": 2,  # SideWalks
    "brick": 3,  # Building
    "building_plaster": 3,
    "glass": 3,
    "car_paint_red": 14,  # Car
    "car_paint_white": 14,
    "car_paint_black": 14,
    "car_paint_silver": 14,
    "chrome": 14,
    "plate_sheeting": 14,
    "rubber": 14,
    "sign_sheeting": 8,  # TrafficSign
    "metal_pole": 6,  # Pole
    "vegetation": 9,  # Vegetation
    "bark": 9,
    "grass": 10,  # Terrain
    "rock": 20,  # Static
    "car_glass": 14,  # a car's windows and cabin are Car too
    "car_glass_ir": 14,
    "car_glass_privacy": 14,
    "interior": 14,
    "car_interior": 14,
}
"""The CARLA 0.9.14 tag a surface of each embedded material would carry (CARLA tags classes, not
materials: brick and plaster are both Building, every car part is Car)."""


@dataclass
class CarlaTick:
    """One measurement as a CARLA client receives it."""

    raw_data: bytes
    channel_counts: list[int]
    horizontal_angle_deg: float
    """Where the sweep stands after the tick (CARLA's ``horizontal_angle``, here in degrees)."""


def semantic_lidar_tick(
    world: World,
    setup: CarlaLidarSetup,
    t_s: float,
    dt_s: float,
    start_deg: float,
    mount: Pose | None = None,
    tags: dict[str, int] | None = None,
) -> CarlaTick:
    """The measurement of the tick ending at ``t_s`` (length ``dt_s``), the sweep starting at
    ``start_deg`` (clockwise from forward, as CARLA's horizontal angle)."""
    tags = MATERIAL_TAGS if tags is None else tags
    per_channel = round(setup.points_per_second * dt_s / setup.channels)
    sweep = setup.rotation_frequency * 360.0 * dt_s
    step = sweep / max(per_channel, 1)
    heading = np.mod(start_deg + step * np.arange(per_channel), setup.horizontal_fov)
    el = np.radians(setup.elevations())
    h = np.radians(heading)
    ce = np.cos(el)[:, None]
    # channel-major, as raw_data holds them; the project frame (y left) for the cast
    d = np.stack(
        [
            (ce * np.cos(h)[None, :]).ravel(),
            (ce * -np.sin(h)[None, :]).ravel(),
            np.repeat(np.sin(el), per_channel),
        ],
        axis=1,
    )
    pos, quat = world.sensor_poses(np.array([t_s]), mount)
    d_world = quat_rotate(quat[0], d)
    hits = world.cast(np.broadcast_to(pos[0], d.shape), d_world, t_s, max_range=setup.range_m)
    hit = np.isfinite(hits.distance)
    channel = np.repeat(np.arange(setup.channels), per_channel)
    names = world.material_names
    tag_of = np.array([tags.get(m, 0) for m in names], np.uint32)
    out = np.zeros(int(hit.sum()), SEMANTIC_DETECTION)
    p = d[hit] * hits.distance[hit][:, None]
    out["x"], out["y"], out["z"] = p[:, 0], -p[:, 1], p[:, 2]  # Unreal's left-handed axes
    out["cos_inc_angle"] = -np.einsum("ij,ij->i", hits.normal[hit].astype(np.float64), d_world[hit])
    out["object_idx"] = hits.object_index[hit].astype(np.uint32)
    out["object_tag"] = tag_of[np.maximum(hits.material[hit], 0)]
    counts = np.bincount(channel[hit], minlength=setup.channels).tolist()
    return CarlaTick(out.tobytes(), counts, float(np.mod(start_deg + sweep, setup.horizontal_fov)))
