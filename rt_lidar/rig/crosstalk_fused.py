"""The crosstalk echoes of one pair of sensors in one compiled pass (``_crosstalk``), where it was built.

:func:`echoes` gives what :func:`rt_lidar.rig.crosstalk.echoes` (the NumPy code) gives (the pairs of pulses
in each other's windows, their scattered and direct echoes, in its order), bit for bit
(``tests/rig/test_crosstalk_fused.py``), with the GIL released, or None when off or given arrays it
does not take; the compiled backend (:meth:`rt_lidar.backend.CompiledBackend.crosstalk_echoes`) then
runs the NumPy code.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from rt_lidar.kernels.np_loops import LoopCheck

try:
    from rt_lidar.rig import _crosstalk as _c
except ImportError:  # built without a C compiler: the NumPy code runs
    _c = None  # type: ignore[assignment]

__all__ = ["available", "echoes", "world_directions"]

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled step off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` switches every twin off)."""

_loops_ok = LoopCheck(_c, (np.cos, np.exp), [(np.cos, np.float64), (np.exp, np.float64)])


def available() -> bool:
    """Whether the compiled step runs (built, on, and NumPy's cos and exp loops found)."""
    return enabled and _loops_ok()


def _ok(a: Any, dtype: Any, shape: tuple[int, ...]) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == dtype and a.shape == shape


def echoes(
    pa: Any,
    pb: Any,
    order: np.ndarray,
    lead_ns: float,
    window_ns: float,
    rho: np.ndarray,
    consts: tuple[float, ...],
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(A pulse index, false range m, received power W) of every echo of B's pulses ``pb`` in A's
    windows (A's pulses ``pa``; ``order``: B's pulses in time order, ``rho`` the hemispherical
    reflectance of each material, float64), as ``crosstalk.echoes`` computes them (the arguments from
    ``crosstalk.twin_arguments``); ``consts``: A's and B's half angles, cos of A's, the hidden tolerance,
    c (m/ns), c / 2, minus A's extinction, the scattered power's factor, half A's aperture, A's aperture
    area, the direct power's factor."""
    if not available() or len(consts) != 11:
        return None
    na, nb = int(pa.t_ns.shape[0]), int(pb.t_ns.shape[0])
    fields = [
        (pa.t_ns, np.int64, (na,)), (pa.origin, np.float64, (na, 3)), (pa.direction, np.float64, (na, 3)),
        (pa.range_m, np.float64, (na,)), (pa.cos_inc, np.float64, (na,)), (pb.t_ns, np.int64, (nb,)),
        (pb.origin, np.float64, (nb, 3)), (pb.direction, np.float64, (nb, 3)),
        (pb.range_m, np.float64, (nb,)),
        (pb.material, np.int64, (nb,)), (order, np.int64, (nb,)), (rho, np.float64, (rho.shape[0],)),
    ]  # fmt: skip
    if not all(_ok(a, d, s) for a, d, s in fields):
        return None
    c = np.ascontiguousarray
    lo, hi = np.empty(na, np.int64), np.empty(na, np.int64)
    # B's times in time order: its own array where they already are (``_Pulses.time_order``)
    in_order = getattr(pb, "in_time_order", False) and order is getattr(pb, "_order", None)
    t_sorted = c(pb.t_ns if in_order else pb.t_ns[order])
    total = _c.pair_bounds(c(pa.t_ns), t_sorted, na, nb, float(lead_ns), float(window_ns), lo, hi)
    out = [np.empty(total, d) for d in (np.int64, np.float64, np.float64) * 2]
    ns, nd = _c.echoes(
        lo, hi, c(order), c(pa.t_ns), c(pa.origin), c(pa.direction), c(pa.range_m), c(pa.cos_inc),
        c(pb.t_ns), c(pb.origin), c(pb.direction), c(pb.range_m), c(pb.material), c(rho),
        np.asarray(consts, np.float64), na, nb, int(rho.shape[0]), total, *out,
    )  # fmt: skip
    return (
        np.concatenate([out[0][:ns], out[3][:nd]]),
        np.concatenate([out[1][:ns], out[4][:nd]]),
        np.concatenate([out[2][:ns], out[5][:nd]]),
    )


def world_directions(quat: np.ndarray, d_sensor: np.ndarray) -> np.ndarray | None:
    """(N, 3) float64 unit world directions of sensor-frame directions ``d_sensor`` (N, 3) float32 rotated
    by wxyz quaternions ``quat`` (N, 4) float64, as ``_pulses`` makes them; None when off or for other
    arrays."""
    n = d_sensor.shape[0] if isinstance(d_sensor, np.ndarray) else -1
    if not available() or not _ok(d_sensor, np.float32, (n, 3)) or not _ok(quat, np.float64, (n, 4)):
        return None
    out = np.empty((n, 3))
    if n and quat.strides[0] == 0:  # one orientation broadcast to every pulse: read it once, not copied
        _c.rotate_unit(np.ascontiguousarray(quat[:1]), np.ascontiguousarray(d_sensor), n, out, True)
    else:
        _c.rotate_unit(np.ascontiguousarray(quat), np.ascontiguousarray(d_sensor), n, out)
    return out
