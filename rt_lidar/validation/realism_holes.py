"""Hole rates by surface class and range band: the raydrop placement statistic with the street's layout
taken out (docs/realism.md, change 26).

``holes_near_object_share`` (:mod:`rt_lidar.validation.realism`) mixes two things: how often a surface
drops a ray (physics) and how much of the view such surfaces fill (layout). Here every returned ray and
every hole (whose neighbours returned) is put in a class: the surface ("ground" or "object", a hole by
its neighbours as the near-object share does: ground when half or more of its returning neighbours are
ground) and the range band (a hole by its neighbours' median range). A class's hole rate is
``holes / (holes + returns)``: the chance that a ray meeting such a surface at such a range returns
nothing. It is computed the same way on a real frame, whose first surfaces are known only from the
neighbours. :func:`near_share_on_layout` then gives the near-object share one scan's rates would show
with another scan's mix of returns: the simulated physics on the real frame's layout.
"""

from __future__ import annotations

import numpy as np

__all__ = ["HOLE_CLASSES", "RANGE_BANDS_M", "class_counts", "hole_rates", "near_share_on_layout"]

RANGE_BANDS_M = ((0.0, 10.0), (10.0, 20.0), (20.0, float("inf")))
HOLE_CLASSES = tuple(
    f"{surface}_{int(lo)}_{'inf' if hi == float('inf') else int(hi)}m"
    for surface in ("object", "ground")
    for lo, hi in RANGE_BANDS_M
)
"""Class names: ``object_0_10m``, ``object_10_20m``, ``object_20_infm``, ``ground_...`` alike."""
NEAR_CLASSES = ("object_0_10m", "object_10_20m")
"""The classes the near-object share counts (not ground, closer than 20 m)."""


def _classify(range_m: np.ndarray, ground: np.ndarray) -> np.ndarray:
    """Class index (into :data:`HOLE_CLASSES`) of each (range, is-ground) pair; -1 for a NaN range."""
    band = np.full(range_m.shape, -1, np.int64)
    for i, (lo, hi) in enumerate(RANGE_BANDS_M):
        band[(range_m >= lo) & (range_m < hi)] = i
    cls = np.where(ground, len(RANGE_BANDS_M), 0) + band
    return np.where(band >= 0, cls, -1)


def class_counts(
    return_range_m: np.ndarray,
    return_ground: np.ndarray,
    hole_range_m: np.ndarray,
    hole_ground_share: np.ndarray,
) -> dict[str, tuple[int, int]]:
    """(returns, holes) per class: returns by their own range and ground flag, holes by their returning
    neighbours' median range and ground share (>= 0.5: ground)."""
    rc = _classify(np.asarray(return_range_m, float), np.asarray(return_ground, bool))
    hc = _classify(np.asarray(hole_range_m, float), np.asarray(hole_ground_share, float) >= 0.5)
    n = len(HOLE_CLASSES)
    nr = np.bincount(rc[rc >= 0], minlength=n)
    nh = np.bincount(hc[hc >= 0], minlength=n)
    return {name: (int(nr[i]), int(nh[i])) for i, name in enumerate(HOLE_CLASSES)}


def hole_rates(counts: dict[str, tuple[int, int]]) -> dict[str, float | None]:
    """holes / (holes + returns) per class (None for an empty class)."""
    return {k: (h / (r + h) if r + h else None) for k, (r, h) in counts.items()}


def near_share_on_layout(
    rates: dict[str, float | None], layout_counts: dict[str, tuple[int, int]]
) -> float | None:
    """The near-object share of holes that ``rates`` give on a scene whose returns per class are those
    of ``layout_counts``: each class is expected ``returns x rate / (1 - rate)`` holes. None when a class
    the layout fills has no rate, or no hole is expected."""
    expected: dict[str, float] = {}
    for k, (n_ret, _) in layout_counts.items():
        rate = rates.get(k)
        if n_ret == 0:
            expected[k] = 0.0
            continue
        if rate is None or rate >= 1.0:
            return None
        expected[k] = n_ret * rate / (1.0 - rate)
    total = sum(expected.values())
    return sum(expected[k] for k in NEAR_CLASSES) / total if total > 0 else None
