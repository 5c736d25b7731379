"""What the sensor reports as intensity: measured from a noisy amplitude, through the receiver's gain and
compression, quantised to the sensor's reporting step (issue 40, docs/realism.md).

1. The amplitude is the echo power plus a draw of the receiver noise that decides detection
   (``sqrt(dark^2 + shot * P)``, :func:`rt_lidar.kernels.ambient.receiver_sigma_w`), held at least at the
   threshold (a detected echo crossed it): a surface never reads one flat value, and weak returns
   scatter most.
2. The measured reflectivity is the amplitude over a white full-beam target's power at that range.
3. ``calibrated_reflectivity`` (Velodyne) maps it to 0..diffuse_max and retro-reflectors above, a
   diffuse value read in whole steps of a coarser raw reading (``output.raw_step``, each laser its own:
   the on-board per-laser table; docs/realism.md change 41);
   ``raw_intensity`` (the HDL-64E S2's uncalibrated 8-bit intensity) reads it on the unit's own gain
   (``output.raw_gain``), linear up to ``output.raw_knee`` and compressed toward intensity_max above it;
   ``received_power`` (Ouster signal) counts photons in proportion to the amplitude, scaled by the
   near-field overlap (``output.near_field_m``) and compressed by a SPAD array's dead time
   (``output.saturation_counts``).
4. The value is rounded to ``output.intensity_step``, at least one step (calibrated Velodynes and
   Ouster never report a return as 0), and weak returns report 0 where the sensor does
   (``output.weak_zero_snr``: KITTI's HDL-64E S2).
5. Returns whose amplitude exceeds the receiver's saturation are flagged ``SATURATED``.
"""

from __future__ import annotations

import numpy as np

from rt_lidar.kernels import (
    calibrated_reflectivity_output,
    raw_intensity_output,
    raw_reading_lookup,
    received_power_output,
)
from rt_lidar.kernels.ambient import receiver_sigma_w
from rt_lidar.kernels.xp import array_module
from rt_lidar.points import PointFlag
from rt_lidar.sensor.presets import SensorPreset

__all__ = [
    "detection_table_steps",
    "laser_table_steps",
    "measure",
    "measured_amplitude",
    "reported_intensity",
    "saturated_flags",
]


def laser_table_steps(step: float, spread: float, lasers: int) -> np.ndarray:
    """Each laser's raw-reading step in calibrated units (float64, (lasers,)): ``step`` times
    ``1 + spread (2 u_i - 1)``, ``u_i`` the fractional part of ``(i + 1)`` times the golden ratio (a fixed,
    evenly spread sequence: laser i keeps its step in every run, and neighbouring lasers differ as the
    factory tables of different lasers do)."""
    golden = 0.5 * (1.0 + 5.0**0.5)
    u = np.mod(np.arange(1, lasers + 1, dtype=np.float64) * golden, 1.0)
    return np.asarray(step * (1.0 + spread * (2.0 * u - 1.0)), np.float64)


def detection_table_steps(preset: SensorPreset, laser: np.ndarray | None, m: int) -> np.ndarray | None:
    """The raw-reading step (float64, (m,), on ``laser``'s array module) of each of ``m`` detections by
    ``laser`` (their rings; None: every detection on the mean step), or None where the preset reports a
    continuous calibrated value (no ``output.raw_step``)."""
    out = preset.output
    if out.intensity != "calibrated_reflectivity" or out.raw_step is None:
        return None
    if laser is None:
        return np.full(m, float(out.raw_step), np.float64)
    xp = array_module(laser)
    lasers = max(len(preset.beams), int(laser.max()) + 1 if len(laser) else 1)
    table = xp.asarray(laser_table_steps(out.raw_step, out.raw_step_spread, lasers))
    return xp.take(table, xp.asarray(laser, dtype=xp.int64))


def measured_amplitude(
    preset: SensorPreset,
    power_w: np.ndarray,
    pulse_sigma_w: np.ndarray | None,
    standard_normal: np.ndarray,
) -> np.ndarray:
    """The amplitude (W, float64) each detected echo of height ``power_w`` is measured at: with the
    pulses' noise floors ``pulse_sigma_w`` (None: an ideal receiver, the height itself)."""
    xp = array_module(power_w)
    p = xp.asarray(power_w, dtype=xp.float64)
    if pulse_sigma_w is None:
        return p
    s = receiver_sigma_w(xp.asarray(pulse_sigma_w, dtype=xp.float64), preset.receiver.shot_w, p)
    return xp.maximum(p + s * standard_normal, preset.pulse.detection_threshold_w)


def reported_intensity(
    preset: SensorPreset,
    amplitude_w: np.ndarray,
    reflectivity: np.ndarray,
    range_m: np.ndarray,
    table_step: np.ndarray | None = None,
) -> np.ndarray:
    """The intensity (float32) the sensor reports for returns measured at ``amplitude_w`` with measured
    ``reflectivity`` at ``range_m``; ``table_step`` (float64 per return, calibrated reflectivity only:
    :func:`detection_table_steps`) reads diffuse values in whole steps of the raw reading."""
    xp = array_module(amplitude_w)
    out = preset.output
    thr = preset.pulse.detection_threshold_w
    if out.intensity == "calibrated_reflectivity":
        val = xp.asarray(
            calibrated_reflectivity_output(
                reflectivity, out.diffuse_max or out.intensity_max, out.intensity_max
            ),
            dtype=xp.float64,
        )
        if table_step is not None:
            val = raw_reading_lookup(val, xp.asarray(table_step), float(out.diffuse_max or out.intensity_max))
    elif out.intensity == "raw_intensity":
        val = raw_intensity_output(reflectivity, out.raw_gain or 1.0, out.intensity_max, out.raw_knee)
    else:
        x = xp.asarray(amplitude_w, dtype=xp.float64)
        if out.near_field_m is not None:
            r = xp.asarray(range_m, dtype=xp.float64) / out.near_field_m
            x = x * -xp.expm1(-r * r)
        counts = xp.asarray(
            received_power_output(x, thr, float("inf"), out.counts_at_threshold), dtype=xp.float64
        )
        if out.saturation_counts is not None:
            counts = counts / (1.0 + counts / out.saturation_counts)
        val = xp.minimum(counts, out.intensity_max)
    if out.intensity_step > 0:  # a detected return reads at least one step: 0 is the sensor's own word
        step = out.intensity_step
        val = xp.clip(xp.round(val / step) * step, step, out.intensity_max)
    if out.weak_zero_snr > 0:
        val = xp.where(xp.asarray(amplitude_w) < out.weak_zero_snr * thr, 0.0, val)
    return val.astype(np.float32)


def saturated_flags(preset: SensorPreset, amplitude_w: np.ndarray) -> np.ndarray:
    """``SATURATED`` (uint8) where the amplitude exceeds the receiver's saturation, else 0."""
    xp = array_module(amplitude_w)
    sat = preset.receiver.saturation(preset.pulse.detection_threshold_w)
    return xp.where(xp.asarray(amplitude_w) > sat, np.uint8(PointFlag.SATURATED), np.uint8(0)).astype(
        np.uint8
    )


def measure(
    preset: SensorPreset,
    power_w: np.ndarray,
    pulse_sigma_w: np.ndarray | None,
    pulse: np.ndarray,
    standard_normal: np.ndarray,
    reflectivity: np.ndarray,
    range_m: np.ndarray,
    flags: np.ndarray,
    laser: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps 1-5 for detections of height ``power_w`` of pulses ``pulse`` (noise floors
    ``pulse_sigma_w``, None: an ideal receiver; one ``standard_normal`` draw each), measured
    ``reflectivity`` at ``range_m``, by lasers ``laser`` (their rings, for each laser's raw-reading
    table; None: the mean step): (reflectivity scaled by the measured amplitude (float32), the
    reported intensity (float32), ``flags`` with SATURATED added). The pipeline runs it on its backend
    (:meth:`rt_lidar.backend.PhysicsBackend.measure_intensity`: this, or its compiled twin)."""
    sigma = None if pulse_sigma_w is None else pulse_sigma_w[pulse]
    xp = array_module(power_w)
    amp = measured_amplitude(preset, power_w, sigma, standard_normal)
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = xp.where(power_w > 0, amp / xp.asarray(power_w, dtype=xp.float64), 1.0)
    refl = (reflectivity * gain).astype(np.float32)
    steps = detection_table_steps(preset, laser, len(power_w))
    intensity = reported_intensity(preset, amp, refl, range_m, steps)
    return refl, intensity, flags | saturated_flags(preset, amp)
