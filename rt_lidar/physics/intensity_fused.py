"""The intensity chain in one compiled pass (``_intensity_chain``), where it was built.

:func:`chain` gives what :func:`rt_lidar.physics.intensity_chain.measure` (the NumPy code) gives (the
measured amplitude, the reflectivity scaled by it, the reported intensity and the SATURATED flag), bit
for bit (``tests/rt_lidar/test_intensity_fused.py``), or None when off or given arrays it does not take;
the compiled backend (:meth:`rt_lidar.backend.CompiledBackend.measure_intensity`) then runs the NumPy
code.
"""

from __future__ import annotations

import math
import os

import numpy as np

from rt_lidar.kernels.np_loops import LoopCheck
from rt_lidar.physics.intensity_chain import detection_table_steps
from rt_lidar.points import PointFlag
from rt_lidar.sensor.presets import SensorPreset

try:
    from rt_lidar.physics import _intensity_chain as _c
except ImportError:  # built without a C compiler: the NumPy code runs
    _c = None  # type: ignore[assignment]

__all__ = ["RETRO_SATURATION", "available", "chain"]

RETRO_SATURATION = 1000.0
"""The effective reflectance at which calibrated reflectivity reaches its maximum (the default of
:func:`rt_lidar.kernels.intensity.calibrated_reflectivity_output`)."""

INTENSITY_KIND_CODES = {"calibrated_reflectivity": 0.0, "received_power": 1.0, "raw_intensity": 2.0}
"""The compiled chain's code of each ``output.intensity`` kind (its ``P_KIND`` parameter)."""

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled step off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` switches every twin off)."""

_loops_ok = LoopCheck(_c, (np.log10, np.expm1), [(np.log10, np.float32), (np.expm1, np.float64)])


def available() -> bool:
    """Whether the compiled chain runs (built, on, and NumPy's log10 and expm1 loops found)."""
    return enabled and _loops_ok()


def _params(preset: SensorPreset) -> np.ndarray:
    out, thr = preset.output, preset.pulse.detection_threshold_w
    kind = INTENSITY_KIND_CODES[out.intensity]
    raw = out.intensity == "raw_intensity"
    scale = (out.raw_gain or 1.0) if raw else (out.diffuse_max or out.intensity_max)
    return np.array(
        [
            preset.receiver.shot_w,
            thr,
            preset.receiver.saturation(thr),
            kind,
            scale,
            out.intensity_max,
            out.near_field_m or 0.0,
            out.counts_at_threshold,
            out.saturation_counts or 0.0,
            out.intensity_step,
            out.weak_zero_snr,
            float(np.log10(RETRO_SATURATION)),
            int(PointFlag.SATURATED),
            (out.raw_knee or 0.0) if raw else 0.0,
        ],
        np.float64,
    )


def chain(
    preset: SensorPreset,
    power_w: np.ndarray,
    pulse_sigma_w: np.ndarray | None,
    pulse: np.ndarray,
    standard_normal: np.ndarray,
    reflectivity: np.ndarray,
    range_m: np.ndarray,
    flags: np.ndarray,
    laser: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(reflectivity float32, intensity float32, flags uint8) of detections of height ``power_w``
    (float32), pulses ``pulse`` (int64) with noise floors ``pulse_sigma_w`` (None: an ideal receiver)
    and amplitude draws ``standard_normal`` (float64), measured ``reflectivity`` (float32) at
    ``range_m`` (float32), ``flags`` (uint8), by lasers ``laser`` (rings: each laser's raw-reading
    table, ``output.raw_step``). None when off or for arrays of other types."""
    m = power_w.shape[0] if isinstance(power_w, np.ndarray) else -1
    if not available() or m < 0 or preset.output.intensity not in INTENSITY_KIND_CODES:
        return None
    want = ((power_w, np.float32), (reflectivity, np.float32), (range_m, np.float32), (flags, np.uint8))
    if any(not isinstance(a, np.ndarray) or a.dtype != d or a.shape != (m,) for a, d in want):
        return None
    noisy = pulse_sigma_w is not None
    if noisy and (
        not isinstance(pulse_sigma_w, np.ndarray)
        or pulse_sigma_w.dtype != np.float64
        or pulse_sigma_w.ndim != 1
        or pulse.dtype != np.int64
        or pulse.shape != (m,)
        or standard_normal.dtype != np.float64
        or standard_normal.shape != (m,)
    ):
        return None
    if laser is not None and (not isinstance(laser, np.ndarray) or laser.shape != (m,)):
        return None
    params = _params(preset)
    if not math.isfinite(float(params.sum())):
        return None
    steps = detection_table_steps(preset, laser, m)
    refl_out, int_out, flags_out = np.empty(m, np.float32), np.empty(m, np.float32), np.empty(m, np.uint8)
    c = np.ascontiguousarray
    sig = c(pulse_sigma_w) if noisy else None
    idx, z = (c(pulse), c(standard_normal)) if noisy else (None, None)
    n_pulses = int(sig.shape[0]) if sig is not None else 0
    _c.chain(
        c(power_w), sig, idx, z, c(reflectivity), c(range_m), c(flags), params, m, n_pulses,
        refl_out, int_out, flags_out, steps,
    )  # fmt: skip
    return refl_out, int_out, flags_out
