"""Received power from the laser radar equation, detection, range noise and the sensor's output scale.

Monostatic lidar: the direction back to the receiver is the incidence direction, so every BRDF term is a
function of the incidence angle alone. With an extended target filling the beam (cross-section
sigma = 4 pi f_BRDF A; a Lambertian reflector of reflectivity rho sends rho P cos(theta) / pi per
steradian, and the receiver aperture pi D_r^2 / 4 subtends pi D_r^2 / (4 R^2) of them):

    P_r = P_e * D_r^2 * eta * T_atm * S / (4 R^2),   T_atm = exp(-2 a R)

where ``S = pi * f_BRDF * cos(theta)`` is the *effective reflectance*. A Lambertian surface of
reflectivity rho gives ``S = rho * cos(theta)``; retro-reflective sheeting and specular lobes add terms
that can exceed 1 (brighter than a white Lambertian).
"""

from __future__ import annotations

from typing import Any

from rt_lidar.kernels.xp import array_module

__all__ = [
    "SPEED_OF_LIGHT",
    "apply_range_noise",
    "calibrated_reflectivity_output",
    "effective_reflectance",
    "leading_edge_advance_ns",
    "leading_edge_walk_m",
    "raw_intensity_output",
    "raw_reading_lookup",
    "received_power",
    "received_power_output",
    "sensor_constant",
    "two_way_transmission",
]

SPEED_OF_LIGHT = 299_792_458.0


def sensor_constant(peak_power_w: float, receiver_aperture_m: float, system_efficiency: float) -> float:
    """``K = P_e D_r^2 eta / 4`` (W m^2): a white Lambertian target filling the beam at R returns K / R^2
    (the one place the radar equation's constant lives; an earlier version divided by 16)."""
    return peak_power_w * receiver_aperture_m**2 * system_efficiency / 4.0


def effective_reflectance(
    cos_incidence: Any,
    material: Any,
    diffuse: Any,
    retro_gain: Any,
    retro_exponent: Any,
    specular_gain: Any,
    specular_exponent: Any,
) -> Any:
    """``S = pi f_BRDF cos(theta)`` of a Lambertian + retro-reflective + specular surface, per point.

    ``material`` (N,) indexes the per-material tables (M,): ``diffuse`` is the Lambertian reflectivity at
    the sensor's wavelength (0..1); the retro term ``retro_gain * cos^retro_exponent`` models glass-bead /
    prismatic sheeting, whose return stays high over a wide entrance angle; the specular term
    ``specular_gain * cos^specular_exponent`` a mirror-like lobe that only answers near normal incidence
    (chrome, clear coat, glass). Lobe terms are evaluated only for points whose material has them.
    """
    xp = array_module(cos_incidence)
    c = xp.clip(cos_incidence, 0.0, 1.0)
    s = xp.take(diffuse, material) * c
    for gain, exponent in ((retro_gain, retro_exponent), (specular_gain, specular_exponent)):
        if not bool((gain > 0).any()):  # no material of the scene has this lobe
            continue
        sel = xp.flatnonzero(xp.take(gain, material) > 0)
        if sel.size:
            m = xp.take(material, sel)
            s[sel] += xp.take(gain, m) * xp.take(c, sel) ** xp.take(exponent, m)
    return s


def two_way_transmission(range_m: Any, extinction_per_m: Any) -> Any:
    """Two-way atmospheric transmission ``exp(-2 a R)``."""
    xp = array_module(range_m)
    return xp.exp(-2.0 * extinction_per_m * range_m)


def received_power(
    range_m: Any,
    effective_refl: Any,
    transmission: Any,
    peak_power_w: float,
    receiver_aperture_m: float,
    system_efficiency: float,
    footprint_fraction: Any = 1.0,
) -> Any:
    """Received power in watts of an extended target (laser radar equation, see the module docstring).

    ``footprint_fraction`` is the share of the beam's footprint that lands on the target (1 for a single
    central ray; sub-ray weights when the beam is split).
    """
    xp = array_module(range_m)
    r = xp.maximum(range_m, 1e-3)
    k = sensor_constant(peak_power_w, receiver_aperture_m, system_efficiency)
    return k * transmission * effective_refl * footprint_fraction / (r * r)


def apply_range_noise(
    range_m: Any,
    standard_normal: Any,
    accuracy_m: float,
    power_w: Any,
    noise_sigma_w: Any,
    pulse_sigma_ns: float,
) -> Any:
    """Measured range: true range plus Gaussian noise that grows as 1 / sqrt(SNR).

    ``sigma^2 = accuracy^2 + (c/2 * sigma_pulse * noise / power)^2``: the peak time of an echo of height
    ``power`` on noise ``noise_sigma_w`` jitters by ``sigma_pulse * noise / power`` (1 / sqrt of the
    power SNR ``(power / noise)^2``), beside the datasheet accuracy that strong returns keep (clock,
    calibration). ``standard_normal`` holds the caller's N(0, 1) draws (kernels keep no random state, so
    a seeded generator upstream makes runs reproducible).
    """
    xp = array_module(range_m)
    jitter_m = (0.5e-9 * SPEED_OF_LIGHT * pulse_sigma_ns) * noise_sigma_w / xp.maximum(power_w, 1e-30)
    sigma = xp.sqrt(accuracy_m * accuracy_m + jitter_m * jitter_m)
    return range_m + sigma * standard_normal


def leading_edge_advance_ns(power_w: Any, threshold_w: float, pulse_sigma_ns: float) -> Any:
    """How much earlier than its peak a Gaussian echo crosses the threshold on its rising edge (ns).

    An echo ``P exp(-(t - t0)^2 / (2 s^2))`` reaches ``T`` at ``t0 - s sqrt(2 ln(P / T))``: 0 for an
    echo that just reaches the threshold, growing as the square root of the log of ``P / T`` (0 below
    the threshold, which detects nothing anyway).
    """
    xp = array_module(power_w)
    ratio = xp.maximum(power_w / threshold_w, 1.0)
    return pulse_sigma_ns * xp.sqrt(2.0 * xp.log(ratio))


def leading_edge_walk_m(power_w: Any, threshold_w: float, pulse_sigma_ns: float, saturation_w: float) -> Any:
    """Range walk (m, negative = reported closer) of a leading-edge discriminator whose walk is corrected
    from the measured amplitude up to the receiver's saturation ``saturation_w``.

    The raw walk ``-(c/2) leading_edge_advance_ns(P)`` spans metres over a scene's dynamic range; a
    sensor corrects it from the amplitude it measures (or the pulse width), so diffuse targets keep the
    datasheet accuracy. Above saturation the measured amplitude sticks at ``saturation_w`` and the
    correction with it, while the edge keeps moving earlier: what is left is
    ``-(c/2) [advance(P) - advance(min(P, P_sat))]``, 0 up to saturation and growing with the log of
    the power beyond (strong returns, retro-reflectors, read closer).
    """
    xp = array_module(power_w)
    p = xp.maximum(power_w, 0.0)
    raw = leading_edge_advance_ns(p, threshold_w, pulse_sigma_ns)
    corrected = leading_edge_advance_ns(xp.minimum(p, saturation_w), threshold_w, pulse_sigma_ns)
    return -(0.5e-9 * SPEED_OF_LIGHT) * (raw - corrected)


def calibrated_reflectivity_output(
    effective_refl: Any, diffuse_max: float, intensity_max: float, retro_saturation: float = 1000.0
) -> Any:
    """Velodyne-style calibrated reflectivity: 0..diffuse_max for diffuse targets (percent of a white
    Lambertian), diffuse_max+1..intensity_max on a log scale for retro-reflectors (S > 1).
    """
    xp = array_module(effective_refl)
    s = xp.maximum(effective_refl, 0.0)
    out = xp.minimum(s, 1.0) * diffuse_max
    bright = xp.nonzero(s > 1.0)[0]  # few points: the log only where it is needed
    if bright.size:
        frac = xp.clip(xp.log10(s[bright]) / xp.log10(retro_saturation), 0.0, 1.0)
        out[bright] = (diffuse_max + 1.0) + frac * (intensity_max - diffuse_max - 1.0)
    return out


def raw_reading_lookup(value: Any, step: Any, diffuse_max: float) -> Any:
    """Calibrated reflectivity as an on-board table from a coarser raw reading gives it: a diffuse
    value (at most ``diffuse_max``) is read in whole raw steps of ``step`` calibrated units (per point:
    its laser's step) and the table returns the step's calibrated value, ``round(value / step) step``
    (at most ``diffuse_max``); retro-reflectors' values above ``diffuse_max`` pass (float64)."""
    xp = array_module(value)
    v = xp.asarray(value, dtype=xp.float64)
    q = xp.asarray(step, dtype=xp.float64)
    return xp.where(v <= diffuse_max, xp.minimum(xp.round(v / q) * q, diffuse_max), v)


def raw_intensity_output(
    effective_refl: Any, gain: float, intensity_max: float, knee: float | None = None
) -> Any:
    """An uncalibrated reading (the HDL-64E S2's 8-bit intensity): ``gain`` per unit of measured
    reflectivity, linear up to ``knee`` (None: up to intensity_max) and above it compressed toward
    intensity_max, ``knee + w (1 - exp(-(x - knee) / w))`` with ``w = intensity_max - knee`` (slope 1 at
    the knee; only very bright returns, retro-reflectors, reach the top), clipped to 0..intensity_max
    (float64)."""
    xp = array_module(effective_refl)
    x = xp.maximum(xp.asarray(effective_refl, dtype=xp.float64), 0.0) * gain
    if knee is not None:
        w = float(intensity_max) - knee
        x = xp.where(x > knee, knee - w * xp.expm1((knee - x) / w), x)
    return xp.minimum(x, float(intensity_max))


def received_power_output(
    power_w: Any, threshold_w: float, intensity_max: float, counts_at_threshold: float = 10.0
) -> Any:
    """Signal-style output (Ouster ``signal``): counts proportional to received power, ``counts_at_threshold``
    at the detection threshold, saturating at ``intensity_max``.
    """
    xp = array_module(power_w)
    return xp.clip(power_w / threshold_w * counts_at_threshold, 0.0, intensity_max)
