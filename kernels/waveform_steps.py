"""The waveform search's integer steps in one compiled pass (``_waveform_steps``), where it was built.

:func:`peak_runs` gives what the NumPy lines of :func:`kernels.waveform._bucket_peaks` it stands for
give, exactly (``tests/kernels/test_waveform_steps.py`` holds it to them), or None when off or given an
array it does not take; the caller then runs the NumPy code.
"""

from __future__ import annotations

import os

import numpy as np

try:
    from kernels import _waveform_steps as _c
except ImportError:  # built without a C compiler: the NumPy code runs
    _c = None  # type: ignore[assignment]

__all__ = ["available", "peak_runs"]

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
