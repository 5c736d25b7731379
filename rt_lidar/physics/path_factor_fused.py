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
from rt_lidar.physics.receiver_focus import TABLE_POINTS, beam_focus_table, focus_parameters
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
def _preset_terms(preset: SensorPreset) -> tuple[int, float, float, int, float, np.ndarray]:
    """``(has_gain, R10, 2 - n, has_focus, 1 / dr, focus table)`` of ``preset``'s receiver, as
    :func:`~rt_lidar.physics.receiver_range.receiver_range_gain` and
    :func:`~rt_lidar.physics.receiver_focus.focus_gain` compute them."""
    n = range_exponent(preset)
    has_gain = n != 2.0
    r10 = float(preset.range.range_10pct_m) if has_gain and preset.range.range_10pct_m is not None else 1.0
    focus = focus_parameters(preset)
    if focus is None:
        return int(has_gain), r10, 2.0 - n, 0, 1.0, np.ones(2)
    return int(has_gain), r10, 2.0 - n, 1, focus.inv_dr, np.ascontiguousarray(focus.table)


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
    has_gain, r10, expo, has_focus, inv_dr, table = _preset_terms(preset)
    out = np.empty(range_m.shape[0], np.float32)
    _c.path_factor(
        np.ascontiguousarray(range_m),
        out,
        out.shape[0],
        -2.0 * extinction_per_m,
        has_gain,
        r10,
        expo,
        has_focus,
        table,
        table.shape[0],
        inv_dr,
    )
    return out


def inverse_focus(preset: SensorPreset) -> np.ndarray | None:
    """:func:`~rt_lidar.physics.receiver_focus.beam_focus_table`'s table of ``preset`` (read-only, one row
    of ``TABLE_POINTS`` ranges per ring), built once: the physics asks for it ~4 times a frame; None when
    no beam sets its own focus."""
    params = beam_focus_table(preset)
    return None if params is None else params.table


def beam_focus(preset: SensorPreset, inv: np.ndarray, ring: Any, range_m: Any) -> np.ndarray | None:
    """``beam_focus_ratio(np, preset, inv, ring, range_m)`` as float32 (what
    :meth:`rt_lidar.physics.echo.EchoModel.beam_focus` gives; ``inv`` is :func:`inverse_focus`'s table),
    or None when off, given arrays it does not take (1-D float32 ranges, uint16 rings) or a ring past
    the table (np.take raises there)."""
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
    params = beam_focus_table(preset)
    assert params is not None
    out = np.empty(range_m.shape[0], np.float32)
    ok = _c.beam_focus(
        np.ascontiguousarray(range_m),
        np.ascontiguousarray(ring),
        np.ascontiguousarray(inv),
        out,
        out.shape[0],
        inv.shape[0] // TABLE_POINTS,
        TABLE_POINTS,
        params.inv_dr,
    )
    return out if ok else None
