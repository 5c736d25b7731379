"""The echo model's path factor in one compiled pass (``_path_factor``), where it was built.

:func:`path_factor` gives what :meth:`rt_lidar.physics.echo.EchoModel.path_factor`'s NumPy code gives
(clear air's two-way transmission times the receiver's range law and its lens's focus,
:mod:`rt_lidar.physics.receiver_range`, :mod:`rt_lidar.physics.receiver_focus`), bit for bit
(``tests/rt_lidar/test_path_factor_fused.py``), or None when off or given an array it does not take
(then the NumPy code runs). The physics computes it ~4 times a frame over every ray (object, glass and
ghost echoes, detections): ~10 NumPy passes in float64 each, a fifth of an HDL-64E frame's physics.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from rt_lidar.kernels.np_loops import LoopCheck
from rt_lidar.physics.receiver_focus import beam_inverse_focus, focus_parameters
from rt_lidar.physics.receiver_range import range_exponent
from rt_lidar.sensor.presets import SensorPreset

try:
    from rt_lidar.physics import _path_factor as _c
except ImportError:  # built without a C compiler: the NumPy code runs
    _c = None  # type: ignore[assignment]

__all__ = ["available", "beam_focus", "inverse_focus", "path_factor"]

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled step off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` switches every twin off)."""

_loops_ok = LoopCheck(_c, (np.exp, np.power), [(np.exp, np.float32), (np.power, np.float64)])


def available() -> bool:
    """Whether the compiled path factor runs (built, on, and NumPy's exp and power loops found)."""
    return enabled and _loops_ok()


@functools.lru_cache(maxsize=64)
def _preset_terms(preset: SensorPreset) -> tuple[int, float, float, int, float, float, float]:
    """``(has_gain, R10, 2 - n, has_focus, 1 / F, aperture, spot^2)`` of ``preset``'s receiver, as
    :func:`~rt_lidar.physics.receiver_range.receiver_range_gain` and
    :func:`~rt_lidar.physics.receiver_focus.focus_gain` compute them."""
    n = range_exponent(preset)
    has_gain = n != 2.0
    r10 = float(preset.range.range_10pct_m) if has_gain and preset.range.range_10pct_m is not None else 1.0
    focus = focus_parameters(preset)
    if focus is None:
        return int(has_gain), r10, 2.0 - n, 0, 0.0, 0.0, 1.0
    f, aperture, spot = focus
    return int(has_gain), r10, 2.0 - n, 1, 1.0 / f, aperture, spot * spot


def path_factor(preset: SensorPreset, range_m: Any, extinction_per_m: Any) -> np.ndarray | None:
    """``two_way_transmission(range_m, a) * receiver_range_gain(preset, range_m)`` (float32, one per
    range), or None when off or ``range_m`` is not a 1-D float32 NumPy array (or ``a`` not a float)."""
    if not (
        available()
        and isinstance(range_m, np.ndarray)
        and range_m.dtype == np.float32
        and range_m.ndim == 1
        and type(extinction_per_m) is float
    ):
        return None
    terms = _preset_terms(preset)
    out = np.empty(range_m.shape[0], np.float32)
    _c.path_factor(np.ascontiguousarray(range_m), out, out.shape[0], -2.0 * extinction_per_m, *terms)
    return out


@functools.lru_cache(maxsize=64)
def inverse_focus(preset: SensorPreset) -> np.ndarray | None:
    """:func:`~rt_lidar.physics.receiver_focus.beam_inverse_focus` of ``preset``, built once (read-only):
    the physics asks for it ~4 times a frame."""
    inv = beam_inverse_focus(preset)
    if inv is not None:
        inv.flags.writeable = False
    return inv


def beam_focus(preset: SensorPreset, inv: np.ndarray, ring: Any, range_m: Any) -> np.ndarray | None:
    """``beam_focus_ratio(np, preset, inv, ring, range_m)`` as float32 (what
    :meth:`rt_lidar.physics.echo.EchoModel.beam_focus` gives), or None when off, given arrays it does not
    take (1-D float32 ranges, uint16 rings) or a ring past ``inv`` (np.take raises there)."""
    if not (
        available()
        and isinstance(range_m, np.ndarray)
        and range_m.dtype == np.float32
        and range_m.ndim == 1
        and isinstance(ring, np.ndarray)
        and ring.dtype == np.uint16
        and ring.shape == range_m.shape
        and inv.dtype == np.float64
        and inv.ndim == 1
    ):
        return None
    o = preset.optics
    spot = max(0.5e-3 * (o.beam_divergence_h_mrad + o.beam_divergence_v_mrad), 1e-6)
    f0 = o.receiver_focus_m
    out = np.empty(range_m.shape[0], np.float32)
    ok = _c.beam_focus(
        np.ascontiguousarray(range_m),
        np.ascontiguousarray(ring),
        np.ascontiguousarray(inv),
        out,
        out.shape[0],
        inv.shape[0],
        int(f0 is not None),
        0.0 if f0 is None else 1.0 / float(f0),
        float(o.receiver_aperture_m),
        spot * spot,
    )
    return out if ok else None
