"""Weather kernels: rain, fog and snow as a lidar sees them (NumPy or CuPy, no state, no I/O).

Units: ranges and beam sizes in metres, drop / flake diameters in millimetres, number densities in
m^-3 (size distributions in m^-3 mm^-1), extinction in 1/m, powers in watts. Received powers use the
project's laser radar equation (:func:`kernels.intensity.received_power`): ``P = K S T / z^2`` with the
sensor constant ``K = P_e D_r^2 eta / 4``, so every clutter power compares directly with the preset's
detection threshold.

Rain (the LineTrace seed, Espineira et al., IEEE Sensors J. 21(8), 2021):

- Marshall-Palmer (1948): ``N(D) = 8000 exp(-4.1 R^-0.21 D)`` m^-3 mm^-1, R in mm/h.
- Extinction in geometric optics with ``Q_ext = 2``: ``a = Q_ext * pi/4 * integral N(D) D^2 dD``, over
  all sizes (small drops attenuate too): ~1e-3 /m at 5 mm/h, ~4e-3 /m at 50 mm/h at 905 nm.
- Drops of 0.5..6 mm in the beam up to the hit are a Poisson process over the beam volume (a cone:
  ``A(z) = pi/4 (d0 + th_h z)(d0 + th_v z)``, integrated exactly, see :func:`beam_volume`).
- ``RIRD = K rho_F min((D / d_beam)^2, 1) xi(z) exp(-2 a z) / z^2``, rho_F = 0.02; ``RIO = P_obj
  exp(-2 a d)``. RIRD > DT and RIRD > RIO: a false point at the drop; both below DT: lost; otherwise
  the object is detected, attenuated.

Only drops whose RIRD can exceed DT change an outcome, so the kernels draw exactly that thinned
Poisson process (density ``A(z) * integral_{Dmin(z)}^{6} N dD`` per metre), tabulated once per
configuration by :func:`detectable_particle_table`; drops that cannot reach DT act through the mean
extinction alone. This is the seed's model, not an approximation of it, at a small fraction of the cost.

Fog (Hahner et al., "Fog simulation on real LiDAR point clouds", ICCV 2021): ``a = ln(20) / V``,
backscatter ``beta = 0.046 / V`` 1/(m sr); the fog is a soft target whose pulse-integrated return
``K pi beta integral_{z - c tau/2}^{z} xi(r) exp(-2 a r) / r^2 dr`` peaks just past the range where the
receiver's field of view covers the beam (overlap ``xi``, their R_1 / R_2).

Snow: the Gunn & Marshall (1958, J. Meteor. 15, 452) size distribution of aggregate snowflakes,
``N(D) = 3.8e3 S^-0.87 exp(-2.55 S^-0.48 D)`` m^-3 mm^-1 in melted diameter D (mm) at snowfall rate S
(mm/h water equivalent), as LISA (Kilic et al., 2021) uses it; flakes of bulk density 0.1 g/cm^3 are
(1/0.1)^(1/3) = 2.15 times the melted diameter, and ``Q_ext = 2`` over their area gives
``a ~ 3.3e-3 S^0.57`` /m (about 0.9 km visibility at 1 mm/h, as observed for moderate snow).

The per-ray kernels that draw and apply all this are in :mod:`rt_lidar.kernels.weather_rays`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from rt_lidar.kernels.xp import array_module

__all__ = [
    "FOG_BACKSCATTER_VIS",
    "MAX_PARTICLES",
    "MP_N0",
    "Q_EXT",
    "RAIN_D_MAX_MM",
    "RAIN_D_MIN_MM",
    "RHO_FRESNEL_WATER",
    "SLOTS_PER_RAY",
    "SLOT_RAIN",
    "SLOT_SNOW",
    "FogParams",
    "Species",
    "WeatherKernelParams",
    "beam_area",
    "beam_diameter",
    "beam_volume",
    "detectable_particle_table",
    "drop_count_mean",
    "exponential_dsd_area",
    "exponential_dsd_count",
    "fog_backscatter",
    "fog_extinction",
    "fog_soft_target",
    "marshall_palmer",
    "marshall_palmer_slope",
    "min_detectable_diameter_mm",
    "overlap",
    "rain_extinction",
    "receiver_gain",
    "snow_distribution",
    "snow_extinction",
]

MP_N0 = 8000.0  # m^-3 mm^-1
RAIN_D_MIN_MM, RAIN_D_MAX_MM = 0.5, 6.0
RHO_FRESNEL_WATER = 0.02  # |(n-1)/(n+1)|^2, n = 1.33
Q_EXT = 2.0
FOG_BACKSCATTER_VIS = 0.046  # beta = 0.046 / V (Hahner et al. 2021, after Rasshofer et al. 2011)
SNOW_DIAMETER_FACTOR = (1.0 / 0.1) ** (1.0 / 3.0)  # flake / melted diameter at 0.1 g/cm^3
MAX_PARTICLES = 8  # drops per beam drawn at most (P(k > 8) < 1e-9 for the thinned process)
SLOTS_PER_RAY = 32  # counters per ray: 0 and 1 per-ray draws (see apply_weather), then particles
SLOT_RAIN, SLOT_SNOW = 2, 2 + MAX_PARTICLES  # first particle slot of each species


# --------------------------------------------------------------------------- distributions, extinction


def marshall_palmer_slope(rate_mm_h: Any) -> Any:
    """Slope ``Lambda = 4.1 R^-0.21`` (1/mm) of the Marshall-Palmer distribution."""
    return 4.1 * np.power(np.maximum(rate_mm_h, 1e-6), -0.21)


def marshall_palmer(d_mm: Any, rate_mm_h: float) -> Any:
    """``N(D) = 8000 exp(-Lambda D)`` in m^-3 mm^-1."""
    xp = array_module(d_mm)
    return MP_N0 * xp.exp(-marshall_palmer_slope(rate_mm_h) * d_mm)


def _exp_moment(n0: float, lam: float, lo: float, hi: float, order: int) -> float:
    """``integral_lo^hi n0 D^order exp(-lam D) dD`` in closed form (hi may be inf)."""

    def prim(d: float) -> float:
        if math.isinf(d):
            return 0.0
        e = math.exp(-lam * d)
        if order == 0:
            return -e / lam
        return -e * (d * d / lam + 2 * d / lam**2 + 2 / lam**3)

    return n0 * (prim(hi) - prim(lo))


def exponential_dsd_count(n0: float, lam: float, lo: float, hi: float) -> float:
    """Number density (m^-3) of an exponential size distribution between ``lo`` and ``hi`` mm."""
    return _exp_moment(n0, lam, lo, hi, 0)


def exponential_dsd_area(n0: float, lam: float, lo: float, hi: float) -> float:
    """``integral N(D) D^2 dD`` (mm^2 m^-3) between ``lo`` and ``hi`` mm."""
    return _exp_moment(n0, lam, lo, hi, 2)


def rain_extinction(rate_mm_h: float) -> float:
    """Rain extinction (1/m) from Marshall-Palmer with ``Q_ext = 2``, all drop sizes."""
    if rate_mm_h <= 0:
        return 0.0
    lam = float(marshall_palmer_slope(rate_mm_h))
    return Q_EXT * math.pi / 4 * exponential_dsd_area(MP_N0, lam, 0.0, math.inf) * 1e-6


def snow_distribution(rate_mm_h: float) -> tuple[float, float]:
    """(N0 in m^-3 mm^-1, Lambda in 1/mm) of Gunn-Marshall snow in *flake* diameter (see module doc)."""
    s = max(rate_mm_h, 1e-6)
    n0, lam = 3.8e3 * s**-0.87, 2.55 * s**-0.48  # melted diameter
    k = SNOW_DIAMETER_FACTOR
    return n0 / k, lam / k


def snow_extinction(rate_mm_h: float) -> float:
    """Snow extinction (1/m), Gunn-Marshall flakes with ``Q_ext = 2`` over their area."""
    if rate_mm_h <= 0:
        return 0.0
    n0, lam = snow_distribution(rate_mm_h)
    return Q_EXT * math.pi / 4 * exponential_dsd_area(n0, lam, 0.0, math.inf) * 1e-6


def fog_extinction(visibility_m: float | None) -> float:
    """Fog extinction ``ln(20) / V`` (1/m); 0 without fog."""
    return 0.0 if not visibility_m else math.log(20.0) / visibility_m


def fog_backscatter(visibility_m: float | None) -> float:
    """Fog backscatter coefficient ``0.046 / V`` in 1/(m sr); 0 without fog."""
    return 0.0 if not visibility_m else FOG_BACKSCATTER_VIS / visibility_m


# --------------------------------------------------------------------------- beam geometry


def beam_diameter(z: Any, d0: float, th_h: float, th_v: float) -> Any:
    """Equal-area diameter (m) of the elliptic beam at range z; divergences are full angles in rad."""
    xp = array_module(z)
    return xp.sqrt((d0 + th_h * z) * (d0 + th_v * z))


def beam_area(z: Any, d0: float, th_h: float, th_v: float) -> Any:
    """Beam cross-section ``pi/4 (d0 + th_h z)(d0 + th_v z)`` in m^2."""
    return math.pi / 4 * (d0 + th_h * z) * (d0 + th_v * z)


def beam_volume(z: Any, d0: float, th_h: float, th_v: float) -> Any:
    """Beam volume (m^3) from the sensor to range z: the exact integral of :func:`beam_area`."""
    return math.pi / 4 * (d0 * d0 * z + d0 * (th_h + th_v) * z * z / 2 + th_h * th_v * z**3 / 3)


def drop_count_mean(range_m: Any, rate_mm_h: float, d0: float, th_h: float, th_v: float) -> Any:
    """Mean number of 0.5..6 mm drops in the beam up to ``range_m``: ``V(d) * integral N dD``."""
    lam = float(marshall_palmer_slope(rate_mm_h))
    n_t = exponential_dsd_count(MP_N0, lam, RAIN_D_MIN_MM, RAIN_D_MAX_MM) if rate_mm_h > 0 else 0.0
    return beam_volume(range_m, d0, th_h, th_v) * n_t


def overlap(z: Any, r1: float, r2: float) -> Any:
    """Overlap of receiver field of view and beam: 0 before r1, linear to 1 at r2 (Hahner's xi)."""
    xp = array_module(z)
    return xp.clip((z - r1) / max(r2 - r1, 1e-9), 0.0, 1.0)


# --------------------------------------------------------------------------- parameter bundles


class Species(NamedTuple):
    """One kind of particle (rain drops, snowflakes) with its detectable-particle table."""

    n0: float  # m^-3 mm^-1
    lam: float  # 1/mm
    d_lo_mm: float
    d_hi_mm: float
    rho: float  # backscatter reflectance of one particle
    flag: int  # PointFlag bit of its clutter points
    slot: int  # first counter slot of its particles (one per particle)
    z0: float  # table start (m)
    dz: float  # table step (m)
    cum: Any  # (n,) float64 cumulative expected detectable particles from z0


class FogParams(NamedTuple):
    """The fog's soft target: its peak return and where it lies."""

    power_w: float  # 0 = no fog return
    range_m: float
    jitter_m: float  # mean of the exponential range spread of fog points


class WeatherKernelParams(NamedTuple):
    """Everything the per-ray kernel needs, in plain numbers and small tables."""

    k_sensor: float  # P_e D_r^2 eta / 4 (W m^2)
    threshold_w: float
    a_weather: float  # weather extinction (1/m), applied two-way to the object
    a_total: float  # clear air + weather, for clutter returns
    d0: float
    th_h: float
    th_v: float
    r1: float
    r2: float
    species: tuple[Species, ...]
    fog: FogParams
    noise_sigma_m: float
    fog_flag: int
    gain_exp: float = 0.0  # the receiver's range law g(z) = (z / gain_ref_m)^gain_exp on clutter echoes
    gain_ref_m: float = 1.0
    draw_gain: float = 1.0  # the tables hold the particles whose echo reaches threshold_w / draw_gain: a
    # pulse's window gain above 1 (a receiver gain fault, rt_lidar.faults.optical) can lift them over it


# --------------------------------------------------------------------------- host-side tables


def receiver_gain(z: Any, gain_exp: float, gain_ref_m: float) -> Any:
    """The receiver's range law ``g(z) = (z / gain_ref_m)^gain_exp`` (the preset's, fitted to two
    datasheet ranges); the scalar 1.0 where ``gain_exp`` is 0 (callers then leave their bytes alone)."""
    if gain_exp == 0.0:
        return 1.0
    xp = array_module(z)
    return xp.power(z * (1.0 / gain_ref_m), gain_exp)


def min_detectable_diameter_mm(
    z: Any,
    k_sensor: float,
    rho: float,
    threshold_w: float,
    a_total: float,
    d0: float,
    th_h: float,
    th_v: float,
    r1: float,
    r2: float,
    gain_exp: float = 0.0,
    gain_ref_m: float = 1.0,
) -> Any:
    """Smallest particle diameter (mm) whose return at range z reaches the threshold; inf if none
    (``gain_exp``, ``gain_ref_m``: the receiver's range law, :func:`receiver_gain`)."""
    xp = array_module(z)
    gain = k_sensor * rho * overlap(z, r1, r2) * xp.exp(-2.0 * a_total * z) / (z * z)
    if gain_exp != 0.0:
        gain = gain * receiver_gain(z, gain_exp, gain_ref_m)
    q = threshold_w / xp.maximum(gain, 1e-30)
    d = beam_diameter(z, d0, th_h, th_v) * 1e3
    return xp.where(q < 1.0, d * xp.sqrt(q), xp.inf)


def detectable_particle_table(
    n0: float,
    lam: float,
    d_lo: float,
    d_hi: float,
    rho: float,
    k_sensor: float,
    threshold_w: float,
    a_total: float,
    beam: tuple[float, float, float],
    r1: float,
    r2: float,
    z_min: float,
    z_max: float,
    n: int = 256,
    seen: tuple[np.ndarray, np.ndarray] | None = None,
    gain: tuple[float, float] = (0.0, 1.0),
) -> tuple[float, float, np.ndarray]:
    """(z0, dz, cum): expected number of *detectable* particles in the beam from z0 to each grid range.

    The density per metre is ``A(z) * s(z) * integral_{max(d_lo, Dmin(z))}^{d_hi} N dD``; the table ends
    where no particle can reach the threshold any more (or at ``z_max``). ``seen`` = (ranges, shares)
    gives ``s(z)``, the share of the beam's cross-section that the receiver sees (a point particle
    outside it returns nothing), linearly interpolated; None: 1. ``gain`` = (exponent, reference range)
    of the receiver's range law (:func:`receiver_gain`).
    """
    z0 = max(z_min, r1, 1e-3)
    fine = np.linspace(z0, max(z_max, z0 + 1e-3), 4096)
    dmin = min_detectable_diameter_mm(fine, k_sensor, rho, threshold_w, a_total, *beam, r1, r2, *gain)
    ok = np.nonzero(dmin < d_hi)[0]
    if n0 <= 0 or ok.size == 0:
        return z0, 1.0, np.zeros(2)
    z1 = fine[min(ok[-1] + 1, fine.size - 1)]
    z = np.linspace(z0, z1, n)
    lo = min_detectable_diameter_mm(z, k_sensor, rho, threshold_w, a_total, *beam, r1, r2, *gain)
    lo = np.maximum(lo, d_lo)
    lo = np.minimum(lo, d_hi)
    dens = beam_area(z, *beam) * n0 / lam * (np.exp(-lam * lo) - np.exp(-lam * d_hi))
    if seen is not None:
        dens = dens * np.interp(z, seen[0], seen[1])
    cum = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(z))])
    return float(z0), float(z[1] - z[0]), cum


def fog_soft_target(
    k_sensor: float,
    visibility_m: float | None,
    a_total: float,
    pulse_len_m: float,
    r1: float,
    r2: float,
    z_min: float,
    n: int = 2048,
    gain: tuple[float, float] = (0.0, 1.0),
) -> tuple[float, float]:
    """(peak power W, its range m) of the fog's soft-target return, pulse-integrated over ``c tau / 2``
    (``gain``: the receiver's range law, :func:`receiver_gain`)."""
    beta = fog_backscatter(visibility_m)
    if beta <= 0:
        return 0.0, 0.0
    r = np.linspace(max(r1, 1e-3), max(r2, r1) + 20.0 * pulse_len_m + 10.0, n)
    g = overlap(r, r1, r2) * np.exp(-2.0 * a_total * r) / (r * r)
    if gain[0] != 0.0:
        g = g * receiver_gain(r, *gain)
    cum = np.concatenate([[0.0], np.cumsum((g[1:] + g[:-1]) / 2 * np.diff(r))])
    window = cum - np.interp(r - pulse_len_m, r, cum, left=0.0)
    window[r < z_min] = 0.0
    i = int(np.argmax(window))
    return float(k_sensor * math.pi * beta * window[i]), float(r[i])
