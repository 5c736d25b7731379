"""Ambient (sun) light at the receiver: background power, noise floor, false alarms, timing jitter.

Sunlight reflected by the surface a beam looks at reaches the detector through the receiver's band-pass
filter like the laser echo does, but continuously: a background power ``P_b`` whose shot noise
raises the receiver's noise floor, ``sigma^2 = sigma_dark^2 + 2 q F B P_b / R``
(:func:`receiver_sigma_w`). With a fixed threshold ``T`` a noise peak
exceeds it in one range cell with probability ``Q(T / sigma)``; over a gate of ``n`` cells a pulse
gives a false detection with ``1 - (1 - Q)^n``. True echoes near the threshold are lost or found at
random, and their range jitters by ``sigma_t = sigma_pulse * sigma / P``. Looking within a few degrees
of the sun itself, stray light saturates the receiver (blinding).

Lambertian surface radiance ``L = E rho max(0, n.s) / pi`` collected by aperture ``A_r`` and field of
view ``Omega_r``: ``P_b = eta A_r Omega_r L``.
"""

from __future__ import annotations

import math
from typing import Any

from rt_lidar.kernels.xp import array_module

__all__ = [
    "SKY_RADIANCE_FRACTION",
    "background_power",
    "band_irradiance_w_m2",
    "false_alarm_probability",
    "gaussian_tail",
    "receiver_sigma_w",
    "timing_jitter_ns",
]

SKY_RADIANCE_FRACTION = 0.03
"""Radiance of the clear sky in the near infrared relative to a white Lambertian surface in full sun."""
# Direct + diffuse solar spectral irradiance at ground (AM1.5, W m^-2 nm^-1 at ~100 klx)
_SOLAR_NM = (
    400.0,
    500.0,
    600.0,
    700.0,
    800.0,
    865.0,
    905.0,
    940.0,
    1000.0,
    1064.0,
    1300.0,
    1400.0,
    1550.0,
    1700.0,
)
_SOLAR_W = (1.10, 1.55, 1.50, 1.30, 1.10, 0.95, 0.80, 0.45, 0.75, 0.65, 0.40, 0.05, 0.27, 0.22)
FULL_SUN_LUX = 100_000.0


def band_irradiance_w_m2(illuminance_lux: float, wavelength_nm: float, bandwidth_nm: float) -> float:
    """Solar irradiance (W/m^2) within the receiver's band for a scene lit with ``illuminance_lux``."""
    w = min(max(wavelength_nm, _SOLAR_NM[0]), _SOLAR_NM[-1])
    for i in range(len(_SOLAR_NM) - 1):
        a, b = _SOLAR_NM[i], _SOLAR_NM[i + 1]
        if a <= w <= b:
            f = (w - a) / (b - a)
            spec = _SOLAR_W[i] * (1 - f) + _SOLAR_W[i + 1] * f
            break
    return illuminance_lux / FULL_SUN_LUX * spec * bandwidth_nm


def background_power(
    sun_cos: Any,
    diffuse: Any,
    hit: Any,
    irradiance_w_m2: float,
    aperture_m: float,
    efficiency: float,
    fov_h_rad: float,
    fov_v_rad: float,
) -> Any:
    """Background power (W) per ray: the lit surface's radiance, or the sky's for a miss."""
    xp = array_module(sun_cos)
    etendue = efficiency * math.pi * aperture_m**2 / 4.0 * math.pi * (fov_h_rad / 2.0) * (fov_v_rad / 2.0)
    radiance = xp.where(hit, diffuse * sun_cos, SKY_RADIANCE_FRACTION) * (irradiance_w_m2 / math.pi)
    return (etendue * radiance).astype(xp.float32)


def receiver_sigma_w(dark_sigma_w: Any, shot_w: float, power_w: Any) -> Any:
    """Receiver noise (W, 1 sigma) with ``power_w`` of background and/or signal on the detector:
    ``sqrt(dark^2 + shot_w * P)``, ``shot_w = 2 q F B / R`` (shot noise of the photocurrent, times the
    APD's excess noise factor F, over the bandwidth B, referred to optical watts by the responsivity R)."""
    xp = array_module(power_w)
    return xp.sqrt(dark_sigma_w * dark_sigma_w + shot_w * xp.maximum(power_w, 0.0))


def gaussian_tail(x: Any) -> Any:
    """Q(x) = P(N(0,1) > x) for x >= 0 (Abramowitz & Stegun 7.1.26 erfc, |error| < 1.5e-7)."""
    xp = array_module(x)
    z = xp.maximum(x, 0.0) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return 0.5 * poly * xp.exp(-z * z)


def false_alarm_probability(threshold_w: float, sigma_w: Any, n_cells: float) -> Any:
    """Probability that noise of std ``sigma_w`` exceeds the threshold in at least one of ``n_cells``."""
    xp = array_module(sigma_w)
    q = gaussian_tail(threshold_w / xp.maximum(sigma_w, 1e-30))
    return -xp.expm1(n_cells * xp.log1p(-xp.minimum(q, 1.0 - 1e-12)))


def timing_jitter_ns(pulse_sigma_ns: float, sigma_w: Any, power_w: Any) -> Any:
    """Peak-time jitter (1 sigma, ns) of an echo of height ``power_w`` on noise ``sigma_w``."""
    xp = array_module(sigma_w)
    return pulse_sigma_ns * sigma_w / xp.maximum(power_w, 1e-30)
