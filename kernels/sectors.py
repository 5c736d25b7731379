"""Sector accumulation: splitting a time-sorted batch of firings at scan boundaries."""

from __future__ import annotations

from typing import Any

__all__ = ["scan_boundaries"]


def scan_boundaries(scan_index: Any) -> tuple[Any, Any]:
    """Runs of equal scan index in a sorted index array.

    Returns ``(indices, starts)``: the distinct scan indices in order and the offset where each run
    starts (``starts`` has one more entry, the array length, so run ``k`` is ``starts[k]:starts[k+1]``).
    """
    from rt_lidar.kernels.xp import array_module

    xp = array_module(scan_index)
    n = int(scan_index.shape[0])
    if n == 0:
        return xp.zeros(0, dtype=xp.int64), xp.zeros(1, dtype=xp.int64)
    change = xp.nonzero(scan_index[1:] != scan_index[:-1])[0] + 1
    starts = xp.concatenate([xp.zeros(1, dtype=xp.int64), change.astype(xp.int64), xp.asarray([n], xp.int64)])
    return scan_index[starts[:-1]], starts
