"""Recovering what stock AirSim's ``getLidarData`` leaves out: ring, firing time, normal, misses, material.

Stock AirSim sends only the xyz (sensor frame) and segmentation id of the returns. Knowing the preset's
beam table and firing schedule for the interval the answer covers, each point is matched to the firing
that produced it: the ring by elevation, the firing by azimuth within that ring. Firings without a
point are misses. Normals come from the organised range image (neighbours in ring and column), the
material from the segmentation id through a user-given map.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import Firings

__all__ = ["nearest_ring", "recover_hits"]


def nearest_ring(el: np.ndarray, elevations: np.ndarray) -> np.ndarray:
    """The ring (index into ``elevations``, deg) whose elevation is nearest each of ``el`` (deg)."""
    order = np.argsort(elevations)
    sorted_el = elevations[order]
    i = np.clip(np.searchsorted(sorted_el, el), 1, len(sorted_el) - 1)
    left, right = sorted_el[i - 1], sorted_el[i]
    i = np.where(np.abs(el - left) <= np.abs(el - right), i - 1, i)
    return order[i]


def recover_hits(
    points: np.ndarray,
    segmentation: np.ndarray,
    firings: Firings,
    preset: SensorPreset,
    material_of_segment: Mapping[int, int] | None = None,
    default_material: int = 0,
) -> Hits:
    """Hits of ``firings`` rebuilt from stock lidar points (sensor frame, project axes).

    ``material_of_segment`` maps segmentation ids to material numbers (unknown ids get
    ``default_material``). Points that match no firing (another interval, a ring off the table) are
    dropped; two points on one firing keep the nearer.
    """
    n = len(firings)
    pts = np.asarray(points, np.float64).reshape(-1, 3)
    r = np.linalg.norm(pts, axis=1)
    ok = r > 1e-6
    pts, r, seg = pts[ok], r[ok], np.asarray(segmentation)[ok]
    range_m = np.full(n, np.inf, np.float32)
    material = np.full(n, -1, np.int16)
    segment = np.zeros(n, np.uint32)
    cos_inc = np.zeros(n, np.float32)
    direction = firings.directions().copy()
    if pts.shape[0] and n:
        match = _match_firings(pts, firings, preset)
        if firings.origin is not None:  # points from off-axis beams: match again from their beams' origins
            near = match >= 0
            match[near] = _match_firings(pts[near] - firings.origin[match[near]], firings, preset)
            near = match >= 0
            pts = pts.copy()
            pts[near] -= firings.origin[match[near]]
            r = np.linalg.norm(pts, axis=1)
            match[r <= 1e-6] = -1
        good = match >= 0
        match, r_g, seg_g, pts_g = match[good], r[good], seg[good], pts[good]
        near_first = np.lexsort((r_g, match))
        match, r_g, seg_g, pts_g = match[near_first], r_g[near_first], seg_g[near_first], pts_g[near_first]
        first = np.ones(match.size, bool)
        first[1:] = match[1:] != match[:-1]
        match, r_g, seg_g, pts_g = match[first], r_g[first], seg_g[first], pts_g[first]
        range_m[match] = r_g
        segment[match] = np.maximum(seg_g, 0).astype(np.uint32)
        direction[match] = (pts_g / r_g[:, None]).astype(np.float32)
        mats = np.array([(material_of_segment or {}).get(int(s), default_material) for s in seg_g], np.int16)
        material[match] = mats
        cos_inc[match] = _normals_cos(firings, range_m, direction, preset.n_rings)[match]
    return Hits.without_glass(firings, direction, range_m, cos_inc, material, segment)


def _match_firings(pts: np.ndarray, firings: Firings, preset: SensorPreset) -> np.ndarray:
    """Per point (sensor frame, from where its beam starts) the index of the firing it belongs to: the
    ring nearest its elevation, that ring's firing nearest its azimuth; -1 where the ring has none."""
    r = np.linalg.norm(pts, axis=1)
    el = np.degrees(np.arcsin(np.clip(pts[:, 2] / r, -1, 1)))
    az = np.degrees(np.arctan2(pts[:, 1], pts[:, 0]))
    ring = nearest_ring(el, np.asarray(preset.elevations_deg, np.float64))
    # nearest firing of the same ring by azimuth (circular distance)
    key_f = firings.ring.astype(np.int64)
    order = np.lexsort((firings.azimuth_deg, key_f))
    f_ring, f_az = key_f[order], firings.azimuth_deg[order]
    starts = np.searchsorted(f_ring, np.arange(preset.n_rings + 1))
    match = np.full(pts.shape[0], -1, np.int64)
    for rr in np.unique(ring):
        a, b = starts[rr], starts[rr + 1]
        if b <= a:
            continue
        sel = np.nonzero(ring == rr)[0]
        azs = f_az[a:b]
        j = np.searchsorted(azs, az[sel])
        cand = np.stack(
            [
                np.clip(j - 1, 0, b - a - 1),
                np.clip(j, 0, b - a - 1),
                np.zeros_like(j),
                np.full_like(j, b - a - 1),
            ]
        )
        dist = np.abs((azs[cand] - az[sel][None, :] + 180.0) % 360.0 - 180.0)
        best = cand[np.argmin(dist, axis=0), np.arange(sel.size)]
        match[sel] = order[a + best]
    return match


def _normals_cos(firings: Firings, range_m: np.ndarray, direction: np.ndarray, n_rings: int) -> np.ndarray:
    """|cos| between each ray and the surface normal from its range-image neighbours.

    The organised image has a row per ring (ordered by elevation) and a column per firing slot; the
    normal is the cross product of the horizontal and vertical neighbour differences. Where a
    neighbour is missing the ray is taken as head-on (cos 1).
    """
    n = len(firings)
    cos = np.ones(n, np.float32)
    col = firings.column
    if n == 0 or np.any(col < 0):
        return cos
    # ring order is not elevation order on every sensor: rank the rings by elevation for the rows
    ring_el = np.full(n_rings, np.nan)
    ring_el[firings.ring.astype(np.int64)] = firings.elevation_deg
    rank = np.empty(n_rings, np.int64)
    rank[np.argsort(np.nan_to_num(ring_el, nan=1e9))] = np.arange(n_rings)
    row = rank[firings.ring.astype(np.int64)]
    c0 = int(col.min())
    width = int(col.max()) - c0 + 1
    grid = np.full((n_rings, width), -1, np.int64)
    grid[row, col - c0] = np.arange(n)
    p = direction.astype(np.float64) * np.where(np.isfinite(range_m), range_m, np.nan)[:, None]

    def at(dr: int, dc: int) -> np.ndarray:
        rr, cc = row + dr, col - c0 + dc
        inside = (rr >= 0) & (rr < n_rings) & (cc >= 0) & (cc < width)
        idx = np.full(n, -1, np.int64)
        idx[inside] = grid[rr[inside], cc[inside]]
        out = np.full((n, 3), np.nan)
        out[idx >= 0] = p[idx[idx >= 0]]
        return out

    h = at(0, 1) - at(0, -1)
    v = at(1, 0) - at(-1, 0)
    nrm = np.cross(h, v)
    length = np.linalg.norm(nrm, axis=1)
    valid = np.isfinite(length) & (length > 1e-9)
    cos[valid] = np.abs(np.einsum("ij,ij->i", nrm[valid], direction[valid]) / length[valid]).astype(
        np.float32
    )
    return cos
