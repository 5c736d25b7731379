"""The waveform search's comparison and bookkeeping steps in one compiled pass (``_waveform_steps``).

:func:`peak_runs`, :func:`sampled_waves` and :func:`clusters` give what the NumPy lines they stand
for (in :func:`kernels.waveform._bucket_peaks` and :func:`kernels.waveform.cluster_echoes`) give, exactly
(``tests/kernels/test_waveform_steps.py`` holds them to it), or None when off or given an array they do
not take; the caller then runs the NumPy code.
"""

from __future__ import annotations

import os

import numpy as np

try:
    from rt_lidar.kernels import _waveform_steps as _c
except ImportError:  # built without a C compiler: the NumPy code runs
    _c = None  # type: ignore[assignment]

__all__ = ["available", "clusters", "peak_runs", "sampled_waves"]

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled step off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` in the environment starts
every process with the NumPy code, for comparing whole runs)."""


def available() -> bool:
    """Whether the compiled step runs."""
    return _c is not None and enabled


def peak_runs(
    wave: np.ndarray, threshold_w: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(ii, bi, below_lo, below_hi)`` of a bucket's sampled waveforms ``wave`` (n, b) float32: the
    local maxima at or above ``threshold_w`` in np.nonzero's order, and for each the last sample before
    it and the first after it below the threshold (-1 and b where there is none). None when the
    compiled step is off or ``wave`` is not a C-contiguous 2-D float32 array."""
    if not available() or wave.dtype != np.float32 or wave.ndim != 2 or not wave.flags.c_contiguous:
        return None
    n, b = wave.shape
    out = [np.empty(n * b, np.int64) for _ in range(4)]
    k = _c.peak_runs(wave, n, b, float(threshold_w), *out)
    ii, bi, lo, hi = (a[:k] for a in out)
    return ii, bi, lo, hi


def clusters(
    ts: np.ndarray, gap: float, span: float, pad: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, float] | None:
    """``(cid, start, spans, n_clusters, width)`` of echo times ``ts`` (p, e) float64 sorted along each
    row, as :func:`rt_lidar.kernels.waveform.cluster_echoes` makes them (``start`` and ``spans`` with all e
    columns; the first ``n_clusters`` are the clusters'). None when the compiled step is off or ``ts``
    is not a C-contiguous 2-D float64 array with rows and columns."""
    if (
        not available()
        or ts.dtype != np.float64
        or ts.ndim != 2
        or not ts.flags.c_contiguous
        or 0 in ts.shape
    ):
        return None
    p, e = ts.shape
    cid, start, spans = np.empty((p, e), np.int64), np.empty((p, e)), np.empty((p, e))
    n, width = _c.clusters(ts, p, e, float(gap), float(span), float(pad), cid, start, spans)
    return cid, start, spans, int(n), float(width)


def sampled_waves(
    cid: np.ndarray,
    t_ns: np.ndarray,
    amp: np.ndarray,
    start: np.ndarray,
    pi: np.ndarray,
    ci: np.ndarray,
    b: int,
    dt: float,
    coef: float,
) -> np.ndarray | None:
    """The waveforms (n, b) float32 of clusters (pi, ci) of the sorted echo tables ``cid``, ``t_ns``,
    ``amp`` (p, e), each sampled on ``b`` bins of ``dt`` from its grid start ``start`` (n,): the sum
    over its echoes of ``exp((coef * d) * d) * amp``, ``d`` the bin's time from the echo's, all in
    float32 and the exponential NumPy's own, as :func:`rt_lidar.kernels.waveform._bucket_peaks` computes them.
    None when the compiled step is off or an array is not of the types it takes."""
    arrays = ((cid, np.int64, 2), (t_ns, np.float64, 2), (amp, np.float32, 2), (start, np.float64, 1))
    if not available() or any(a.dtype != d or a.ndim != k or not a.flags.c_contiguous for a, d, k in arrays):
        return None
    if pi.dtype != np.int64 or ci.dtype != np.int64:
        return None
    pi, ci = np.ascontiguousarray(pi), np.ascontiguousarray(ci)
    (p, e), n = cid.shape, int(pi.shape[0])
    if n == 0 or t_ns.shape != (p, e) or amp.shape != (p, e):
        return None
    first, count = np.empty(n, np.int64), np.empty(n, np.int64)
    m = _c.members(cid, p, e, n, pi, ci, first, count)
    if m < 1:
        return None
    g = np.empty((n, m, b), np.float32)
    amp_m = np.empty((n, m), np.float32)
    _c.wave_args(t_ns, amp, start, pi, first, count, p, e, m, b, float(dt), float(coef), g, amp_m)
    np.exp(g, out=g)
    wave = np.empty((n, b), np.float32)
    _c.wave_sum(g, amp_m, n, m, b, wave)
    return wave
