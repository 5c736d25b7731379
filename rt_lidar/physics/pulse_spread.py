"""Pulse broadening on an oblique surface: the echo of a divergent beam spread over its footprint's depth.

A single ray per pulse puts the whole footprint at the range of its centre, so its echo is the emitted
pulse, delayed. A real footprint on an oblique surface lies at many ranges at once: a beam whose
angular profile has standard deviation ``s`` (across the direction in which the surface tilts away)
meets a plane at incidence ``i`` over a range depth of standard deviation

    sigma_R = R s tan(i)

(a ray ``t`` rad off the axis, towards the tilt, meets the plane at ``R (1 + t tan i)`` to first order).
The echo is the pulse convolved with that spread: for a Gaussian pulse of standard deviation
``sigma_p`` (from its FWHM) and a Gaussian footprint, a Gaussian of ``sqrt(sigma_p^2 + sigma_t^2)``,
``sigma_t = 2 sigma_R / c``. Its energy is the full-beam echo's; its peak, which a peak-detecting
receiver thresholds and reports, is lower by ``sigma_p / sqrt(sigma_p^2 + sigma_t^2)``, and its width
grows by the inverse. Echo width grows with incidence as waveform-recording scanners measure it (Jutzi
and Stilla 2003, ISPRS Archives 34(3/W13); Wagner et al. 2006, ISPRS J. Photogramm. Remote Sens. 60(2)
100-112: the width of Gaussian-decomposed echoes grows with the surface's slope across the footprint).

On a street this matters where the beam grazes the road: the HDL-64E's 2 mrad beam meeting the road
61 m away (incidence 88.4 deg) spreads over sigma_R = 1.1 m against its 5 ns pulse's 0.32 m, a peak
of 0.29 of the single-ray one; at 25 m, 0.87. The spread depends on the beam (divergence) and the pulse
(width), so sensors with a narrow vertical beam and a long pulse keep more of their far road.

The Gaussian beam's ``exp(-2 (t / w)^2)`` profile (``w`` the 1/e^2 half-divergence) has ``s = w / 2``;
a top-hat disc of radius ``w`` has the same second moment across any axis (``w / 2``). Without the
surface's normal the tilt is taken to lie in the beam's vertical plane (the ground's, which is what
a rotating lidar meets at grazing incidence), so the vertical divergence applies; a wall met at a
grazing azimuth spreads along the horizontal divergence instead (the same for circular beams).

Only pulses cast as one ray get the factor: a sub-ray bundle (``--sub-rays``, ``--beam full``'s
bundles) samples the footprint itself and sums its sub-rays' echoes in time.
"""

from __future__ import annotations

import math

import numpy as np

from rt_lidar.kernels.waveform import pulse_sigma_ns
from rt_lidar.kernels.xp import array_module
from rt_lidar.sensor.presets import SensorPreset

__all__ = [
    "C_M_PER_NS",
    "beam_sigma_rad",
    "echo_width_ns",
    "footprint_range_sigma_m",
    "peak_factor",
    "peak_factor_k",
]

C_M_PER_NS = 0.299792458
MIN_COS = 1e-4
"""Incidence cosines below this are taken at it (a ray along the surface has no finite spread)."""


def beam_sigma_rad(preset: SensorPreset) -> float:
    """Angular standard deviation (rad) of the beam's profile across the ground's tilt: a quarter of
    the vertical 1/e^2 full divergence (Gaussian; the same second moment for a top-hat disc)."""
    return 0.25e-3 * float(preset.optics.beam_divergence_v_mrad)


def footprint_range_sigma_m(preset: SensorPreset, range_m: np.ndarray, cos_inc: np.ndarray) -> np.ndarray:
    """Standard deviation (m) of the ranges over the footprint of a beam meeting a plane ``range_m``
    away at incidence cosine ``cos_inc``: ``R s tan(i)`` (float64; inf range gives inf)."""
    c = np.clip(np.abs(np.asarray(cos_inc, np.float64)), MIN_COS, 1.0)
    tan_i = np.sqrt(np.maximum(1.0 - c * c, 0.0)) / c
    with np.errstate(invalid="ignore"):
        return np.asarray(range_m, np.float64) * beam_sigma_rad(preset) * tan_i


def _filtered_sigma_ns(preset: SensorPreset) -> float:
    """Standard deviation (ns) of the echo the receiver thresholds off a surface square on: the pulse
    convolved with the receiver's impulse response (``pulse.receiver_response_ns``, 0 = none)."""
    pulse = pulse_sigma_ns(preset.pulse.width_ns)
    return math.hypot(pulse, pulse_sigma_ns(preset.pulse.receiver_response_ns))


def peak_factor(
    preset: SensorPreset, range_m: np.ndarray, cos_inc: np.ndarray, filtered: bool = True
) -> np.ndarray:
    """Peak of the broadened echo over the single-ray echo's, ``sigma_p / sqrt(sigma_p^2 + sigma_t^2)``
    (float32, in (0, 1]; 1 at normal incidence; 0 for rays that met nothing). The echo's width grows by
    the inverse. ``filtered``: the peak the receiver thresholds, that of the echo convolved with its
    impulse response (``pulse.receiver_response_ns``; a filter matched to the pulse keeps
    ``sqrt(2 sigma_p^2 / (2 sigma_p^2 + sigma_t^2))``): ``sigma_p`` is then the filtered pulse's; the
    optical echo's own peak (``filtered=False``) gives its width (:func:`echo_width_ns`).
    Written as ``1 / sqrt(1 + k R^2 (1 / cos^2 - 1))``, ``k = (2 s / (c sigma_p))^2``, in
    float32: it runs on every ray. NumPy or CuPy arrays (the device frame's physics), the same code."""
    xp = array_module(range_m, cos_inc)
    k = peak_factor_k(preset, filtered)
    c = xp.clip(xp.abs(xp.asarray(cos_inc, xp.float32)), np.float32(MIN_COS), np.float32(1.0))
    r = xp.asarray(range_m, xp.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        t = xp.reciprocal(c * c)
        t -= np.float32(1.0)
        t *= r * r
        t *= k
        t += np.float32(1.0)
        f = xp.reciprocal(xp.sqrt(t))
    return xp.where(xp.isnan(f), np.float32(0.0), f)


def peak_factor_k(preset: SensorPreset, filtered: bool = True) -> np.float32:
    """:func:`peak_factor`'s ``k = (2 s / (c sigma_p))^2`` (float32) of ``preset``'s beam and pulse."""
    sp = _filtered_sigma_ns(preset) if filtered else pulse_sigma_ns(preset.pulse.width_ns)
    return np.float32((2.0 * beam_sigma_rad(preset) / (C_M_PER_NS * sp)) ** 2)


def echo_width_ns(preset: SensorPreset, range_m: np.ndarray, cos_inc: np.ndarray) -> np.ndarray:
    """FWHM (ns) of the broadened echo off a plane ``range_m`` away at incidence cosine ``cos_inc``: the
    pulse's width over :func:`peak_factor` (float64; the pulse's own width at normal incidence)."""
    f = peak_factor(preset, range_m, cos_inc, filtered=False)
    return float(preset.pulse.width_ns) / np.maximum(f, 1e-6)
