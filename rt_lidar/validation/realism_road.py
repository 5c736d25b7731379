"""The road's own surface, and the ground's detection probability against the echo's geometry (change 64).

The ground horizon of :mod:`rt_lidar.validation.realism` meets every ray with one plane fitted to the
near ground, along the ring's median elevation seen from the sensor's origin. Two things then mix the
street and the unit's mounting into what is meant to measure the sensor and the surface: a road that
rises or falls beyond the near plane meets the beam sooner or later and at another angle, and a laser
that fires from above the origin (KITTI's HDL-64E S2: 0.20-0.21 m, upper block; 0.12 m, lower block)
has returns whose elevation seen from the origin changes with range, so its median elevation puts a ray
without a return too far out (docs/realism.md, change 64). Here each scan's own road is measured and
every ray, along its own line, is met with it:

- **each ring's line** (:func:`ring_lines`): ``z = z0 + rho * tan(elevation)`` fitted to its returns;
- **the road profile** (:func:`road_profile`): per azimuth sector of :data:`SECTOR_DEG`, the height of the
  ground returns above the near plane against their distance along it, in bands of :data:`BAND_M`,
  grown outward from the near plane: a band's ground is the densest height (:data:`HIST_STEP_M` bins)
  among its returns within ``0.25 m + 1 %`` of range of the profile so far (carried on at its last
  grade), its node the median distance and height of the returns within ``0.1 m + 0.3 %`` of range of
  that; a node steeper than :data:`MAX_GRADE` from the last is skipped, and the profile ends at a gap
  (:func:`_gap`). The surface is linear between nodes, level with the near plane from under the sensor
  to the first, and carried on at the grade of its last 15 m as far past the last node as a gap;
- **each ray on it** (:func:`local_ground_rays`): where the ray meets its sector's profile first (range
  along the ray), the grazing angle there (between the ray and the surface in the ray's vertical
  plane: the cross slope is not modelled) and the grade, whether a return lies on that surface (within
  ``0.1 m + 0.5 %`` of range, as the near plane's ground) and whether the ray is unblocked (the near
  plane's rule: nothing returned in front of the surface, nor a hole between such returns); rays past
  the end of their sector's profile do not meet it, and rays whose return lies off the surface beyond
  where they meet it show the surface is not there: neither is counted;
- **the statistics** (:func:`road_statistics`), over cells of one ring in one sector with :data:`MIN_RAYS`
  unblocked rays: ``ground_horizon_local_m``, the farthest cell's median range among cells that return
  half the time, and the median grazing angle there; ``ground_horizon_level_m``, the same over the rays
  meeting their road where its grade is within :data:`LEVEL_GRADE` (the road's rise taken out); the
  detection probability of unblocked rays by range and grazing band (``ground_pd_by_range_grazing``);
  the road's height above the near plane at 50 and 70 m (median and largest over the sectors whose
  profile reaches there).

Real frames and simulated scans are measured by the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rt_lidar.validation.realism import GroundPlane
    from rt_lidar.validation.realism_grid import ScanGrid

__all__ = [
    "BAND_M",
    "GRAZING_EDGES_DEG",
    "LEVEL_GRADE",
    "RANGE_EDGES_M",
    "SECTOR_DEG",
    "LocalGround",
    "RoadProfile",
    "local_ground_rays",
    "ring_lines",
    "road_profile",
    "road_statistics",
]

SECTOR_DEG = 30.0
"""Azimuth sectors of the road profile (12 a turn; KITTI's camera view spans three)."""
BAND_M = 5.0
"""Bands of distance along the near plane the profile is measured in."""
PROFILE_FROM_M = 5.0
PROFILE_TO_M = 150.0
MIN_BAND_POINTS = 12
"""Ground returns a band of a sector needs to make a node of its profile."""
MAX_GRADE = 0.10
"""The steepest grade the profile follows (10 %: steeper than almost any street)."""
MAX_GAP_M = 15.0
GAP_SHARE = 0.6
"""The profile ends where a sector's ground is not seen over :data:`MAX_GAP_M` or this share of the
distance reached, whichever is longer (a sparse unit's far lasers meet a level road 13 m apart (HDL-32E,
25 to 38 m), and a band's node can sit at its nearer ring; beyond a longer gap the densest heights are
the bases of cars, hedges and walls as often as road); the surface is carried on as far past the last
node."""


def _gap(rho: float) -> float:
    return max(MAX_GAP_M, GAP_SHARE * rho)


HIST_STEP_M = 0.05
MIN_RAYS = 30
"""Unblocked rays a range bin needs (as the near plane's horizon asks of a ring)."""
LEVEL_GRADE = 0.01
"""Rays that meet their road where its grade against the near plane is within this (1 %) meet it as a
level road would: the level horizon is read over them (the road's rise taken out)."""
RANGE_EDGES_M = (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 100.0, 150.0)
GRAZING_EDGES_DEG = (0.0, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0, 90.0)


@dataclass(frozen=True)
class RoadProfile:
    """Each azimuth sector's road: nodes (distance along the near plane m, height above it m)."""

    plane: GroundPlane
    nodes: list[np.ndarray]
    """Per sector, (n, 2) nodes sorted by distance; (0, 2) where the sector has no far ground."""

    def height_at(self, sector: int, rho: float) -> float | None:
        """The profile's height at distance ``rho`` in ``sector``; None beyond its last node."""
        nd = self.nodes[sector]
        if not len(nd) or rho > nd[-1, 0]:
            return None
        return float(np.interp(rho, np.r_[0.0, nd[:, 0]], np.r_[0.0, nd[:, 1]]))


@dataclass(frozen=True)
class LocalGround:
    """Every ray of a scan met with its sector's road profile ((rings, columns) arrays)."""

    range_m: np.ndarray
    """Range along the ray to where it meets the local surface (inf where it does not)."""
    grazing_deg: np.ndarray
    """Angle between the ray and the local surface there (NaN where it does not meet it)."""
    ground: np.ndarray
    """The ray's return lies on the local surface."""
    unblocked: np.ndarray
    """The ray meets the local surface in view with nothing returned in front of it."""
    grade: np.ndarray
    """The local surface's grade (rise per metre along the near plane) where the ray meets it."""


def _plane_coordinates(plane: GroundPlane, xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(height above the near plane, distance along it from under the sensor) of points ``xyz``."""
    u = plane.distance(xyz)
    q = xyz + (plane.sensor_height_m - u)[..., None] * plane.normal
    return u, np.linalg.norm(q, axis=-1)


def _sector(xyz_or_dir: np.ndarray) -> np.ndarray:
    az = np.degrees(np.arctan2(xyz_or_dir[..., 1], xyz_or_dir[..., 0]))
    n = round(360.0 / SECTOR_DEG)
    return (np.floor(np.mod(az, 360.0) / SECTOR_DEG).astype(np.int64)) % n


def _densest(values: np.ndarray) -> float:
    """The centre of the most populated :data:`HIST_STEP_M` window (three bins smoothed) of ``values``."""
    lo = float(values.min())
    idx = np.floor((values - lo) / HIST_STEP_M).astype(np.int64)
    counts = np.bincount(idx).astype(float)
    smooth = np.convolve(counts, np.ones(3), mode="same")
    return lo + (int(np.argmax(smooth)) + 0.5) * HIST_STEP_M


def _sector_nodes(u: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """One sector's profile nodes from its returns' heights ``u`` and distances ``rho``."""
    nodes: list[tuple[float, float]] = []
    last_rho, last_h, grade = 0.0, 0.0, 0.0
    for lo in np.arange(PROFILE_FROM_M, PROFILE_TO_M, BAND_M):
        band = (rho >= lo) & (rho < lo + BAND_M)
        if band.sum() < MIN_BAND_POINTS:
            continue
        ub, rb = u[band], rho[band]
        resid = ub - (last_h + grade * (rb - last_rho))
        near = np.abs(resid) <= 0.25 + 0.01 * rb
        if near.sum() < MIN_BAND_POINTS:
            continue
        centre = _densest(resid[near])
        tight = np.abs(resid - centre) <= 0.1 + 0.003 * rb
        if tight.sum() < MIN_BAND_POINTS:
            continue
        r_node, h_node = float(np.median(rb[tight])), float(np.median(ub[tight]))
        if nodes and r_node - last_rho > _gap(last_rho):
            break  # the road is not seen for a while: what lies beyond is not taken for it
        if abs(h_node - last_h) > MAX_GRADE * (r_node - last_rho) + 0.1:
            continue  # a step no road takes: an object's base
        if r_node - last_rho > 2.0:
            grade = float(np.clip((h_node - last_h) / (r_node - last_rho), -MAX_GRADE, MAX_GRADE))
        nodes.append((r_node, h_node))
        last_rho, last_h = r_node, h_node
    return np.array(nodes, float).reshape(-1, 2)


def road_profile(grid: ScanGrid, plane: GroundPlane) -> RoadProfile:
    """Each azimuth sector's road profile above the near ``plane`` from ``grid``'s returns (module
    docstring)."""
    ret = grid.returned & grid.in_view
    xyz = grid.xyz[ret]
    u, rho = _plane_coordinates(plane, xyz)
    sec = _sector(xyz)
    n = round(360.0 / SECTOR_DEG)
    return RoadProfile(plane, [_sector_nodes(u[sec == k], rho[sec == k]) for k in range(n)])


def _segments(nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(start distance, start height, grade) of each linear piece of a profile, and where it ends: the
    last piece carries the grade of the profile's last 15 m on for :data:`MAX_GAP_M` past its last node
    (no nodes: no surface)."""
    r = np.r_[0.0, nodes[:, 0]]
    h = np.r_[0.0, nodes[:, 1]]
    g = np.diff(h) / np.maximum(np.diff(r), 1e-6)
    k = min(int(np.argmax(r >= r[-1] - 15.0)), len(r) - 2) if len(r) >= 2 else 0
    last = (
        float(np.clip((h[-1] - h[k]) / max(r[-1] - r[k], 1e-6), -MAX_GRADE, MAX_GRADE))
        if len(r) >= 2
        else 0.0
    )
    end = float(r[-1] + _gap(float(r[-1]))) if len(nodes) else 0.0
    return r, h, np.r_[g, last], end


RING_FIT_MIN = 20
"""Returns a ring needs for its own line (else its grid direction from the sensor's origin is used)."""


def ring_lines(grid: ScanGrid) -> tuple[np.ndarray, np.ndarray]:
    """(rings,) each ring's beam as the line its returns lie on in the sensor frame, ``z = z0 + rho *
    tan_elevation`` (``rho`` the horizontal distance): (z0 m, tan_elevation). A laser that fires from
    above or below the sensor frame's origin (the HDL-64E S2's upper block 0.20-0.21 m above it, its lower
    block 0.12 m, KITTI's twelve frames alike) has returns whose elevation seen from the origin changes
    with range, so a ray without a return cannot take its ring's median elevation (0.5-0.6 deg too high
    for KITTI's far lasers: 20 % too far to the ground, docs/realism.md change 64). A least-squares line
    through the ring's returns beyond 3 m (three passes, residuals over three median deviations or 2 cm
    left out); a ring with fewer than :data:`RING_FIT_MIN` returns keeps its grid direction."""
    n = grid.range_m.shape[0]
    z0 = np.zeros(n)
    view = grid.in_view
    tan_el = np.array(
        [
            float(np.median(grid.direction[k, view[k], 2] / np.hypot(*grid.direction[k, view[k], :2].T)))
            if view[k].any()
            else 0.0
            for k in range(n)
        ]
    )
    for k in range(n):
        m = grid.returned[k] & view[k]
        p = grid.xyz[k, m]
        rho = np.hypot(p[:, 0], p[:, 1])
        sel = rho > 3.0
        if sel.sum() < RING_FIT_MIN or np.ptp(rho[sel]) < 2.0:
            continue
        a = np.c_[np.ones(int(sel.sum())), rho[sel]]
        z = p[sel, 2]
        keep = np.ones(len(z), bool)
        for _ in range(3):
            coef, *_ = np.linalg.lstsq(a[keep], z[keep], rcond=None)
            res = np.abs(z - a @ coef)
            keep = res <= max(3.0 * float(np.median(res[keep])), 0.02)
        z0[k], tan_el[k] = float(coef[0]), float(coef[1])
    return z0, tan_el


def _ray_lines(grid: ScanGrid, plane: GroundPlane) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each ray as a line in the near plane's coordinates, height = a + s * distance: (a, s, and two
    points of the ray in the sensor frame at distances d1 and d2 with those distances, for ranges)."""
    z0, tan_el = ring_lines(grid)
    d = grid.direction
    h = np.hypot(d[..., 0], d[..., 1])
    cx, cy = d[..., 0] / np.maximum(h, 1e-12), d[..., 1] / np.maximum(h, 1e-12)
    pts = []
    for dist in (10.0, 100.0):
        pts.append(np.stack([dist * cx, dist * cy, z0[:, None] + dist * tan_el[:, None] + 0 * cx], -1))
    (u1, r1), (u2, r2) = (_plane_coordinates(plane, q) for q in pts)
    s = (u2 - u1) / np.maximum(r2 - r1, 1e-9)
    a = u1 - s * r1
    return a, s, np.stack([r1, r2], -1), np.stack(pts, -2)


def local_ground_rays(grid: ScanGrid, profile: RoadProfile) -> LocalGround:
    """Where each ray of ``grid`` meets its sector's road, at what grazing angle, and which rays are
    unblocked ground rays (module docstring); each ray along its ring's own line (:func:`ring_lines`)."""
    from rt_lidar.validation.realism import with_holes_in_blockers

    plane = profile.plane
    a0, slope, dists, pts = _ray_lines(grid, plane)
    sec = _sector(grid.direction)
    rho_hit = np.full(slope.shape, np.inf)
    grade_hit = np.zeros(slope.shape)
    for k, nodes in enumerate(profile.nodes):
        mine = sec == k
        s, a = slope[mine], a0[mine]
        r0, h0, g, stop = _segments(nodes)
        found = np.full(s.shape, np.inf)
        found_g = np.zeros(s.shape)
        for j in range(len(r0)):
            end = r0[j + 1] if j + 1 < len(r0) else stop
            with np.errstate(divide="ignore", invalid="ignore"):
                rho = (h0[j] - g[j] * r0[j] - a) / (s - g[j])
            ok = np.isinf(found) & (s < g[j]) & (rho >= r0[j]) & (rho < end)
            found = np.where(ok, rho, found)
            found_g = np.where(ok, g[j], found_g)
        rho_hit[mine], grade_hit[mine] = found, found_g
    meets = np.isfinite(rho_hit) & grid.in_view & (a0 > 0)
    span = np.where(meets, dists[..., 1] - dists[..., 0], 1.0)  # rays out of view have no direction
    frac = (np.where(meets, rho_hit, 0.0) - dists[..., 0]) / span
    point = pts[..., 0, :] + frac[..., None] * (pts[..., 1, :] - pts[..., 0, :])
    t = np.where(meets, np.linalg.norm(point, axis=-1), np.inf)
    grazing = np.where(meets, np.degrees(np.arctan(grade_hit) - np.arctan(slope)), np.nan)
    ret = grid.returned
    ground = np.zeros(ret.shape, bool)
    if ret.any():
        u, rho = _plane_coordinates(plane, np.nan_to_num(grid.xyz))
        h_surface = np.full(ret.shape, np.nan)
        sec_ret = _sector(np.nan_to_num(grid.xyz))
        for k, nodes in enumerate(profile.nodes):
            mine = ret & (sec_ret == k)
            r0, h0, g, _ = _segments(nodes)
            j = np.clip(np.searchsorted(r0, rho[mine], side="right") - 1, 0, len(r0) - 1)
            h_surface[mine] = h0[j] + g[j] * (rho[mine] - r0[j])
        with np.errstate(invalid="ignore"):
            ground = ret & (np.abs(u - h_surface) <= 0.1 + 0.005 * grid.range_m)
    blocked = with_holes_in_blockers(ret, ret & ~ground & (grid.range_m < t))
    passed = ret & ~ground & (grid.range_m >= t)  # the ray went past the surface: it is not there
    return LocalGround(t, grazing, ground, meets & ~blocked & ~passed, grade_hit)


def _horizon(
    t: np.ndarray, hit: np.ndarray, grazing: np.ndarray, use: np.ndarray, cell: np.ndarray
) -> tuple[float | None, float | None, list[list[float]]]:
    """(the farthest cell's median range to the road among cells whose ``use`` rays return half the time,
    its rays' median grazing angle, per cell [median range, P, rays, median grazing]) over (rings,
    columns) arrays, a cell being a ring's rays in one azimuth sector (``cell``: its label); a cell
    needs :data:`MIN_RAYS` rays, as the near plane's horizon asks of a ring."""
    rows: list[list[float]] = []
    if not use.any():
        return None, None, rows
    lab, tt, hh, gg = cell[use], t[use], hit[use], grazing[use]
    order = np.argsort(lab, kind="stable")
    lab, tt, hh, gg = lab[order], tt[order], hh[order], gg[order]
    starts = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
    for a, b in zip(starts, np.r_[starts[1:], lab.size], strict=True):
        if b - a >= MIN_RAYS:
            rows.append(
                [float(np.median(tt[a:b])), float(hh[a:b].mean()), int(b - a), float(np.median(gg[a:b]))]
            )
    rows.sort(key=lambda r: r[0])
    good = [r for r in rows if r[1] >= 0.5]
    if not good:
        return None, None, rows
    return good[-1][0], good[-1][3], rows


def _pd_table(t: np.ndarray, hit: np.ndarray, grazing: np.ndarray) -> list[list[Any]]:
    """Rows (range from, to, grazing from, to (deg), rays, P) of every cell with :data:`MIN_RAYS` rays."""
    rows: list[list[Any]] = []
    re, ge = RANGE_EDGES_M, GRAZING_EDGES_DEG
    for i in range(len(re) - 1):
        in_r = (t >= re[i]) & (t < re[i + 1])
        for j in range(len(ge) - 1):
            cell = in_r & (grazing >= ge[j]) & (grazing < ge[j + 1])
            n = int(cell.sum())
            if n >= MIN_RAYS:
                rows.append([re[i], re[i + 1], ge[j], ge[j + 1], n, round(float(hit[cell].mean()), 3)])
    return rows


def _rise(profile: RoadProfile, at_m: float) -> tuple[float | None, float | None]:
    """(median, largest by magnitude) height of the road above the near plane at ``at_m`` over the
    sectors whose profile reaches it."""
    hs = [h for k in range(len(profile.nodes)) if (h := profile.height_at(k, at_m)) is not None]
    if not hs:
        return None, None
    return float(np.median(hs)), float(max(hs, key=abs))


def road_statistics(grid: ScanGrid, plane: GroundPlane) -> dict[str, Any]:
    """The local-surface statistics of the module docstring for one scan over its rays in view."""
    profile = road_profile(grid, plane)
    local = local_ground_rays(grid, profile)
    use = local.unblocked
    t, hit, gz = local.range_m, grid.returned, local.grazing_deg
    cell = np.arange(t.shape[0])[:, None] * 100 + _sector(grid.direction)
    horizon, gz_at, _ = _horizon(t, hit, gz, use, cell)
    level_horizon, level_gz, _ = _horizon(t, hit, gz, use & (np.abs(local.grade) <= LEVEL_GRADE), cell)
    out: dict[str, Any] = {
        "ground_horizon_local_m": horizon,
        "grazing_at_local_horizon_deg": gz_at,
        "ground_horizon_level_m": level_horizon,
        "grazing_at_level_horizon_deg": level_gz,
        "ground_pd_by_range_grazing": _pd_table(t[use], hit[use], gz[use]),
        "road_profile": [[[round(float(r), 2), round(float(h), 3)] for r, h in nd] for nd in profile.nodes],
    }
    for at in (50.0, 70.0):
        med, most = _rise(profile, at)
        out[f"road_rise_{at:.0f}m"] = med
        out[f"road_rise_{at:.0f}m_most"] = most
    return out
