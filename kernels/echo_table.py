"""The waveform search's echo tables: each pulse's echoes gated by range and turned into round-trip
times (:func:`gated_tables`), and in time order, the order the compiled search (:mod:`.waveform_pulses`)
walks them in: ``argsort(where(amp > 0, t, inf), axis=1)`` (absent echoes last; :func:`echo_order`).

:func:`gated_tables` builds the (pulse, echo) tables from the physics' columns in one compiled pass,
the values :func:`numpy_gated_tables` gives, bit for bit.

:func:`echo_order` sorts the rows in one compiled pass (``_echo_table``) where it was built: the finite
times in ascending order, the absent echoes after them in column order (the search never reads their
order; NumPy's sort may order them otherwise). A row whose finite times tie, or that holds a NaN time,
is sorted by NumPy itself (its rule for equal elements), so the search's results are the same bits
either way (``tests/kernels/test_echo_table.py``).
"""

from __future__ import annotations

import os

import numpy as np

try:
    from rt_lidar.kernels import _echo_table as _c
except ImportError:  # built without a C compiler: NumPy's sort runs
    _c = None  # type: ignore[assignment]

__all__ = [
    "MAX_ECHOES",
    "available",
    "echo_order",
    "gated_tables",
    "numpy_echo_order",
    "numpy_gated_tables",
]

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


def numpy_gated_tables(
    ranges: list[np.ndarray],
    heights: list[np.ndarray],
    n_pulse: int,
    min_m: float,
    max_m: float,
    c_m_per_ns: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(P, E) float64 round-trip times (ns) and float32 heights of the echo columns ``ranges`` (m) and
    ``heights`` (W), block by block side by side (a block: P x k values, k a pulse): an echo outside
    the range gate [``min_m``, ``max_m``] (or at no finite range) gets time inf and height 0."""

    def table(cols: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([c.reshape(n_pulse, -1) for c in cols], axis=1)

    r_tab = table(ranges)
    a_tab = table(heights)
    gate = np.isfinite(r_tab) & (r_tab >= min_m) & (r_tab <= max_m)
    a_tab = np.where(gate, a_tab, np.float32(0))
    t_tab = r_tab.astype(np.float64)  # 2 r / c where gated, else inf (in place: the same values)
    t_tab *= 2.0
    t_tab /= c_m_per_ns
    t_tab[~gate] = np.inf
    return t_tab, a_tab


def gated_tables(
    ranges: list[np.ndarray],
    heights: list[np.ndarray],
    n_pulse: int,
    min_m: float,
    max_m: float,
    c_m_per_ns: float,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`numpy_gated_tables` in one compiled pass where it was built and takes the columns (float32,
    whole blocks of the pulses, the gate's limits Python floats), else by NumPy."""
    widths = [c.size // n_pulse if n_pulse else 0 for c in ranges]
    if not (
        available()
        and n_pulse > 0
        and 0 < len(ranges) == len(heights) <= 32
        and all(type(x) is float for x in (min_m, max_m, c_m_per_ns))
        and all(
            isinstance(r, np.ndarray)
            and isinstance(a, np.ndarray)
            and r.dtype == np.float32
            and a.dtype == np.float32
            and w > 0
            and r.size == a.size == w * n_pulse
            for r, a, w in zip(ranges, heights, widths, strict=True)
        )
    ):
        return numpy_gated_tables(ranges, heights, n_pulse, min_m, max_m, c_m_per_ns)
    e = sum(widths)
    t_tab, a_tab = np.empty((n_pulse, e), np.float64), np.empty((n_pulse, e), np.float32)
    cols_r = [np.ascontiguousarray(r).reshape(-1) for r in ranges]
    cols_a = [np.ascontiguousarray(a).reshape(-1) for a in heights]
    _c.gated_tables(
        cols_r, cols_a, np.array(widths, np.int64), n_pulse, min_m, max_m, c_m_per_ns, t_tab, a_tab
    )
    return t_tab, a_tab
