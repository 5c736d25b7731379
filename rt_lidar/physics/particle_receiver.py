"""Which rain drops and snowflakes a biaxial lidar detects, range by range: the receiver's near-field
overlap for a point scatterer, the particle's size and backscatter, and the detection threshold.

A spinning lidar's transmitter and receiver lenses sit side by side, their axes a baseline ``b`` apart.
The beam leaves the transmitter with its real exit size ``d0`` and spreads at ``theta_h`` x ``theta_v``
(an ellipse ``d0 + theta_h z`` by ``d0 + theta_v z`` at range ``z``, as the weather kernels' beam; its
wide axis along the baseline, as on a spinning lidar whose beam is widest in azimuth and whose lenses
sit side by side), a Gaussian whose 1/e^2 widths those are (the preset's ``beam_profile``), its wing
included, or a top hat; or, where the preset states the exit (``optics.beam_exit_h_m`` x
``beam_exit_v_m``, the VLP-16's 12.7 x 9.5 mm), that exit lit evenly with each point of it spreading by
the divergences (:func:`_filled_exit_points`, docs/rain.md change 44). The receiver is focused at
infinity (or at the preset's ``optics.receiver_focus_m``, :func:`collected_fraction`): a detector of
angular size ``theta_r`` behind an aperture ``D_r``. A point (a drop) at range ``z`` and at
distance ``s`` from the receiver's axis sends light into the whole aperture; the detector takes the
rays whose direction lies within ``theta_r / 2`` of the axis, i.e. those through the part of the
aperture within ``theta_r z / 2`` of the point's foot. The share of the drop's light the detector
collects is the overlap of two discs (radius ``D_r / 2`` and ``theta_r z / 2``, ``s`` apart) over the
aperture's area (:func:`collected_fraction`): 1 far out on the axis, at most ``(theta_r z / D_r)^2``
near the sensor, where a near drop's image is blurred over many detector widths (the defocus of the
near field; Halldorsson & Langerholc 1978, Appl. Opt. 17, 240, for the geometric overlap of a biaxial
lidar; Rasshofer, Spies & Spies 2011, Adv. Radio Sci. 9, 49, and Wallace, Halimi & Buller 2020, IEEE
Trans. Veh. Technol., "Full waveform LiDAR for adverse weather conditions", for drops as discrete
scatterers in an automotive lidar's beam; Goodin et al. 2019, Electronics 8, 89, and Filgueira et al.
2017, Measurement 95, 143, for the measured effect of rain).

A drop of diameter ``D`` and Lambertian-equivalent backscatter ``rho(D)`` at (``z``, ``s``) returns
``P = K rho(D) (D / d_beam)^2 f(s, z) exp(-2 a z) g(z) / z^2`` (the project's radar equation,
:func:`rt_lidar.kernels.intensity.received_power`, with the beam's fill factor and the collected
share ``f``, and the Gaussian's irradiance over its mean where the drop sits); it is detected when ``P``
reaches the threshold. So near the sensor drops are seen only in the beam's wing that meets the
receiver's field, through a few per cent of their light (drops that fill much of the small near beam,
or small spheres with their glory), far out only the largest drops, and in between the most:
:func:`detectable_density` integrates that over the beam's cross-section and the drop sizes.

The weather kernels draw particles from a table of the expected number of detectable particles up to
each range (:func:`rt_lidar.kernels.weather.detectable_particle_table`'s form), which is what
:func:`particle_table` returns; what they do not keep exactly is each particle's echo power (they draw
it with one equivalent reflectance and the kernels' linear overlap, :func:`kernel_power_model`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import erf

from rt_lidar.kernels import weather as kw

__all__ = [
    "DENSITY_FLOOR",
    "GAUSSIAN_EXTENT",
    "ReceiverOptics",
    "collected_fraction",
    "detectable_density",
    "disc_overlap_area",
    "kernel_power_model",
    "particle_table",
]


GAUSSIAN_EXTENT = 1.6
"""A Gaussian beam is sampled out to 1.6 of its 1/e^2 radii (irradiance there 1.2 % of the mean)."""
DENSITY_FLOOR = 1e-3
"""Inside a particle table the density of detectable particles is held at this share of its peak at
least (they add ~0.1 % of the particles): the kernels invert the table in float32, which must not meet
a flat stretch where float64 (the per-ray reference) would place a particle elsewhere."""


@dataclass(frozen=True)
class ReceiverOptics:
    """The transmitter's beam and the receiver beside it (metres, full angles in rad)."""

    exit_diameter_m: float
    divergence_h_rad: float
    divergence_v_rad: float
    aperture_m: float
    fov_rad: float
    baseline_m: float
    gaussian: bool = False
    """The beam's irradiance is a Gaussian whose 1/e^2 widths are the divergences (else a top hat)."""
    focus_m: float | None = None
    """The distance the receiver lens is focused at (``optics.receiver_focus_m``); None: infinity."""
    filled_exit_m: tuple[float, float] | None = None
    """(along the baseline, across it): an exit aperture the beam fills evenly, each point of it
    sending the angular Gaussian (1/e^2 full angles the divergences, along and across in the same
    order: ``divergence_h_rad`` along the baseline). None: the Gaussian ellipse of widths ``d0 +
    theta z`` (:func:`_beam_points`)."""

    @property
    def beam(self) -> tuple[float, float, float]:
        """(exit diameter, h and v divergence) as the weather kernels take them."""
        return self.exit_diameter_m, self.divergence_h_rad, self.divergence_v_rad

    @property
    def divergence_rad(self) -> float:
        """The beam's equal-area full divergence ``sqrt(theta_h theta_v)``."""
        return math.sqrt(self.divergence_h_rad * self.divergence_v_rad)


def disc_overlap_area(r1: Any, r2: Any, d: Any) -> np.ndarray:
    """Area of the intersection of two discs of radii ``r1``, ``r2`` whose centres are ``d`` apart."""
    r1, r2, d = np.broadcast_arrays(np.asarray(r1, float), np.asarray(r2, float), np.asarray(d, float))
    out = np.zeros(r1.shape)
    inside = d <= np.abs(r1 - r2)
    out[inside] = math.pi * np.minimum(r1, r2)[inside] ** 2
    m = ~inside & (d < r1 + r2)
    a, b, c = r1[m], r2[m], d[m]
    c1 = np.clip((c * c + a * a - b * b) / (2 * c * a), -1.0, 1.0)
    c2 = np.clip((c * c + b * b - a * a) / (2 * c * b), -1.0, 1.0)
    k = np.sqrt(np.maximum((-c + a + b) * (c + a - b) * (c - a + b) * (c + a + b), 0.0))
    out[m] = a * a * np.arccos(c1) + b * b * np.arccos(c2) - 0.5 * k
    return out


def collected_fraction(
    s: Any, z: Any, aperture_m: float, fov_rad: float, focus_m: float | None = None
) -> np.ndarray:
    """Share of a point scatterer's light at range ``z``, ``s`` from the receiver's axis, that reaches
    its detector (aperture ``aperture_m``, field ``fov_rad``, lens focused at ``focus_m``; None:
    infinity).

    The detector is conjugate to a disc of radius ``theta_r F / 2`` at the focus distance ``F``; a ray
    from the point through the aperture at ``a`` reaches it when, carried on to ``F``, it lands inside
    that disc. Those rays pass the part of the aperture within ``theta_r z F / (2 |F - z|)`` of a centre
    ``s F / |F - z|`` from the aperture's: at ``F`` infinite, ``theta_r z / 2`` and ``s`` (a lens focused
    at infinity), and at ``z = F`` the point is imaged sharp (all of its light when ``s < theta_r z /
    2``, none beyond). ``z`` may be a column of ranges against rows of ``s`` (the same steps apiece)."""
    ra = aperture_m / 2.0
    if focus_m is None or not math.isfinite(focus_m):
        return disc_overlap_area(ra, fov_rad * z / 2.0, s) / (math.pi * ra * ra)
    gap = np.maximum(np.abs(focus_m - z), 1e-6 * focus_m)  # at z = F both discs grow without bound
    scale = focus_m / gap
    overlap = disc_overlap_area(ra, fov_rad * z * scale / 2.0, np.asarray(s, float) * scale)
    return overlap / (math.pi * ra * ra)


def _unit_disc(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points spread evenly over the unit disc, each standing for ``pi / n`` of its area (a
    sunflower pattern: radius ``sqrt((i + 1/2) / n)``, golden-angle steps)."""
    i = np.arange(n) + 0.5
    r = np.sqrt(i / n)
    a = i * math.pi * (3.0 - math.sqrt(5.0))
    return r * np.cos(a), r * np.sin(a)


def _filled_exit_profile(x: np.ndarray, width: float, sigma: float) -> np.ndarray:
    """Irradiance (per metre, integrating to 1) across one axis of an evenly lit exit of ``width``
    after its light has spread as a Gaussian of standard deviation ``sigma``: a top hat's edges
    blurred by the convolution."""
    if sigma <= 0.0:
        return (np.abs(x) <= width / 2.0) / width
    k = 1.0 / (math.sqrt(2.0) * sigma)
    return (erf((x + width / 2.0) * k) - erf((x - width / 2.0) * k)) / (2.0 * width)


def _filled_exit_points(z: float, rx: ReceiverOptics, n: int) -> tuple[np.ndarray, float, np.ndarray]:
    """:func:`_beam_points` for a beam that fills its exit aperture evenly (``rx.filled_exit_m``): the
    irradiance at range ``z`` is the exit's rectangle convolved with the angular Gaussian scaled to
    ``z`` (geometric optics of a source at the collimator's focus: every point of the lens sends the
    same angular spread), sampled over an ellipse that holds the rectangle and 3 standard deviations of
    the spread beyond it. Its second moments grow as ``d^2 / 12 + (theta z / 4)^2`` (ISO 11146-1: the
    near field's and the far field's add), so near the sensor the beam is its exit and far out its
    divergence, with no wing beyond the exit's edge near the sensor."""
    assert rx.filled_exit_m is not None
    along, across = rx.filled_exit_m
    ux, uy = _unit_disc(n)
    s_along, s_across = rx.divergence_h_rad * z / 4.0, rx.divergence_v_rad * z / 4.0  # 1/e^2 = 2 sigma
    half_a = (along / 2.0 + 3.0 * s_along) * math.sqrt(2.0)
    half_c = (across / 2.0 + 3.0 * s_across) * math.sqrt(2.0)
    x, y = ux * half_a, uy * half_c
    d_beam = float(kw.beam_diameter(z, *rx.beam))  # the fill factor's normalisation (it cancels)
    irradiance = _filled_exit_profile(x, along, s_along) * _filled_exit_profile(y, across, s_across)
    weight = math.pi / 4.0 * d_beam * d_beam * irradiance
    return np.hypot(rx.baseline_m - x, y), math.pi * half_a * half_c / n, weight


def _beam_points(z: Any, rx: ReceiverOptics, n: int) -> tuple[np.ndarray, Any, np.ndarray]:
    """(distances from the receiver's axis, area each, irradiance over the beam's mean) of ``n`` points
    over the beam's elliptic cross-section at range ``z`` (widths ``d0 + theta z`` as the kernels' beam;
    the wide axis along the baseline, as on a spinning lidar whose lenses sit side by side and whose beam
    is widest in azimuth). A Gaussian beam (those widths its 1/e^2 diameters) is sampled out to
    :data:`GAUSSIAN_EXTENT` of them, its wings included; a top hat over its widths. A beam that fills
    its exit (``rx.filled_exit_m``): :func:`_filled_exit_points` (one range). Otherwise ``z`` may be a
    column of ranges: a row of distances (and an area) per range, the same steps as one at a time."""
    if rx.filled_exit_m is not None:
        return _filled_exit_points(z, rx, n)
    ux, uy = _unit_disc(n)
    extent = GAUSSIAN_EXTENT if rx.gaussian else 1.0
    ux, uy = ux * extent, uy * extent
    ah = (rx.exit_diameter_m + max(rx.divergence_h_rad, rx.divergence_v_rad) * z) / 2.0
    av = (rx.exit_diameter_m + min(rx.divergence_h_rad, rx.divergence_v_rad) * z) / 2.0
    s = np.hypot(rx.baseline_m - ah * ux, av * uy)
    weight = 2.0 * np.exp(-2.0 * (ux * ux + uy * uy)) if rx.gaussian else np.ones(n)
    return s, math.pi * ah * av * extent * extent / n, weight


def detectable_density(
    z: np.ndarray,
    rx: ReceiverOptics,
    k_sensor: float,
    threshold_w: float,
    a_total: float,
    gain: tuple[float, float],
    sizes_mm: np.ndarray,
    number_per_m3: np.ndarray,
    cross_section: Callable[[np.ndarray], np.ndarray],
    n_points: int = 512,
) -> tuple[np.ndarray, np.ndarray]:
    """(per metre, median size mm) of the particles a beam holds whose echo reaches ``threshold_w``, at
    each range ``z``: ``number_per_m3[i]`` particles of size ``sizes_mm[i]`` per m^3, each with the
    backscatter ``cross_section(sizes_mm)`` = ``rho(D) D^2`` (m^2, Lambertian-equivalent reflectance
    times the squared diameter), the receiver ``rx`` (:func:`collected_fraction` over ``n_points`` of the
    beam's cross-section), the path's extinction ``a_total`` and the receiver's range law ``gain``."""
    h = np.asarray(cross_section(sizes_mm), float)
    order = np.argsort(h)[::-1]
    h_desc = h[order]
    count_desc = np.cumsum(number_per_m3[order])  # particles with h >= h_desc[k]
    size_w = np.cumsum((number_per_m3 * sizes_mm)[order])
    dens = np.zeros(z.shape)
    d50 = np.zeros(z.shape)
    for i, zz in enumerate(z):
        s, area, weight = _beam_points(float(zz), rx, n_points)
        f = collected_fraction(s, float(zz), rx.aperture_m, rx.fov_rad, rx.focus_m)
        d_beam = float(kw.beam_diameter(zz, *rx.beam))
        law = k_sensor * math.exp(-2.0 * a_total * zz) / (zz * zz) * float(kw.receiver_gain(zz, *gain))
        with np.errstate(divide="ignore"):
            need = np.where(f > 0.0, threshold_w * d_beam * d_beam / (law * f * weight), np.inf)
        k = np.searchsorted(-h_desc, -need, side="right")  # how many sizes reach the threshold
        seen = k > 0
        dens[i] = float(np.sum(np.where(seen, count_desc[np.maximum(k - 1, 0)], 0.0) * area))
        if dens[i] > 0.0:
            mean_d = np.where(seen, size_w[np.maximum(k - 1, 0)], 0.0) * area
            d50[i] = float(np.sum(mean_d)) / dens[i]
    return dens, d50


def particle_table(
    z_min: float,
    z_max: float,
    rx: ReceiverOptics,
    k_sensor: float,
    threshold_w: float,
    a_total: float,
    gain: tuple[float, float],
    sizes_mm: np.ndarray,
    number_per_m3: np.ndarray,
    cross_section: Callable[[np.ndarray], np.ndarray],
    n: int = 384,
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(z0, dz, cum, mean size): the expected number of detectable particles from ``z_min`` to each
    range of a uniform grid (the weather kernels' table), ending where the density has fallen to
    nothing (or at ``z_max``), and the mean size (mm) of the detectable particles at each grid range."""
    z0 = max(z_min, 1e-3)
    probe = np.linspace(z0, max(z_max, z0 + 0.1), 257)
    dens, _ = detectable_density(
        probe, rx, k_sensor, threshold_w, a_total, gain, sizes_mm, number_per_m3, cross_section, 128
    )
    cum = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2.0 * np.diff(probe))])
    if cum[-1] <= 0.0:
        return z0, 1.0, np.zeros(2), np.zeros(2)
    # the table spans the ranges that hold the particles (all but 1e-5 of them at the far end), so that
    # the kernels' inverse lookup never runs along a flat stretch where float32 and float64 part
    first = int(np.nonzero(dens > 0.0)[0][0])
    last = int(np.searchsorted(cum, cum[-1] * (1.0 - 1e-5)))
    z0 = float(probe[max(first - 1, 0)])
    z1 = float(probe[min(last + 1, probe.size - 1)])
    args = (rx, k_sensor, threshold_w, a_total, gain, sizes_mm, number_per_m3, cross_section)
    z = np.linspace(z0, z1, n)
    dens, size = detectable_density(z, *args)
    start = max(int(np.nonzero(dens > 0.0)[0][0]) - 1, 0)
    if start > 0:  # the table starts one step before the nearest detectable particle
        z = np.linspace(float(z[start]), z1, n)
        dens, size = detectable_density(z, *args)
    dens = np.maximum(dens, DENSITY_FLOOR * float(dens.max()))
    cum = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2.0 * np.diff(z))])
    return float(z[0]), float(z[1] - z[0]), cum, size


def kernel_power_model(
    z0: float,
    dz: float,
    cum: np.ndarray,
    mean_size_mm: np.ndarray,
    lam: float,
    d_lo: float,
    d_hi: float,
    k_sensor: float,
    threshold_w: float,
    a_total: float,
    beam: tuple[float, float, float],
    gain: tuple[float, float],
    r2: float,
) -> float:
    """The one reflectance with which the kernels' particle power (:mod:`rt_lidar.kernels.weather_rays`:
    a drawn particle of size ``d >= Dmin(z)``, exponential of slope ``lam`` above it, returns ``K rho
    (d / d_beam)^2 xi(z) ...`` with the linear overlap ``xi`` of (0, ``r2``)) draws particles of the mean
    size the physics detects at each range (weighted by the detectable particles there), raised where
    needed so that every range of the table can still draw a particle below ``d_hi``."""
    z = z0 + dz * np.arange(cum.size)
    w = np.gradient(cum)
    ok = (w > 0) & (mean_size_mm > 0)
    if not np.any(ok):
        return 0.05
    target = np.maximum(mean_size_mm - 1.0 / lam, d_lo)  # Dmin such that the drawn mean is the target

    def dmin(rho: float) -> np.ndarray:
        return np.asarray(
            kw.min_detectable_diameter_mm(z, k_sensor, rho, threshold_w, a_total, *beam, 0.0, r2, *gain)
        )

    d_unit = dmin(1.0)  # Dmin scales as rho^-1/2
    finite = ok & np.isfinite(d_unit)
    log_rho = 2.0 * float(np.average(np.log(d_unit[finite] / target[finite]), weights=w[finite]))
    rho = math.exp(log_rho)
    worst = float(np.max(dmin(rho)[w > 0]))
    if not math.isfinite(worst):
        return rho
    if worst > 0.9 * d_hi:
        rho *= (worst / (0.9 * d_hi)) ** 2
    return rho
