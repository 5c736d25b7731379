"""Near-object holes against the returns around them (docs/realism.md, change 59).

The raydrop statistics count a near-object hole (:mod:`rt_lidar.validation.realism_holes`'s
``object_0_10m`` class: a hole whose returning neighbours' median range is under 10 m and less than half of
them ground) against the near-object returns. Here each of those rays, hole or return, gets the same
features, read from the returns around it, so that a real frame and a simulated scan can be split alike:

- ``range_m``: a return's own range, a hole's neighbours' median;
- ``intensity``: the median intensity of the ray's returning neighbours (a hole has no own), so the
  split by brightness puts a hole and a return on one surface in one class;
- ``edge``: a returning neighbour lies more than :data:`EDGE_STEP` of the range off (a depth
  discontinuity: the object's silhouette or a step on it), else the ray is inside a smooth surface;
- ``incidence_deg``: the angle between the ray and the normal of a plane fitted (PCA) to the returns of
  the 5 x 5 rings-by-columns patch around it on the same surface (within :data:`SAME_SURFACE` of the
  range), NaN with fewer than :data:`MIN_PATCH` such returns;
- ``run``: a hole's run of consecutive rays without a return along its ring (0 for a return);
- ``elevation_deg``: the ray's ring's elevation.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from rt_lidar.validation.realism import (
    EGO_RANGE_M,
    _hole_neighbours,
    _tolerance,
    fit_ground,
    nearest_columns,
    street_holes,
)
from rt_lidar.validation.realism_grid import ScanGrid

__all__ = ["EDGE_STEP", "MIN_PATCH", "SAME_SURFACE", "NearRays", "near_hole_rates", "near_object_rays"]

NEAR_M = 10.0
"""The near-object class's outer range (``object_0_10m``)."""
EDGE_STEP = 0.15
"""A neighbour's range this share off the ray's marks a depth discontinuity."""
SAME_SURFACE = 0.10
"""Returns of the 5 x 5 patch within this share of the ray's range are its surface's."""
MIN_PATCH = 6
"""Fewer same-surface returns in the patch leave the incidence undefined."""
PATCH = 2
"""Rings and columns each side of the ray in its patch."""


@dataclass(frozen=True)
class NearRays:
    """The near-object rays of one scan, holes and returns, with the features of the module docstring."""

    hole: np.ndarray
    range_m: np.ndarray
    intensity: np.ndarray
    edge: np.ndarray
    incidence_deg: np.ndarray
    run: np.ndarray
    elevation_deg: np.ndarray
    ring: np.ndarray
    column: np.ndarray


def _incidence(
    grid: ScanGrid,
    ret: np.ndarray,
    az: np.ndarray,
    order: np.ndarray,
    k: np.ndarray,
    c: np.ndarray,
    r: np.ndarray,
) -> np.ndarray:
    """Incidence (deg) of each ray (k, c) at range r on the plane of its patch's same-surface returns."""
    ncols = grid.range_m.shape[1]
    xyz = np.where(ret[..., None], grid.xyz, np.nan)
    side = np.arange(-PATCH, PATCH + 1)
    pts = np.full((k.size, side.size**2, 3), np.nan)
    m = 0
    for d in side:
        nk, nc = (k, c) if d == 0 else nearest_columns(az, order, k, c, int(d))
        for e in side:
            p = np.where((nk >= 0)[:, None], xyz[np.maximum(nk, 0), (nc + e) % ncols], np.nan)
            off = np.abs(np.linalg.norm(p, axis=1) - r) >= SAME_SURFACE * r
            p[off] = np.nan  # NaN rows (no return) compare False and stay NaN
            pts[:, m] = p
            m += 1
    n = np.isfinite(pts[..., 0]).sum(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        centred = np.nan_to_num(pts - np.nanmean(pts, axis=1)[:, None])
    cov = np.einsum("nki,nkj->nij", centred, centred) / np.maximum(n, 1)[:, None, None]
    _, vec = np.linalg.eigh(cov)
    normal = vec[:, :, 0]
    cos = np.abs((normal * grid.direction[k, c]).sum(axis=1))
    out = np.degrees(np.arccos(np.clip(cos, 0.0, 1.0)))
    return np.where(n >= MIN_PATCH, out, np.nan)


def _runs(missing: np.ndarray, k: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Length of the run of rays without a return (along the ring, wrapping) each (k, c) lies in."""
    out = np.zeros(k.size, np.int64)
    ncols = missing.shape[1]
    for ring in np.unique(k):
        row = missing[ring]
        sel = k == ring
        if row.all():
            out[sel] = ncols
            continue
        shift = int(np.argmin(row))  # start the row at a return so no run wraps
        rolled = np.roll(row, -shift).astype(np.int8)
        bounds = np.flatnonzero(np.diff(np.r_[0, rolled, 0]))
        length = np.zeros(ncols, np.int64)
        for a, b in zip(bounds[::2], bounds[1::2], strict=True):
            length[a:b] = b - a
        out[sel] = np.roll(length, shift)[c[sel]]
    return out


def near_object_rays(grid: ScanGrid, seed: int = 0) -> NearRays | None:
    """The near-object holes and returns of one scan (the ``object_0_10m`` class of the raydrop
    statistics, same ground plane and rules) with their features; None where no ground plane is found."""
    view_ret = grid.returned & grid.in_view
    plane = fit_ground(grid.xyz[view_ret], seed)
    if plane is None:
        return None
    with np.errstate(invalid="ignore"):
        ground = view_ret & (np.abs(plane.distance(np.nan_to_num(grid.xyz))) <= _tolerance(grid.range_m))
    holes, ret, az, order, elev = street_holes(grid)
    with warnings.catch_warnings():  # all-NaN rows: holes without a returning neighbour, not counted
        warnings.simplefilter("ignore", RuntimeWarning)
        h_rng = _hole_neighbours(grid, holes, ret, az, order, grid.range_m)
        h_gnd = np.nanmean(_hole_neighbours(grid, holes, ret, az, order, ground.astype(np.float64)), axis=1)
        h_med = np.nanmedian(h_rng, axis=1)
    near_hole = (h_med < NEAR_M) & (h_gnd < 0.5)
    near_ret = ret & ~ground & (grid.range_m < NEAR_M)
    hk, hc = np.nonzero(holes)
    rk, rc = np.nonzero(near_ret)
    k = np.r_[hk[near_hole], rk]
    c = np.r_[hc[near_hole], rc]
    is_hole = np.r_[np.ones(int(near_hole.sum()), bool), np.zeros(rk.size, bool)]
    # neighbours in the mask's row-major order: holes first, then returns, each sorted as (k, c) above
    n_rng = np.full((k.size, 4), np.nan)
    n_int = np.full((k.size, 4), np.nan)
    n_rng[is_hole] = h_rng[near_hole]
    n_int[is_hole] = _hole_neighbours(grid, holes, ret, az, order, grid.intensity)[near_hole]
    n_rng[~is_hole] = _hole_neighbours(grid, near_ret, ret, az, order, grid.range_m)
    n_int[~is_hole] = _hole_neighbours(grid, near_ret, ret, az, order, grid.intensity)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rng = np.where(is_hole, np.nanmedian(n_rng, axis=1), grid.range_m[k, c])
        inten = np.nanmedian(n_int, axis=1)
    edge = (np.abs(n_rng - rng[:, None]) > EDGE_STEP * rng[:, None]).any(axis=1)
    missing = grid.in_view & ~grid.returned
    run = np.where(is_hole, _runs(missing, k, c), 0)
    return NearRays(
        hole=is_hole,
        range_m=rng,
        intensity=inten,
        edge=edge,
        incidence_deg=_incidence(grid, ret, az, order, k, c, rng),
        run=run,
        elevation_deg=np.degrees(np.arcsin(np.clip(elev[k], -1.0, 1.0))),
        ring=k,
        column=c,
    )


def near_hole_rates(rays: list[NearRays]) -> dict[str, tuple[float | None, int, int]]:
    """(hole rate, holes, rays) of the pooled scans' near-object rays by class: range (2-5 m from
    :data:`EGO_RANGE_M`, 5-10 m), surface brightness against the scans' own near returns' quartile
    (dark: at most the lowest quarter), edge or interior, incidence, elevation; and the holes' run lengths
    (``run_1``, ``run_2_3``, ``run_4_10``, ``run_11_up``: share of holes, with holes and all holes)."""
    f = {name: np.concatenate([getattr(r, name) for r in rays]) for name in NearRays.__dataclass_fields__}
    hole = f["hole"].astype(bool)
    returns_i = f["intensity"][~hole]
    q25 = float(np.nanpercentile(returns_i, 25)) if np.isfinite(returns_i).any() else np.nan
    dark = f["intensity"] <= q25
    bright = f["intensity"] > q25
    inc = f["incidence_deg"]
    with np.errstate(invalid="ignore"):
        classes = {
            "all": np.ones(hole.size, bool),
            f"range_{EGO_RANGE_M:g}_5m": f["range_m"] < 5.0,
            "range_5_10m": f["range_m"] >= 5.0,
            "dark": dark,
            "bright": bright,
            "dark_2_5m": dark & (f["range_m"] < 5.0),
            "bright_2_5m": bright & (f["range_m"] < 5.0),
            "dark_5_10m": dark & (f["range_m"] >= 5.0),
            "bright_5_10m": bright & (f["range_m"] >= 5.0),
            "edge": f["edge"],
            "interior": ~f["edge"],
            "incidence_0_60": inc < 60,
            "incidence_60_75": (inc >= 60) & (inc < 75),
            "incidence_75_90": inc >= 75,
            "incidence_undefined": np.isnan(inc),
            "bright_interior_facing": bright & ~f["edge"] & (inc < 60),
            "elevation_below_-10": f["elevation_deg"] < -10,
            "elevation_-10_0": (f["elevation_deg"] >= -10) & (f["elevation_deg"] < 0),
            "elevation_0_up": f["elevation_deg"] >= 0,
        }
    out: dict[str, tuple[float | None, int, int]] = {}
    for name, sel in classes.items():
        n, h = int(sel.sum()), int((sel & hole).sum())
        out[name] = (h / n if n else None, h, n)
    run = f["run"][hole]
    n_holes = int(hole.sum())
    for name, lo, hi in (("run_1", 1, 1), ("run_2_3", 2, 3), ("run_4_10", 4, 10), ("run_11_up", 11, 1 << 30)):
        h = int(((run >= lo) & (run <= hi)).sum())
        out[name] = (h / n_holes if n_holes else None, h, n_holes)
    return out
