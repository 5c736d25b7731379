"""Raydrop laser by laser: how much more the worst lasers of a scan drop than their neighbours.

A real multi-beam unit's lasers differ in sensitivity (transmit power, receiver gain): in KITTI's HDL-64E
S2 frame 000008 four lasers at -3.75 to -7.19 deg drop 32-42 % of their rays in the camera crop where the
lasers beside them drop 8-25 % (docs/realism.md, change 32). Lasers next to each other in elevation see
nearly the same surfaces, so a laser's hole rate over the median of its neighbours' is its sensitivity
read off the scene. The statistic (:func:`laser_hole_spread`):

- each laser (ring) with at least :data:`MIN_RAYS` classed rays (returns and holes, a hole being a ray
  without return under a return, :func:`rt_lidar.validation.realism._drops`) has its hole rate;
- the :data:`EDGE` highest and lowest of them are left out as candidates (kept as neighbours);
- its neighbours' rate is the median of the :data:`NEIGHBOURS` lasers nearest to it in elevation (itself
  left out); only lasers whose neighbours drop at least :data:`MIN_NEIGHBOUR_RATE` count (below that the
  ratio is counting noise of a few rays);
- ``laser_hole_spread`` is the mean of the :data:`TOP` largest ratios: 1 for a unit whose lasers drop
  alike on alike surfaces, larger where a few lasers drop more than their neighbours.

The road laser by laser (:func:`laser_ground_rates`, the report's ``horizon_lasers``): each laser's
share of unblocked rays that return from the ground, with its elevation, the range where it meets the
fitted plane, where its ground returns lie and how many of them read 0 (the rays the ground horizon is
measured on, :func:`rt_lidar.validation.realism._horizon`). The horizon is one laser's figure; this
says which laser, and what the lasers on either side of it do (docs/realism.md, change 47).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "EDGE",
    "MIN_GROUND_RAYS",
    "MIN_NEIGHBOUR_RATE",
    "MIN_RAYS",
    "NEIGHBOURS",
    "TOP",
    "laser_ground_rates",
    "laser_hole_rates",
    "laser_hole_spread",
]

MIN_RAYS = 100
"""Classed rays (returns + holes) a laser needs for its hole rate to count."""
NEIGHBOURS = 6
"""Lasers nearest in elevation whose median hole rate a laser is compared with."""
MIN_NEIGHBOUR_RATE = 0.02
"""The neighbours' median hole rate a laser's ratio needs to count."""
EDGE = 2
"""The highest and lowest lasers left out as candidates (still neighbours): the lowest see the vehicle's
own body and the dataset's minimum-range cut (nuScenes' HDL-32E: its three lowest lasers drop 0.30-0.34
of their rays where the next drop 0.06), the highest the sky's edge."""
TOP = 4
"""How many of the largest ratios are averaged (KITTI's frame: four lasers stand out)."""
MIN_GROUND_RAYS = 30
"""Unblocked rays a laser needs for its ground return rate (as the horizon's rings)."""


def laser_ground_rates(
    grid: Any, range_to_plane_m: np.ndarray, unblocked: np.ndarray, ground: np.ndarray
) -> list[list[Any]]:
    """Per laser (ring) of ``grid`` with at least :data:`MIN_GROUND_RAYS` unblocked rays, sorted by the
    range where it meets the plane: [ring, elevation (deg, median over those rays), range to the plane (m),
    P(ground return), rays, median range of its ground returns (m) or None, share of them reading 0 or
    None]. ``range_to_plane_m``, ``unblocked`` and ``ground`` are (rings, columns) arrays over the grid."""
    rows: list[list[Any]] = []
    for k in range(grid.range_m.shape[0]):
        use = unblocked[k]
        n = int(use.sum())
        if n < MIN_GROUND_RAYS:
            continue
        on_ground = use & ground[k]
        elevation = float(np.degrees(np.arcsin(np.clip(np.median(grid.direction[k, use, 2]), -1.0, 1.0))))
        rows.append(
            [
                k,
                round(elevation, 3),
                round(float(np.median(range_to_plane_m[k, use])), 2),
                round(float((grid.returned[k] & use).sum() / n), 3),
                n,
                round(float(np.median(grid.range_m[k, on_ground])), 2) if on_ground.any() else None,
                round(float((grid.intensity[k, on_ground] == 0).mean()), 3) if on_ground.any() else None,
            ]
        )
    rows.sort(key=lambda row: row[2])
    return rows


def laser_hole_rates(elevation_deg: np.ndarray, holes: np.ndarray, returned: np.ndarray) -> list[list[float]]:
    """``[elevation deg, hole rate, classed rays]`` of every ring of the (rings, columns) masks ``holes``
    and ``returned`` (both limited to the view) with :data:`MIN_RAYS` classed rays or more, ordered by
    elevation from the top; ``elevation_deg`` is each ring's median elevation."""
    h = holes.sum(axis=1)
    n = h + returned.sum(axis=1)
    rows = [
        [float(elevation_deg[k]), float(h[k] / n[k]), int(n[k])]
        for k in range(len(n))
        if n[k] >= MIN_RAYS and np.isfinite(elevation_deg[k])
    ]
    return sorted(rows, key=lambda r: -r[0])


def laser_hole_spread(rows: list[list[float]]) -> dict[str, Any]:
    """The statistic of the module docstring from :func:`laser_hole_rates`'s ``rows``:
    ``laser_hole_spread`` (None where fewer than :data:`TOP` lasers count), ``laser_hole_ratios`` (each
    counted laser's ``[elevation, rate, neighbours' median rate]``, largest ratio first) and
    ``lasers_counted``."""
    if len(rows) < max(NEIGHBOURS + 1, 2 * EDGE + TOP):
        return {"laser_hole_spread": None, "laser_hole_ratios": [], "lasers_counted": 0}
    elev = np.array([r[0] for r in rows])
    rate = np.array([r[1] for r in rows])
    kept: list[tuple[float, float, float]] = []
    for k in range(EDGE, len(rows) - EDGE):
        d = np.abs(elev - elev[k])
        d[k] = np.inf
        near = np.argsort(d, kind="stable")[:NEIGHBOURS]
        med = float(np.median(rate[near]))
        if med >= MIN_NEIGHBOUR_RATE:
            kept.append((float(elev[k]), float(rate[k]), med))
    kept.sort(key=lambda t: -t[1] / t[2])
    spread = float(np.mean([r / m for _, r, m in kept[:TOP]])) if len(kept) >= TOP else None
    return {
        "laser_hole_spread": spread,
        "laser_hole_ratios": [[round(e, 3), round(r, 4), round(m, 4)] for e, r, m in kept],
        "lasers_counted": len(kept),
    }
