"""The receiver's range law, fitted to both datasheet ranges where a datasheet gives two.

The laser radar equation gives an extended target's echo as ``rho / R^2`` (times clear air's
``exp(-2 a R)``), so one datasheet figure (a 10 % target at ``R10``) fixes the detection threshold and
with it every other range: an 80 % target would reach ``sqrt(8) R10 = 2.83 R10``. Real receivers do not
follow 1/R^2 exactly: the transmitter and receiver fields of view overlap fully only far out, the
receiver's lens is focused at a finite distance, the amplifier's gain and threshold change with time of
flight; the measured range effect of laser scanners is instrumental and differs from 1/R^2 (Kaasalainen
et al. 2011, Remote Sens. 3(10) 2207, doi:10.3390/rs3102207: "the range effect is strongly dominated by
instrumental factors"). Datasheets that give both figures say which way their receiver departs:
the HDL-64E S2's 50 m (10 %) and 120 m (80 %) are 2.4 R10 (far echoes weaker than 1/R^2), the OS1-64
gen 1's 40 m and 120 m are 3.0 R10 (near ones weaker: the overlap still grows), Livox Mid-40's 90 m and
260 m are 2.9 R10.

Here the receiver's efficiency over range is the power law ``g(R) = (R / R10)^(2 - n)`` that meets both
figures: with ``P = K rho exp(-2 a R) g(R) / R^2`` and the threshold at a 10 % target at R10,
``n = (ln 8 - 2 a (R80 - R10)) / ln(R80 / R10)``. g(R10) = 1, so the threshold and the 10 % figure are
unchanged; presets with one figure keep n = 2 (g = 1, the same bytes as before). Calibrated
reflectivity divides g out again (a vendor's calibration removes its receiver's range law), so only
detection and raw power (an Ouster's signal) see it.
"""

from __future__ import annotations

import math

import numpy as np

from rt_lidar.physics.receiver_focus import receiver_focus_gain
from rt_lidar.sensor.presets import CLEAR_AIR_EXTINCTION_PER_M, SensorPreset

__all__ = ["range_exponent", "receiver_range_gain"]


def range_exponent(preset: SensorPreset, extinction_per_m: float = CLEAR_AIR_EXTINCTION_PER_M) -> float:
    """The receiver's effective range exponent n (2 = the radar equation's 1/R^2): fitted so a 10 %
    target at ``range_10pct_m`` and an 80 % target at ``range_80pct_m`` return the same power in clear
    air; 2 when the preset gives only one figure."""
    r = preset.range
    if r.range_10pct_m is None or r.range_80pct_m is None:
        return 2.0
    r10, r80 = r.range_10pct_m, r.range_80pct_m
    return (math.log(8.0) - 2.0 * extinction_per_m * (r80 - r10)) / math.log(r80 / r10)


def receiver_range_gain(preset: SensorPreset, range_m: np.ndarray) -> np.ndarray | None:
    """``g(R) = (R / R10)^(2 - n)`` per range (float32), or None where the preset follows 1/R^2 (g = 1:
    callers skip the multiplication, so presets with one datasheet figure keep their bytes)."""
    n = range_exponent(preset)
    focus = receiver_focus_gain(preset, range_m)  # the lens's focus (issue 40, change 24)
    if n == 2.0:
        return focus
    r10 = preset.range.range_10pct_m
    assert r10 is not None
    r = np.maximum(np.asarray(range_m, np.float64), 1e-3)
    with np.errstate(over="ignore", invalid="ignore"):
        g = np.power(r / r10, 2.0 - n)
    g = np.where(np.isfinite(g), g, 0.0).astype(np.float32)
    return g if focus is None else g * focus
