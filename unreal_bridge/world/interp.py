"""``np.interp`` of every column of a table at once, bit for bit: the sensor's firing poses between their
1 ms samples, and a waypoint path's positions at each ray's own time."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

try:  # the compiled twin (``_cast_steps.interp_sorted``), an optional extension
    from . import _cast_steps as _c
except ImportError:  # built without a C compiler: the NumPy code gives the same bits
    _c = None  # type: ignore[assignment]

__all__ = ["compiled", "interp_columns", "table_slopes"]

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled step off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` in the environment starts
every process with the NumPy code, for comparing whole runs)."""


def compiled() -> Any:
    """The compiled world steps (``_cast_steps``) while :data:`enabled`, else None (not built, or off)."""
    return _c if enabled else None


def table_slopes(xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """The (K - 1, C) slopes between the rows of ``fp`` (K, C) at ``xp`` (K,), as ``np.interp`` computes
    them: ``(fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])``."""
    return np.ascontiguousarray(np.diff(fp, axis=0) / np.diff(xp)[:, None])


def interp_columns(
    t: np.ndarray, xp: np.ndarray, fp: np.ndarray, slopes: np.ndarray | None = None
) -> np.ndarray:
    """``np.interp(t, xp, fp[:, c])`` for every column ``c`` of ``fp`` (K, C), as one (N, C) float64
    array, bit for bit; ``slopes``: :func:`table_slopes` of the table, when the caller keeps them.

    For times in order (a frame's firings, a moving object's candidate rays) each run of ``t`` between
    two samples is computed as ``np.interp`` computes it, ``slope * (t - xp[j]) + fp[j]`` with the same
    slope, in one compiled pass (or whole slices without it): a third of the work of C separate
    searches. Anything else (times out of order, fewer times than samples, non-finite values, whose
    special cases ``np.interp`` handles) goes to ``np.interp``.
    """
    t = np.asarray(t, np.float64)
    xp = np.asarray(xp, np.float64)
    fp = np.asarray(fp, np.float64)
    n, k = t.shape[0], xp.shape[0]
    out = np.empty((n, fp.shape[1]), np.float64)
    if k < 2 or n < 4 * k or not np.isfinite(fp).all():
        return _np_interp(t, xp, fp, out)
    if slopes is None:
        slopes = table_slopes(xp, fp)
    if _c is not None and enabled:
        try:  # it checks the order itself, in the same pass
            _c.interp_sorted(
                np.ascontiguousarray(t),
                np.ascontiguousarray(xp),
                np.ascontiguousarray(fp),
                slopes,
                out,
                fp.shape[1],
            )
            return out
        except ValueError:  # times out of order
            return _np_interp(t, xp, fp, out)
    if not bool((t[1:] >= t[:-1]).all()):
        return _np_interp(t, xp, fp, out)
    lo = np.searchsorted(t, xp, side="left").tolist()  # first time at or after each sample
    hi = np.searchsorted(t, xp, side="right").tolist()  # first time after it
    out[: lo[0]] = fp[0]  # before the first sample: its value (np.interp's default left)
    for j in range(k - 1):
        out[lo[j] : hi[j]] = fp[j]  # exactly on a sample: its value, as np.interp gives it
        a, b = hi[j], lo[j + 1]
        if a < b:
            dt = t[a:b] - xp[j]
            run = out[a:b]
            for c in range(fp.shape[1]):
                np.add(dt * slopes[j, c], fp[j, c], out=run[:, c])
    out[lo[k - 1] :] = fp[k - 1]  # on or after the last sample: its value
    return out


def _np_interp(t: np.ndarray, xp: np.ndarray, fp: np.ndarray, out: np.ndarray) -> np.ndarray:
    for c in range(fp.shape[1]):
        out[:, c] = np.interp(t, xp, fp[:, c])
    return out
