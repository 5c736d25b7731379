"""Surface texture on the echoes: each hit's power scaled by its material's reflectance factor at the hit's
world position (:func:`rt_lidar.kernels.texture.texture_factor`), so a road reads from spot to spot as real
asphalt does, and the same spot reads the same from every ray and scan.

The hit's world position comes from the sensor pose at the start of the hits' slice (:attr:`Hits.pose_start`,
in float32 as the AirSim wire carries it, so that a bridged run and an in-process one place every hit in
the same cell: within a slice of 50 ms a moving sensor's texture is off by its travel, up to ~0.5 m at
10 m/s), else the sensor frame (a source that reports no pose: the texture then moves with the sensor,
still deterministic). Each material's texture has its own seed (CRC-32 of its
name), so two materials never share a pattern.

A pulse's footprint on the surface (:func:`footprint_area_m2`: the preset's exit diameter plus its
divergences times the range, across and along, over the incidence cosine on the oblique surface, shared
among a bundle's sub-rays) averages the aggregate's cells under it, so the texture's shot-to-shot spread
shrinks with its area, and its length along the incidence plane (:func:`footprint_along_m`: metres on the
far road at grazing incidence) averages the patches (:mod:`rt_lidar.kernels.texture`).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from rt_lidar.kernels.texture import texture_factor
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.materials import MaterialArrays
from rt_lidar.unreal_bridge.world.pose import quat_rotate

__all__ = [
    "GRAZING_COS_MIN",
    "footprint_along_m",
    "footprint_area_m2",
    "footprint_beam",
    "hit_world_points",
    "material_seeds",
    "texture_apply",
    "textured_rays",
]

GRAZING_COS_MIN = 0.02
"""Smallest incidence cosine a footprint's elongation uses (1/0.02: 50 times its width, ~1 deg grazing)."""


def footprint_beam(preset: Any) -> tuple[float, float, float]:
    """(exit diameter m, horizontal divergence rad, vertical divergence rad) of ``preset``'s beam: its
    1/e^2 footprint at range R is ``d0 + theta R`` across each axis (:class:`~rt_lidar.sensor.presets.
    OpticsSpec`)."""
    o = preset.optics
    return (
        float(o.beam_exit_diameter_m),
        1e-3 * float(o.beam_divergence_h_mrad),
        1e-3 * float(o.beam_divergence_v_mrad),
    )


def footprint_area_m2(
    xp: Any, beam: tuple[float, float, float], range_m: Any, cos_inc: Any, subrays: int
) -> Any:
    """Per ray (float64), the area its pulse lights on the surface: ``pi / 4 (d0 + theta_h R) (d0 +
    theta_v R) / max(cos, GRAZING_COS_MIN) / subrays`` (a Gaussian beam's equivalent area, ``(int W)^2 /
    int W^2``, is that of its 1/e^2 diameter; an oblique surface stretches it by 1 / cos; a bundle's
    sub-rays share it)."""
    d0, th, tv = beam
    r = range_m.astype(xp.float64)
    wide = d0 + th * r
    tall = d0 + tv * r
    cos = xp.maximum(cos_inc.astype(xp.float64), GRAZING_COS_MIN)
    return (0.7853981633974483 * wide * tall) / cos / float(subrays)


def footprint_along_m(
    xp: Any, beam: tuple[float, float, float], range_m: Any, cos_inc: Any, subrays: int
) -> Any:
    """Per ray (float64), the length of its footprint along the incidence plane: ``sqrt(pi / 4) (d0 +
    theta_v R) / max(cos, GRAZING_COS_MIN) / sqrt(subrays)`` (the side of a rectangle of the footprint's
    equivalent area and aspect; on the road ahead the vertical divergence is the one the grazing
    incidence stretches). The patches average over it (:func:`rt_lidar.kernels.texture.texture_factor`)."""
    d0, _th, tv = beam
    tall = d0 + tv * range_m.astype(xp.float64)
    cos = xp.maximum(cos_inc.astype(xp.float64), GRAZING_COS_MIN)
    return (0.8862269254527579 * tall) / cos / float(np.sqrt(float(subrays)))


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


def texture_apply(
    materials: MaterialArrays,
    hits: Hits,
    power: np.ndarray,
    refl: np.ndarray,
    beam: tuple[float, float, float] | None = None,
) -> None:
    """Scale ``power`` and ``refl`` (the rays' echoes, in place) by the texture at each hit, averaged over
    each pulse's footprint of ``beam`` (:func:`footprint_beam`; None: a point, the single-cell texture).
    The pipeline runs it on its backend (:meth:`rt_lidar.backend.PhysicsBackend.texture_apply`: this, or
    its compiled twin)."""
    rays = textured_rays(materials, hits.material)
    if rays.size == 0 or materials.texture_sigma is None or materials.texture_cell_m is None:
        return
    ok = np.isfinite(hits.range_m[rays])
    rays = rays[ok]
    mat = hits.material[rays].astype(np.int64)
    area = np.zeros(rays.size)  # a point: the single cell under it
    along = None
    if beam is not None:
        r, cos = hits.range_m[rays], hits.cos_incidence[rays]
        area = footprint_area_m2(np, beam, r, cos, hits.subrays)
        along = footprint_along_m(np, beam, r, cos, hits.subrays)
    patch_sigma = materials.texture_patch_sigma
    patch_m = materials.texture_patch_m
    f = texture_factor(
        hit_world_points(hits, rays),
        material_seeds(materials)[mat],
        materials.texture_cell_m[mat].astype(np.float64),
        materials.texture_sigma[mat],
        area,
        None if patch_sigma is None or patch_m is None else patch_m[mat],
        None if patch_sigma is None or patch_m is None else patch_sigma[mat],
        along,
    )
    power[rays] *= f
    refl[rays] *= f
