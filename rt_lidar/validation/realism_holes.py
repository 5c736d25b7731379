"""Hole rates by surface class and range band: the raydrop placement statistic with the street's layout
taken out (docs/realism.md, change 30).

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

import itertools

import numpy as np

__all__ = [
    "FINE_BANDS_M",
    "HOLE_CLASSES",
    "RANGE_BANDS_M",
    "class_counts",
    "fine_counts",
    "hole_rates",
    "median_range_on_layout",
    "near_share_on_layout",
    "pooled_fine_rates",
]

Band = tuple[float, float]
RANGE_BANDS_M: tuple[Band, ...] = ((0.0, 10.0), (10.0, 20.0), (20.0, float("inf")))
_FINE_EDGES_M = (
    0.0,
    2.5,
    5.0,
    7.5,
    10.0,
    12.5,
    15.0,
    17.5,
    20.0,
    25.0,
    30.0,
    40.0,
    60.0,
    120.0,
    float("inf"),
)
FINE_BANDS_M: tuple[Band, ...] = tuple(itertools.pairwise(_FINE_EDGES_M))
"""Finer bands for the median range around holes on another layout."""


def _names(bands: tuple[Band, ...]) -> tuple[str, ...]:
    return tuple(
        f"{surface}_{lo:g}_{'inf' if hi == float('inf') else f'{hi:g}'}m"
        for surface in ("object", "ground")
        for lo, hi in bands
    )


HOLE_CLASSES = _names(RANGE_BANDS_M)
"""Class names: ``object_0_10m``, ``object_10_20m``, ``object_20_infm``, ``ground_...`` alike."""
NEAR_CLASSES = ("object_0_10m", "object_10_20m")
"""The classes the near-object share counts (not ground, closer than 20 m)."""


def _classify(range_m: np.ndarray, ground: np.ndarray, bands: tuple[Band, ...]) -> np.ndarray:
    """Class index (into ``_names(bands)``) of each (range, is-ground) pair; -1 for a NaN range."""
    band = np.full(range_m.shape, -1, np.int64)
    for i, (lo, hi) in enumerate(bands):
        band[(range_m >= lo) & (range_m < hi)] = i
    cls = np.where(ground, len(bands), 0) + band
    return np.where(band >= 0, cls, -1)


def class_counts(
    return_range_m: np.ndarray,
    return_ground: np.ndarray,
    hole_range_m: np.ndarray,
    hole_ground_share: np.ndarray,
) -> dict[str, tuple[int, int]]:
    """(returns, holes) per class: returns by their own range and ground flag, holes by their returning
    neighbours' median range and ground share (>= 0.5: ground)."""
    return _counts(return_range_m, return_ground, hole_range_m, hole_ground_share, RANGE_BANDS_M)


def fine_counts(
    return_range_m: np.ndarray,
    return_ground: np.ndarray,
    hole_range_m: np.ndarray,
    hole_ground_share: np.ndarray,
) -> dict[str, tuple[int, int]]:
    """:func:`class_counts` over :data:`FINE_BANDS_M`."""
    return _counts(return_range_m, return_ground, hole_range_m, hole_ground_share, FINE_BANDS_M)


def _counts(
    return_range_m: np.ndarray,
    return_ground: np.ndarray,
    hole_range_m: np.ndarray,
    hole_ground_share: np.ndarray,
    bands: tuple[Band, ...],
) -> dict[str, tuple[int, int]]:
    rc = _classify(np.asarray(return_range_m, float), np.asarray(return_ground, bool), bands)
    hc = _classify(np.asarray(hole_range_m, float), np.asarray(hole_ground_share, float) >= 0.5, bands)
    names = _names(bands)
    nr = np.bincount(rc[rc >= 0], minlength=len(names))
    nh = np.bincount(hc[hc >= 0], minlength=len(names))
    return {name: (int(nr[i]), int(nh[i])) for i, name in enumerate(names)}


def hole_rates(counts: dict[str, tuple[int, int]]) -> dict[str, float | None]:
    """holes / (holes + returns) per class (None for an empty class)."""
    return {k: (h / (r + h) if r + h else None) for k, (r, h) in counts.items()}


MIN_CLASS_RAYS = 30
"""A fine class with fewer classed rays takes its coarse class's rate (:func:`pooled_fine_rates`)."""


def pooled_fine_rates(
    fine: dict[str, tuple[int, int]], min_rays: int = MIN_CLASS_RAYS
) -> dict[str, float | None]:
    """:func:`hole_rates` of fine counts (over :data:`FINE_BANDS_M`), where a class with fewer than
    ``min_rays`` rays (returns + holes) takes the rate of the coarse class (:data:`RANGE_BANDS_M`, same
    surface) its band lies in, pooled over that class's fine bands: a handful of rays is chance, and two
    holes with no return (a rate of 1) would otherwise leave :func:`median_range_on_layout` undefined
    for any layout with returns there (change 37: the demo street's far ground at 60-120 m)."""
    rates = hole_rates(fine)
    names = _names(FINE_BANDS_M)
    pooled: dict[str, tuple[int, int]] = {}
    owner: dict[str, str] = {}
    for i, name in enumerate(names):
        surface = "ground" if i >= len(FINE_BANDS_M) else "object"
        lo, _ = FINE_BANDS_M[i % len(FINE_BANDS_M)]
        coarse = next(j for j, (clo, chi) in enumerate(RANGE_BANDS_M) if clo <= lo < chi)
        key = f"{surface}_{coarse}"
        owner[name] = key
        r, h = fine.get(name, (0, 0))
        pr, ph = pooled.get(key, (0, 0))
        pooled[key] = (pr + r, ph + h)
    coarse_rates = hole_rates(pooled)
    out: dict[str, float | None] = {}
    for name in names:
        r, h = fine.get(name, (0, 0))
        out[name] = rates.get(name) if r + h >= min_rays else coarse_rates[owner[name]]
    return out


def near_share_on_layout(
    rates: dict[str, float | None], layout_counts: dict[str, tuple[int, int]]
) -> float | None:
    """The near-object share of holes that ``rates`` give on a scene whose returns per class are those
    of ``layout_counts``: each class is expected ``returns x rate / (1 - rate)`` holes. None when a class
    the layout fills has no rate, or no hole is expected."""
    expected = _expected_holes(rates, layout_counts)
    if expected is None:
        return None
    total = sum(expected.values())
    return sum(expected[k] for k in NEAR_CLASSES) / total if total > 0 else None


def _expected_holes(
    rates: dict[str, float | None], layout_counts: dict[str, tuple[int, int]]
) -> dict[str, float] | None:
    out: dict[str, float] = {}
    for k, (n_ret, _) in layout_counts.items():
        rate = rates.get(k)
        if n_ret == 0:
            out[k] = 0.0
        elif rate is None or rate >= 1.0:
            return None
        else:
            out[k] = n_ret * rate / (1.0 - rate)
    return out


def median_range_on_layout(
    rates: dict[str, float | None], layout_counts: dict[str, tuple[int, int]]
) -> float | None:
    """The median range around holes that ``rates`` (over :data:`FINE_BANDS_M`) give on a scene whose
    returns per fine class are ``layout_counts``: the expected holes per band, the median read off
    their cumulative sum linearly within its band (the last band counts as 120-200 m). None where a
    class the layout fills has no rate (few rays of the scan met it), or no hole is expected."""
    expected = _expected_holes(rates, layout_counts)
    if expected is None:
        return None
    per_band = np.zeros(len(FINE_BANDS_M))
    for i, name in enumerate(_names(FINE_BANDS_M)):
        per_band[i % len(FINE_BANDS_M)] += expected.get(name, 0.0)
    total = per_band.sum()
    if total <= 0:
        return None
    cum = np.cumsum(per_band)
    i = int(np.searchsorted(cum, total / 2))
    lo, hi = FINE_BANDS_M[i]
    hi = min(hi, 200.0)
    before = cum[i - 1] if i else 0.0
    return float(lo + (hi - lo) * (total / 2 - before) / per_band[i])
