"""The CPU waveform search in one compiled pass over the pulses (``_waveform_pulses``).

:func:`pulse_returns` gives what :func:`rt_lidar.kernels.waveform.waveform_returns` gives on NumPy arrays,
to the bit (``tests/kernels/test_waveform_pulses.py``): clusters, sampled waveforms (NumPy's own float32
exp), peaks and their refinement, echo pulse widths, the noisy detection, the return selection and
the echo naming each return, one pulse at a time with the GIL released, so two frames' searches run
on two cores. The pulses whose candidates tie in height (where the result hangs on the order NumPy's
argsort gives equal elements) are flagged by the kernel and run through the NumPy code alone.
None when off or not built, or for input it does not take; the caller then runs the NumPy code.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rt_lidar.kernels.echo_table import echo_order
from rt_lidar.kernels.np_loops import LoopCheck

if TYPE_CHECKING:
    from rt_lidar.kernels.waveform import Returns

try:
    from rt_lidar.kernels import _waveform_pulses as _c
except ImportError:  # built without a C compiler: the NumPy code runs
    _c = None  # type: ignore[assignment]

__all__ = ["KINDS", "available", "pulse_returns", "waveform_returns"]

KINDS = {"strongest": 0, "last": 1, "first": 2, "strongest_last": 3, "two_strongest": 4, "multi": 5}
"""The return selections of :func:`rt_lidar.kernels.waveform.select_returns` the kernel knows."""

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled search off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` switches every twin off)."""

_loops_ok = LoopCheck(
    _c, (np.exp, np.log), [(np.exp, np.float32), (np.exp, np.float64), (np.log, np.float32)]
)


def available() -> bool:
    """Whether the compiled search runs (built, on, and NumPy's exp and log loops found)."""
    return enabled and _loops_ok()


Fallback = Callable[[np.ndarray, np.ndarray, Any], tuple[np.ndarray, ...]]
"""The NumPy search of some pulses: ``(t_ns, amp, noise) -> Returns`` fields."""


def pulse_returns(
    t_ns: Any,
    amp: Any,
    width_ns: float,
    threshold_w: float,
    search_w: float,
    kind: str,
    min_separation_ns: float,
    max_returns: int,
    noise: Any,
    fallback: Fallback,
) -> tuple[np.ndarray, ...] | None:
    """The fields ``(pulse, return_id, t_ns, amp, epw_ns, echo)`` of the
    :class:`~rt_lidar.kernels.waveform.Returns` of (P, E) echoes ``t_ns``, ``amp`` (float32), peaks
    searched down to ``search_w`` and, with ``noise`` (:class:`~rt_lidar.kernels.waveform.Noise`),
    detected against ``threshold_w``; the pulses the kernel leaves to NumPy go through ``fallback``.
    None when the compiled search does not run or take these arrays (the caller runs the NumPy code)."""
    if not isinstance(t_ns, np.ndarray) or not isinstance(amp, np.ndarray) or not available():
        return None
    if kind not in KINDS or amp.dtype != np.float32 or t_ns.ndim != 2 or amp.shape != t_ns.shape:
        return None
    p, e = t_ns.shape
    if p == 0 or e == 0:
        return None
    from rt_lidar.kernels.waveform import CLUSTER_GAP_SIGMA, MAX_SPAN_BINS, PAD_SIGMA, pulse_sigma_ns

    t64 = np.ascontiguousarray(t_ns, np.float64)
    a32 = np.ascontiguousarray(amp)
    order = None
    if e != 2:  # NumPy's sort of each row (its order of equal times is the NumPy code's)
        order = echo_order(t64, a32)  # as NumPy's sort orders what the search reads of each row
    sigma = pulse_sigma_ns(width_ns)
    dt = sigma / 2.0
    sig_w = z = None
    d = 0
    epw_c = 0.0
    shot = 0.0
    if noise is not None:
        sig_w = np.ascontiguousarray(noise.sigma_w, np.float64)
        z = np.ascontiguousarray(noise.standard_normal, np.float64)
        if sig_w.shape != (p,) or z.ndim != 2 or z.shape[0] != p or z.shape[1] == 0:
            return None
        d = z.shape[1]
        shot = float(noise.shot_w)
        epw_c = 8.0 * sigma * sigma * math.log(threshold_w / search_w)
    consts = np.array(
        [
            CLUSTER_GAP_SIGMA * sigma,
            MAX_SPAN_BINS * dt,
            PAD_SIGMA * sigma,
            2 * PAD_SIGMA * sigma,
            dt,
            -0.5 / (sigma * sigma),
            sigma * sigma,
            epw_c,
            shot,
            float(threshold_w),
            float(min_separation_ns),
            float(search_w),
        ],
        np.float64,
    )
    r = 1 if KINDS[kind] <= 2 else (2 if KINDS[kind] <= 4 else max(int(max_returns), 1))
    pulse, echo = np.empty(p * r, np.int64), np.empty(p * r, np.int64)
    rid = np.empty(p * r, np.uint8)
    t_out, a_out, w_out = np.empty(p * r), np.empty(p * r, np.float32), np.empty(p * r, np.float32)
    flagged = np.empty(p, np.uint8)
    n, n_fb = _c.pulse_returns(
        t64, a32, order, sig_w, z, p, e, d, consts, KINDS[kind], int(max_returns), r,
        pulse, rid, t_out, a_out, w_out, echo, flagged,
    )  # fmt: skip
    out = [pulse[:n], rid[:n], t_out[:n], a_out[:n], w_out[:n], echo[:n]]
    if n_fb:
        rows = np.flatnonzero(flagged)
        sub_noise = None if noise is None else type(noise)(sig_w[rows], noise.shot_w, z[rows])  # type: ignore[index]
        sub = fallback(t_ns[rows], amp[rows], sub_noise)
        parts = [np.concatenate([a, b]) for a, b in zip(out, [rows[sub[0]], *sub[1:]], strict=True)]
        order_out = np.argsort(parts[0], kind="stable")
        out = [x[order_out] for x in parts]
    return tuple(out)


def waveform_returns(
    t_ns: Any,
    amp: Any,
    width_ns: float,
    threshold_w: float,
    kind: str,
    min_separation_ns: float,
    max_returns: int = 3,
    noise: Any = None,
) -> Returns | None:
    """:func:`rt_lidar.kernels.waveform.waveform_returns` of NumPy arrays by the compiled search (the
    pulses it leaves to NumPy through the NumPy code); None when it does not run or take these arrays
    (the caller then runs the NumPy code: :class:`rt_lidar.backend.CompiledBackend` makes the choice)."""
    if not available():
        return None
    from rt_lidar.kernels.waveform import Returns, _waveform_returns, search_level

    search = search_level(threshold_w, noise)

    def numpy_search(t_sub: Any, a_sub: Any, noise_sub: Any) -> tuple[Any, ...]:
        args = (width_ns, threshold_w, kind, min_separation_ns, max_returns, noise_sub)
        return tuple(_waveform_returns(t_sub, a_sub, *args, search=search))

    with np.errstate(invalid="ignore", over="ignore"):  # as waveform_returns: absent echoes are masked
        args = (width_ns, threshold_w, search, kind, min_separation_ns, max_returns, noise, numpy_search)
        got = pulse_returns(t_ns, amp, *args)
    return None if got is None else Returns(*got)
