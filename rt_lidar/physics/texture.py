"""Surface texture on the echoes: each hit's power scaled by its material's reflectance factor at the hit's
world position (:func:`rt_lidar.kernels.texture.texture_factor`), so a road reads from spot to spot as real
asphalt does, and the same spot reads the same from every ray and scan.

The hit's world position comes from the sensor pose at the start of the hits' slice (:attr:`Hits.pose_start`,
in float32 as the AirSim wire carries it, so that a bridged run and an in-process one place every hit in
the same cell: within a slice of 50 ms a moving sensor's texture is off by its travel, up to ~0.5 m at
10 m/s), else the sensor frame (a source that reports no pose: the texture then moves with the sensor,
still deterministic). Each material's texture has its own seed (CRC-32 of its
name), so two materials never share a pattern.
"""

from __future__ import annotations

import zlib

import numpy as np

from rt_lidar.kernels.texture import texture_factor
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.materials import MaterialArrays
from rt_lidar.unreal_bridge.world.pose import quat_rotate

__all__ = ["hit_world_points", "material_seeds", "texture_apply", "textured_rays"]


def material_seeds(materials: MaterialArrays) -> np.ndarray:
    """Per material, the seed of its texture (CRC-32 of the name)."""
    return np.array([zlib.crc32(n.encode()) for n in materials.names], np.uint64)


def textured_rays(materials: MaterialArrays, material: np.ndarray) -> np.ndarray:
    """Indices of the rays whose material (>= 0) has a texture."""
    sig = materials.texture_sigma
    if sig is None:
        return np.zeros(0, np.int64)
    return np.flatnonzero((material >= 0) & (np.take(sig, np.maximum(material, 0)) > 0))


def hit_world_points(hits: Hits, rays: np.ndarray) -> np.ndarray:
    """World-frame hit points (float64) of ``rays`` (indices into the hits' rays)."""
    local = hits.direction[rays].astype(np.float64) * hits.range_m[rays, None].astype(np.float64)
    if hits.pose_start is not None:
        p0, q0 = (np.asarray(v, np.float32).astype(np.float64) for v in hits.pose_start)
        return p0 + quat_rotate(q0 / np.linalg.norm(q0), local)
    return local


def texture_apply(materials: MaterialArrays, hits: Hits, power: np.ndarray, refl: np.ndarray) -> None:
    """Scale ``power`` and ``refl`` (the rays' echoes, in place) by the texture at each hit. The pipeline
    runs it on its backend (:meth:`rt_lidar.backend.PhysicsBackend.texture_apply`: this, or its compiled
    twin)."""
    rays = textured_rays(materials, hits.material)
    if rays.size == 0 or materials.texture_sigma is None or materials.texture_cell_m is None:
        return
    ok = np.isfinite(hits.range_m[rays])
    rays = rays[ok]
    mat = hits.material[rays].astype(np.int64)
    f = texture_factor(
        hit_world_points(hits, rays),
        material_seeds(materials)[mat],
        materials.texture_cell_m[mat].astype(np.float64),
        materials.texture_sigma[mat],
    )
    power[rays] *= f
    refl[rays] *= f
