"""Statistics that compare a scan with real scans across different streets (``realism-statistics.md``
of the shared reference): they measure the sensor and the surfaces, not the layout of the street.

- the ground plane: the lowest well-supported plane (RANSAC, normal within 10 deg of vertical; car roofs
  can outnumber the road, so planes below the first one found are looked for), points within
  0.1 m + 0.5 % of range;
- ground intensity by range band (0-10, 10-20, 20-30, 30-50, 50+ m, medians in the sensor's units) and
  its fall-off, the 20-30 m median over the 0-10 m one, read on the ground's own surface: its points
  less the feet of what stands on it (a tyre, a sill, a kerb or a wall's foot: the ray just above in
  elevation rises from the point more steeply than 45 deg, :func:`ground_surface`);
- the ground horizon: per ring, the probability that a ray meeting the plane with nothing closer in
  front of it returns from the ground, against the range where it meets the plane; the horizon is the
  farthest ring with probability >= 0.5 (a ray without a return within two rays along the ring of one
  that hit something in front of the ground, or inside a run of such rays whose nearest returns on both
  sides hit something in front of the ground, counts as blocked: a hole in a car, not a miss of the road);
  beside it, where the road answered there: the median range of that ring's ground returns (a road
  rising beyond the fitted plane meets the ring short of it);
- the ground horizon on the scan's own road (:mod:`rt_lidar.validation.realism_road`, change 64): each
  ray along its ring's own line met with the road profile measured per azimuth sector, the detection
  probability by range and grazing angle, the horizon there and where the road is level;
- the ground's texture: on ground rings at 5-15 m (its own surface, as the bands), the share of points
  whose intensity differs by a reporting step or more from the running median of the 9 points around it
  along the ring;
- the share of zero readings among returns beyond 40 m;
- raydrop: the share of rays in view without a return, the share of holes (a ray without a return below
  a ray of the same column that returned: not open sky), and where holes are (the range of the returns
  around them; near-object holes are those whose neighbours are not ground and closer than 20 m), and
  the hole rate by surface class and range band (:mod:`rt_lidar.validation.realism_holes`: the
  placement with the street's layout taken out). What a recording vehicle adds is left out of all of
  these, the same way on real and simulated scans: a laser that returns nothing over the whole scan (a
  dead channel: its rays are no holes) and the ego zone, returns within :data:`EGO_RANGE_M` of the sensor
  and holes whose returning neighbours lie there (the vehicle's own roof, rack and mount, whose rays
  closer than the sensor's minimum range come back empty: docs/realism.md, change 58).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.validation.realism_grid import ScanGrid
from rt_lidar.validation.realism_holes import class_counts, fine_counts, hole_rates
from rt_lidar.validation.realism_lasers import laser_ground_rates, laser_hole_rates, laser_hole_spread
from rt_lidar.validation.realism_road import road_statistics

__all__ = [
    "BANDS_M",
    "EGO_RANGE_M",
    "GroundPlane",
    "dead_lasers",
    "fit_ground",
    "ground_returns",
    "ground_surface",
    "hole_neighbour_classes",
    "nearest_columns",
    "realism_statistics",
    "street_holes",
    "with_holes_in_blockers",
]

BANDS_M = ((0.0, 10.0), (10.0, 20.0), (20.0, 30.0), (30.0, 50.0), (50.0, float("inf")))
"""Range bands of the ground intensity (m)."""
TEXTURE_RANGE_M = (5.0, 15.0)
TEXTURE_WINDOW = 9
ZERO_BEYOND_M = 40.0
NEAR_OBJECT_M = 20.0
EGO_RANGE_M = 2.0
"""Returns closer than this, and holes whose returning neighbours' median range is, are the recording
vehicle's own body and mount, not the street: left out of the raydrop statistics (change 58). Real roof
sensors see their vehicle there every scan: nuScenes' HDL-32E its roof at 0.5-1.5 m (0.35 m below the
sensor, all round), the OS0-128 sample its roof and mount at 0.2-1 m and the body to 2 m behind it,
the VLS-128 sample 1.0-1.5 m to its side; a street's objects are rarely that close (KITTI's thirteen
frames: 2-124 returns of 19,000-75,000 within 2 m)."""


@dataclass(frozen=True)
class GroundPlane:
    """The plane n . p + d = 0 (n a unit normal pointing up) in the sensor frame."""

    normal: np.ndarray
    offset: float

    def distance(self, p: np.ndarray) -> np.ndarray:
        """Signed height of points ``p`` (..., 3) above the plane."""
        return np.asarray(p @ self.normal + self.offset)

    @property
    def sensor_height_m(self) -> float:
        """Height of the sensor's origin above the plane."""
        return float(self.offset)


def _tolerance(r: np.ndarray) -> np.ndarray:
    return 0.1 + 0.005 * r


def _ransac(
    p: np.ndarray, rng: np.random.Generator, iters: int = 300
) -> tuple[GroundPlane | None, np.ndarray]:
    """The plane with the most inliers among ``p`` whose normal is within 10 deg of vertical."""
    best: GroundPlane | None = None
    best_in = np.zeros(len(p), bool)
    if len(p) < 3:
        return None, best_in
    r = np.linalg.norm(p, axis=1)
    tol = _tolerance(r)
    cos10 = np.cos(np.radians(10.0))
    for _ in range(iters):
        a, b, c = p[rng.choice(len(p), 3, replace=False)]
        n = np.cross(b - a, c - a)
        norm = np.linalg.norm(n)
        if norm < 1e-9:
            continue
        n = n / norm
        if n[2] < 0:
            n = -n
        if n[2] < cos10:
            continue
        inl = np.abs(p @ n - n @ a) <= tol
        if inl.sum() > best_in.sum():
            best, best_in = GroundPlane(n, float(-(n @ a))), inl
    if best is None:
        return None, best_in
    q = p[best_in]  # least squares refit on the inliers: z = a x + b y + c
    A = np.c_[q[:, 0], q[:, 1], np.ones(len(q))]
    coef, *_ = np.linalg.lstsq(A, q[:, 2], rcond=None)
    n = np.array([-coef[0], -coef[1], 1.0])
    s = np.linalg.norm(n)
    plane = GroundPlane(n / s, float(-coef[2] / s))
    return plane, np.abs(plane.distance(p)) <= tol


def fit_ground(points: np.ndarray, seed: int = 0) -> GroundPlane | None:
    """The lowest well-supported plane under the sensor among ``points`` (N, 3) within 40 m (a plane below
    the best one that holds at least a quarter of its inliers replaces it)."""
    rng = np.random.default_rng(seed)
    r = np.hypot(points[:, 0], points[:, 1])
    p = points[(r < 40.0) & (points[:, 2] < 0.0)]
    if len(p) > 60_000:
        p = p[rng.choice(len(p), 60_000, replace=False)]
    plane, inl = _ransac(p, rng)
    while plane is not None:
        below = p[plane.distance(p) < -0.3]
        lower, lin = _ransac(below, rng)
        if lower is None or lin.sum() < max(0.25 * inl.sum(), 200):
            break
        plane, inl = lower, lin
    return plane


FOOT_RISE_M = 0.05
"""A point within the plane's tolerance is an object's foot where the ray just above it in elevation
returned from higher than this above it, more steeply than 45 deg (rise over the change of horizontal
range): a tyre, a car's sill, a kerb or a wall standing on the road, not the road (docs/realism.md,
change 62).
Consecutive rays on a flat road differ in height by the range noise (about a centimetre) and in
horizontal range by decimetres to metres."""


def _object_feet(grid: ScanGrid, plane: GroundPlane, near_plane: np.ndarray) -> np.ndarray:
    """(rings, columns) bool: the returns of ``near_plane`` whose ray just above in elevation (the nearest
    in azimuth on the next ring up) returned from a surface rising from them by more than
    :data:`FOOT_RISE_M` and more steeply than 45 deg."""
    order = _rings_by_elevation(grid)[1]
    gk, gc = np.nonzero(near_plane)
    out = np.zeros_like(near_plane)
    if gk.size == 0:
        return out
    uk, uc = nearest_columns(_cell_azimuth(grid), order, gk, gc, -1)
    above = uk >= 0
    uk = np.maximum(uk, 0)
    p, q = grid.xyz[gk, gc], np.nan_to_num(grid.xyz[uk, uc])
    rise = plane.distance(q) - plane.distance(p)
    run = np.abs(np.hypot(q[:, 0], q[:, 1]) - np.hypot(p[:, 0], p[:, 1]))
    foot = above & grid.returned[uk, uc] & (rise > FOOT_RISE_M) & (rise > run)
    out[gk[foot], gc[foot]] = True
    return out


def ground_surface(grid: ScanGrid, plane: GroundPlane, ground: np.ndarray) -> np.ndarray:
    """(rings, columns) bool: the returns of ``ground`` (within the plane's tolerance) that are the
    ground's own surface, the feet of objects standing on it (:data:`FOOT_RISE_M`) left out: what the
    ground's intensity statistics read."""
    return ground & ~_object_feet(grid, plane, ground)


def _band_medians(r: np.ndarray, i: np.ndarray) -> list[float | None]:
    out: list[float | None] = []
    for lo, hi in BANDS_M:
        sel = (r >= lo) & (r < hi)
        out.append(float(np.median(i[sel])) if sel.sum() >= 20 else None)
    return out


def _texture(grid: ScanGrid, ground: np.ndarray) -> tuple[float | None, int]:
    """Share of ground points at 5-15 m off their 9-point running median by a step or more."""
    lo, hi = TEXTURE_RANGE_M
    half = TEXTURE_WINDOW // 2
    off, total = 0, 0
    for k in range(grid.range_m.shape[0]):
        sel = np.flatnonzero(ground[k] & (grid.range_m[k] >= lo) & (grid.range_m[k] < hi))
        if sel.size < TEXTURE_WINDOW:
            continue
        v = grid.intensity[k, sel]
        med = np.median(np.lib.stride_tricks.sliding_window_view(v, TEXTURE_WINDOW), axis=1)
        centre = v[half : half + med.size]
        off += int(np.count_nonzero(np.abs(centre - med) >= grid.step * (1 - 1e-6)))
        total += med.size
    return (off / total if total else None), total


def _horizon(
    grid: ScanGrid, plane: GroundPlane, ground: np.ndarray
) -> tuple[float | None, list[tuple[float, float, int, float | None]]]:
    """(horizon m, per ring (median range to the plane, P(ground return), rays, median range of its
    ground returns)) of unblocked rays."""
    t, unblocked = _unblocked_ground_rays(grid, plane, ground)
    ret = grid.returned
    rows = []
    for k in range(grid.range_m.shape[0]):
        use = unblocked[k]
        n = int(use.sum())
        if n < 30:
            continue
        p = float((ret[k] & use).sum() / n)
        on_ground = use & ground[k]
        where = float(np.median(grid.range_m[k, on_ground])) if on_ground.any() else None
        rows.append((float(np.median(t[k, use])), p, n, where))
    rows.sort(key=lambda row: row[0])
    good = [r for r, p, _, _ in rows if p >= 0.5]
    return (max(good) if good else None), rows


def _unblocked_ground_rays(
    grid: ScanGrid, plane: GroundPlane, ground: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(range to the plane, rays that meet the plane in view with nothing in front of it), (rings, columns)
    each: the rays the ground horizon is measured on."""
    denom = grid.direction @ plane.normal
    with np.errstate(divide="ignore", invalid="ignore"):
        t = -plane.offset / denom
    meets = (denom < -1e-6) & np.isfinite(t) & (t > 0) & grid.in_view
    ret = grid.returned
    blocked = ret & ~ground & (grid.range_m < t)  # something stands in front of the ground
    return t, meets & ~with_holes_in_blockers(ret, blocked)


def with_holes_in_blockers(ret: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """(rings, columns) bool: the ``blocked`` returns (something stood in front of the ground) and the
    rays without a return that are holes in what blocked: within two rays of a blocked return along the
    ring, or inside a run whose nearest returns on both sides were blocked (a car's window), not misses
    of the ground."""
    beside = np.zeros_like(blocked)
    for shift in (-2, -1, 1, 2):
        beside |= np.roll(blocked, shift, axis=1)
    return blocked | (~ret & (beside | _inside_blocked_run(ret, blocked)))


def _horizon_returned(rows: list[tuple[float, float, int, float | None]]) -> float | None:
    """Where the road actually answered at the horizon: the median range of the ground returns of the
    farthest ring (by its range to the plane) that returns half the time. A road that rises beyond the
    plane fitted near the sensor meets a ring short of the plane, more steeply: the plane's range then
    overstates how far the sensor sees the road (KITTI's frame 000008: 67 m to the plane, 55 m returned)."""
    good = [w for _, p, _, w in rows if p >= 0.5 and w is not None]
    return good[-1] if good else None


def _inside_blocked_run(ret: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """(rings, columns) bool: the ray returned nothing and the nearest returns on both sides of it along
    its ring both came from something in front of the ground (a run of holes through a car's windows,
    however wide, is a hole in the car)."""
    cols = np.arange(ret.shape[1])
    prev = np.maximum.accumulate(np.where(ret, cols, -1), axis=1)
    nxt = np.minimum.accumulate(np.where(ret, cols, ret.shape[1])[:, ::-1], axis=1)[:, ::-1]
    ok = (prev >= 0) & (nxt < ret.shape[1])
    rows = np.arange(ret.shape[0])[:, None]
    both = (
        blocked[rows, np.clip(prev, 0, ret.shape[1] - 1)] & blocked[rows, np.clip(nxt, 0, ret.shape[1] - 1)]
    )
    return ~ret & ok & both


def _cell_azimuth(grid: ScanGrid) -> np.ndarray:
    if grid.azimuth_deg is not None:
        return grid.azimuth_deg
    return np.degrees(np.arctan2(grid.direction[..., 1], grid.direction[..., 0]))


RASTER_DEG = 0.02


def _under_a_return(grid: ScanGrid, az: np.ndarray, order: np.ndarray) -> np.ndarray:
    """(rings, columns) bool: a ring higher up returned from the ray's azimuth (within half a step)."""
    nbins = round(360.0 / RASTER_DEG)
    seen = np.zeros(nbins, bool)
    out = np.zeros(grid.range_m.shape, bool)
    ok = np.isfinite(az)
    bins = np.where(ok, np.floor(np.mod(np.nan_to_num(az), 360.0) / RASTER_DEG), 0).astype(np.int64) % nbins
    for k in order:
        out[k] = seen[bins[k]] & ok[k] & grid.in_view[k]
        d = np.diff(np.sort(az[k][ok[k]]))
        step = float(np.median(d[d > 0])) if np.any(d > 0) else 0.2
        w = max(int(np.ceil(step / 2 / RASTER_DEG)), 1)
        hit = bins[k][grid.returned[k] & ok[k]]
        if hit.size:
            mark = (hit[:, None] + np.arange(-w, w + 1)[None, :]) % nbins
            seen[mark.ravel()] = True
    return out


def dead_lasers(grid: ScanGrid) -> np.ndarray:
    """(rings,) bool: rings in view that return nothing over the whole scan (a dead or disabled channel:
    the nebula VLS-128 sample's laser 82 reads 0 in all of its 1,812 firings), while the scan returns."""
    view = grid.in_view
    ret = grid.returned & view
    return view.any(axis=1) & ~ret.any(axis=1) & bool(ret.any())


def _rings_by_elevation(grid: ScanGrid) -> tuple[np.ndarray, np.ndarray]:
    """(each ring's median elevation sine over its rays in view, -2 for a ring with none; the rings from
    the highest elevation down)."""
    view = grid.in_view
    elev = np.array(
        [np.nanmedian(grid.direction[k, view[k], 2]) if view[k].any() else -2 for k in range(len(view))]
    )
    return elev, np.argsort(-elev)


def ground_returns(grid: ScanGrid, plane: GroundPlane) -> np.ndarray:
    """(rings, columns) bool: the returns in view that lie on ``plane`` within the ground's tolerance."""
    with np.errstate(invalid="ignore"):
        near_plane = np.abs(plane.distance(np.nan_to_num(grid.xyz))) <= _tolerance(grid.range_m)
    return grid.returned & grid.in_view & near_plane


def hole_neighbour_classes(
    grid: ScanGrid,
    holes: np.ndarray,
    ret: np.ndarray,
    az: np.ndarray,
    order: np.ndarray,
    ground: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(H,) float: each hole of ``holes`` (row-major), its returning neighbours' median range and the share
    of them on the ``ground`` (:func:`street_holes`' ``ret``, ``az``, ``order``): what the raydrop classes
    read a hole by; NaN for a hole without a returning neighbour."""
    rr = _hole_neighbours(grid, holes, ret, az, order, grid.range_m)
    gg = _hole_neighbours(grid, holes, ret, az, order, ground.astype(np.float64))
    if not rr.size:
        return np.zeros(0), np.zeros(0)
    with warnings.catch_warnings():  # holes without a returning neighbour: all-NaN rows
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(rr, axis=1), np.nanmean(gg, axis=1)


def street_holes(
    grid: ScanGrid,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The street's holes and returns as the raydrop statistics read them: (holes and returns, (rings,
    columns) masks; the cells' azimuths; the rings from the highest down; the rings' elevation sines). A
    hole is a ray in view without a return under a higher ring's return, dead lasers and the ego zone
    (:data:`EGO_RANGE_M`) left out, as are the ego zone's returns."""
    missing = grid.in_view & ~grid.returned
    elev, order = _rings_by_elevation(grid)
    az = _cell_azimuth(grid)
    holes = missing & _under_a_return(grid, az, order) & ~dead_lasers(grid)[:, None]
    ret = grid.returned & grid.in_view & (grid.range_m >= EGO_RANGE_M)  # the ego zone's returns left out
    holes &= ~_ego_holes(grid, holes, ret, az, order)
    return holes, ret, az, order, elev


def _drops(grid: ScanGrid, ground: np.ndarray) -> dict[str, Any]:
    """Raydrop share, hole share and where the holes are (dead lasers and the ego zone left out)."""
    holes, ret, az, order, elev = street_holes(grid)
    missing = grid.in_view & ~grid.returned
    return _hole_statistics(grid, ground, holes, ret, az, order, missing, elev)


def nearest_columns(
    az: np.ndarray, order: np.ndarray, rings: np.ndarray, cols: np.ndarray, step: int
) -> tuple[np.ndarray, np.ndarray]:
    """(ring, column) of the ray nearest in azimuth to each ray (``rings``, ``cols``) on the ring ``step``
    places away in elevation (``order``: the rings by elevation; ring -1 where there is none)."""
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    nk = np.full(rings.shape, -1)
    nc = np.zeros(rings.shape, np.int64)
    for k in np.unique(rings):
        j = pos[k] + step
        if not 0 <= j < order.size:
            continue
        kk = order[j]
        a = np.where(np.isfinite(az[kk]), az[kk], np.inf)
        o = np.argsort(a)
        a = a[o]
        sel = rings == k
        x = az[k, cols[sel]]
        i = np.clip(np.searchsorted(a, x), 1, len(a) - 1)
        left = np.abs(a[i - 1] - x) < np.abs(a[i] - x)
        nk[sel], nc[sel] = kk, o[np.where(left, i - 1, i)]
    return nk, nc


def _hole_neighbours(
    grid: ScanGrid, holes: np.ndarray, ret: np.ndarray, az: np.ndarray, order: np.ndarray, values: np.ndarray
) -> np.ndarray:
    """(holes, 4) ``values`` at each hole's neighbours (the rays beside it on its ring and the nearest rays
    of the rings next to it in elevation), NaN where a neighbour has no return in ``ret``."""
    ncols = ret.shape[1]
    hk, hc = np.nonzero(holes)
    cols = [(hk, (hc - 1) % ncols), (hk, (hc + 1) % ncols)]
    for step in (-1, 1):
        nk, nc = nearest_columns(az, order, hk, hc, step)
        cols.append((nk, nc))
    v = np.where(ret, values, np.nan)
    if not cols[0][0].size:
        return np.zeros((0, 4))
    return np.stack([np.where(k >= 0, v[np.maximum(k, 0), c], np.nan) for k, c in cols], -1)


def _ego_holes(
    grid: ScanGrid, holes: np.ndarray, ret: np.ndarray, az: np.ndarray, order: np.ndarray
) -> np.ndarray:
    """(rings, columns) bool: holes whose returning neighbours (any range) have their median range within
    :data:`EGO_RANGE_M`: rays the vehicle's own body blocks closer than the sensor reports."""
    rr = _hole_neighbours(grid, holes, grid.returned & grid.in_view, az, order, grid.range_m)
    with warnings.catch_warnings():  # all-NaN rows: no returning neighbour, not the ego's
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(rr, axis=1) if rr.size else np.zeros(0)
    out = np.zeros(holes.shape, bool)
    hk, hc = np.nonzero(holes)
    ego = np.isfinite(med) & (med < EGO_RANGE_M)
    out[hk[ego], hc[ego]] = True
    return out


def _hole_statistics(
    grid: ScanGrid,
    ground: np.ndarray,
    holes: np.ndarray,
    ret: np.ndarray,
    az: np.ndarray,
    order: np.ndarray,
    missing: np.ndarray,
    elev: np.ndarray,
) -> dict[str, Any]:
    view = grid.in_view
    # a hole's neighbours: the rays beside it on its ring and the nearest rays of the rings next to it
    med, g_share = hole_neighbour_classes(grid, holes, ret, az, order, ground)
    seen = ~np.isnan(med)  # holes without a returning neighbour are left out
    med, g_share = med[seen], g_share[seen]
    ranges = med.tolist()
    near_obj = int(np.count_nonzero((med < NEAR_OBJECT_M) & (g_share < 0.5)))
    n_holes = int(holes.sum())
    hr = np.asarray(ranges)
    counts = class_counts(grid.range_m[ret], ground[ret], med, g_share)
    elev_deg = np.degrees(np.arcsin(np.where(elev >= -1, elev, np.nan)))
    lasers = laser_hole_spread(laser_hole_rates(elev_deg, holes, ret))
    return lasers | {
        "drop_share": float(missing.sum() / max(view.sum(), 1)),
        "hole_share": float(n_holes / max(int(ret.sum()) + n_holes, 1)),
        "holes": n_holes,
        "holes_near_object_share": float(near_obj / len(ranges)) if ranges else None,
        "holes_median_neighbour_range_m": float(np.median(hr)) if hr.size else None,
        "holes_by_range_band": [
            float(((hr >= lo) & (hr < hi)).mean()) if hr.size else None for lo, hi in BANDS_M
        ],
        "hole_class_counts": counts,
        "hole_rate_by_class": hole_rates(counts),
        "hole_fine_counts": fine_counts(grid.range_m[ret], ground[ret], med, g_share),
    }


def realism_statistics(grid: ScanGrid, seed: int = 0) -> dict[str, Any]:
    """Every statistic of the module docstring for one organised scan (None where it has too few points)."""
    ret = grid.returned & grid.in_view
    pts = grid.xyz[ret]
    plane = fit_ground(pts, seed)
    out: dict[str, Any] = {"scan": grid.name, "units": grid.units, "points": int(ret.sum())}
    rng_all = grid.range_m[ret]
    far = rng_all > ZERO_BEYOND_M
    out["zero_share_beyond_40m"] = float((grid.intensity[ret][far] == 0).mean()) if far.sum() >= 20 else None
    out["returns_beyond_40m"] = int(far.sum())
    if plane is None:
        return out | {"ground_points": 0}
    ground = ground_returns(grid, plane)
    surface = ground_surface(grid, plane, ground)
    r = grid.range_m[surface]
    i = grid.intensity[surface]
    bands = _band_medians(r, i)
    out["sensor_height_m"] = plane.sensor_height_m
    out["ground_points"] = int(ground.sum())
    out["ground_surface_points"] = int(surface.sum())
    out["ground_intensity_by_band"] = bands
    out["ground_falloff_20_30_over_0_10"] = bands[2] / bands[0] if bands[0] and bands[2] is not None else None
    out["ground_texture_share"], out["texture_points"] = _texture(grid, surface)
    horizon, rows = _horizon(grid, plane, ground)
    out["ground_horizon_m"] = horizon
    out["ground_horizon_returned_m"] = _horizon_returned(rows)
    out["horizon_rings"] = [
        [round(t, 2), round(p, 3), n, None if w is None else round(w, 2)] for t, p, n, w in rows
    ]
    out["horizon_lasers"] = laser_ground_rates(grid, *_unblocked_ground_rays(grid, plane, ground), ground)
    out.update(road_statistics(grid, plane))  # the horizon on the scan's own road (change 64)
    out.update(_drops(grid, ground))
    return out
