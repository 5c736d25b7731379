"""Each pulse's echoes in time order, the order the compiled waveform search (:mod:`.waveform_pulses`)
walks them in: ``argsort(where(amp > 0, t, inf), axis=1)`` (absent echoes last).

:func:`echo_order` sorts the rows in one compiled pass (``_echo_order``) where it was built: the finite
times in ascending order, the absent echoes after them in column order (the search never reads their
order; NumPy's sort may order them otherwise). A row whose finite times tie, or that holds a NaN time,
is sorted by NumPy itself (its rule for equal elements), so the search's results are the same bits
either way (``tests/kernels/test_echo_order.py``).
"""

from __future__ import annotations

import os

import numpy as np

try:
    from rt_lidar.kernels import _echo_order as _c
except ImportError:  # built without a C compiler: NumPy's sort runs
    _c = None  # type: ignore[assignment]

__all__ = ["MAX_ECHOES", "available", "echo_order", "numpy_echo_order"]

MAX_ECHOES = 16
"""Echoes a pulse up to which the compiled pass sorts (an insertion sort); wider tables go to NumPy."""

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled pass off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` switches every twin off)."""


def available() -> bool:
    """Whether the compiled pass runs."""
    return _c is not None and enabled


def numpy_echo_order(t_ns: np.ndarray, amp: np.ndarray) -> np.ndarray:
    """(P, E) int64: NumPy's ``argsort`` of each row's times, absent echoes (amp <= 0) as +inf."""
    return np.ascontiguousarray(np.argsort(np.where(amp > 0, t_ns, np.inf), axis=1), np.int64)


def echo_order(t_ns: np.ndarray, amp: np.ndarray) -> np.ndarray:
    """(P, E) int64 order of each pulse's echoes ``t_ns`` (float64) of heights ``amp`` (float32) by time,
    absent echoes (amp <= 0) last: the compiled pass where it runs and takes the table (rows that tie
    sorted by NumPy), else :func:`numpy_echo_order`."""
    if not (
        available()
        and t_ns.ndim == 2
        and amp.shape == t_ns.shape
        and t_ns.dtype == np.float64
        and amp.dtype == np.float32
        and 0 < t_ns.shape[1] <= MAX_ECHOES
    ):
        return numpy_echo_order(t_ns, amp)
    p, e = t_ns.shape
    order = np.empty((p, e), np.int64)
    tied = np.empty(p, np.uint8)
    t64, a32 = np.ascontiguousarray(t_ns), np.ascontiguousarray(amp)
    if _c.echo_order(t64, a32, order, tied, e):
        rows = np.flatnonzero(tied)
        order[rows] = numpy_echo_order(t64[rows], a32[rows])
    return order
