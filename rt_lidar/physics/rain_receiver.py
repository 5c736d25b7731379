"""What of the rain a biaxial receiver can see: the share of the beam inside its field of view (the
near-field overlap for point scatterers) and the drop reflectance that stands for a drop-size-dependent
backscatter in the weather kernels.

A spinning lidar's transmitter and receiver sit side by side (the baseline ``b``); the receiver sees
the cone of full angle ``theta_r`` from its aperture ``D_r``, the beam spreads from the exit diameter
``d0`` at ``theta_t``. At range ``z`` the beam's cross-section is a disc of radius
``(d0 + theta_t z) / 2`` and the receiver's field a disc of radius ``(D_r + theta_r z) / 2`` whose centre
is ``b`` away; a drop (a point) returns only from their intersection, so the share of drops the
receiver can see at ``z`` is the intersection's area over the beam's (:func:`point_overlap`; the
geometric overlap function of Halldorsson & Langerholc 1978, Appl. Opt. 17(2) 240, for a uniform
beam). It is 0 near the sensor and reaches its far value only at tens of metres: that, not a dark
drop, is what hides most rain from a real sensor. Extended targets (fog) use the smooth overlap of
:data:`rt_lidar.physics.weather.OVERLAP_START_M`.

The kernels draw particles of one reflectance per species; rain's backscatter depends on the drop's
size (:func:`rt_lidar.physics.drop_backscatter.drop_reflectance`). :func:`equivalent_drop_rho` gives the
one reflectance with which the kernels' thinned Poisson process holds exactly as many detectable drops
per beam as the size-dependent backscatter gives (a bisection on the kernels' own table); what it does
not keep exactly is which sizes those drops have.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rt_lidar.kernels import weather as kw
from rt_lidar.physics.drop_backscatter import drop_reflectance
from rt_lidar.physics.rain_dsd import rain_distribution

__all__ = ["DROP_D_MIN_MM", "detectable_drops_exact", "equivalent_drop_rho", "point_overlap", "seen_table"]

DROP_D_MIN_MM = 0.1
"""Smallest drop counted (mm). Drops under 0.5 mm are spheres that keep their Mie glory (``rho`` 0.5-1 at
905 nm, :func:`rt_lidar.physics.drop_backscatter.drop_reflectance`), so a 0.3 mm drop returns as much
as a 1.7 mm oblate one; a 0.1 mm drop returns 1/16 of a 1.5 mm one and reaches a VLP-16's threshold
only inside ~1 m, where its receiver sees nothing. (The weather kernels draw drops of 0.5-6 mm with the
equivalent reflectance; only the count includes the small ones exactly.)"""


def point_overlap(
    z: Any, beam: tuple[float, float, float], baseline_m: float, fov_rad: float, aperture_m: float
) -> np.ndarray:
    """Share of the beam's cross-section (exit diameter, full divergences h and v in rad) at ranges
    ``z`` that lies in a receiver field of full angle ``fov_rad`` from an aperture of ``aperture_m``
    whose axis runs parallel ``baseline_m`` away: the area of the two discs' intersection over the
    beam's (the beam as a disc of its equal-area divergence)."""
    z = np.asarray(z, float)
    d0, th_h, th_v = beam
    rt = (d0 + math.sqrt(th_h * th_v) * z) / 2.0
    rr = (aperture_m + fov_rad * z) / 2.0
    d = float(baseline_m)
    inside = d <= np.abs(rr - rt)
    apart = d >= rt + rr
    with np.errstate(invalid="ignore", divide="ignore"):
        c1 = np.clip((d * d + rt * rt - rr * rr) / (2.0 * d * rt), -1.0, 1.0) if d > 0 else np.ones_like(z)
        c2 = np.clip((d * d + rr * rr - rt * rt) / (2.0 * d * rr), -1.0, 1.0) if d > 0 else np.ones_like(z)
        lens = (
            rt * rt * np.arccos(c1)
            + rr * rr * np.arccos(c2)
            - 0.5 * np.sqrt(np.maximum((-d + rt + rr) * (d + rt - rr) * (d - rt + rr) * (d + rt + rr), 0.0))
        )
    full = np.minimum(rt, rr) ** 2 * math.pi
    area = np.where(apart, 0.0, np.where(inside, full, lens))
    return np.asarray(np.clip(area / (math.pi * rt * rt), 0.0, 1.0))


def seen_table(
    z_min: float,
    z_max: float,
    beam: tuple[float, float, float],
    baseline_m: float,
    fov_rad: float,
    aperture_m: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(ranges, shares) of :func:`point_overlap` on a grid fine enough to interpolate (0.05 m)."""
    z = np.arange(max(z_min, 1e-3), max(z_max, z_min + 0.1) + 0.05, 0.05)
    return z, point_overlap(z, beam, baseline_m, fov_rad, aperture_m)


def detectable_drops_exact(
    rate_mm_h: float,
    wavelength_nm: float,
    k_sensor: float,
    threshold_w: float,
    a_total: float,
    beam: tuple[float, float, float],
    seen: tuple[np.ndarray, np.ndarray],
    z_min: float,
    z_max: float,
    gain: tuple[float, float] = (0.0, 1.0),
    n_z: int = 2048,
    n_d: int = 400,
) -> float:
    """Expected drops per beam whose echo reaches ``threshold_w`` (drop sizes from
    :func:`rt_lidar.physics.rain_dsd.rain_distribution`), with the size-dependent reflectance
    ``rho(D)`` at ``wavelength_nm``, the receiver's seen share and its range law ``gain`` (exponent,
    reference range: :func:`rt_lidar.kernels.weather.receiver_gain`): a direct sum over range and size."""
    n0, lam = rain_distribution(rate_mm_h)
    z = np.linspace(max(z_min, 1e-3), z_max, n_z)
    d = np.linspace(DROP_D_MIN_MM, kw.RAIN_D_MAX_MM, n_d)
    rho = drop_reflectance(d, wavelength_nm)
    width = kw.beam_diameter(z, *beam)
    fill = np.minimum((d[None, :] * 1e-3 / width[:, None]) ** 2, 1.0)
    law = np.exp(-2.0 * a_total * z) / (z * z) * kw.receiver_gain(z, *gain)
    power = k_sensor * rho[None, :] * fill * law[:, None]
    n_d_sizes = n0 * np.exp(-lam * d) * (d[1] - d[0])
    per_m = kw.beam_area(z, *beam) * np.interp(z, *seen) * ((power >= threshold_w) @ n_d_sizes)
    return float(np.trapezoid(per_m, z))


def equivalent_drop_rho(
    rate_mm_h: float,
    wavelength_nm: float,
    k_sensor: float,
    threshold_w: float,
    a_total: float,
    beam: tuple[float, float, float],
    seen: tuple[np.ndarray, np.ndarray],
    z_min: float,
    z_max: float,
    gain: tuple[float, float] = (0.0, 1.0),
) -> float:
    """The one drop reflectance with which :func:`rt_lidar.kernels.weather.detectable_particle_table`
    (power overlap 1, the same seen share) expects as many detectable drops per beam as
    :func:`detectable_drops_exact`: a bisection in log(rho) over 1e-4..10."""
    want = detectable_drops_exact(
        rate_mm_h, wavelength_nm, k_sensor, threshold_w, a_total, beam, seen, z_min, z_max, gain
    )
    n0, lam = rain_distribution(rate_mm_h)
    if want <= 0.0:
        return float(np.mean(drop_reflectance(np.array([1.0, 2.0]), wavelength_nm)))

    def expected(rho: float) -> float:
        _, _, cum = kw.detectable_particle_table(
            n0, lam, kw.RAIN_D_MIN_MM, kw.RAIN_D_MAX_MM, rho, k_sensor, threshold_w, a_total, beam,
            0.0, 1e-6, z_min, z_max, seen=seen, gain=gain,
        )  # fmt: skip
        return float(cum[-1])

    lo, hi = math.log(1e-4), math.log(10.0)
    for _ in range(40):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if expected(math.exp(mid)) < want else (lo, mid)
    return math.exp((lo + hi) / 2.0)
