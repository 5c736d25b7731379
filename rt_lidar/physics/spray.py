"""Tyre spray behind moving cars on a wet road: false near points and a dimmer car (issue 14, item 11).

The source gives every ray's segment through the nearest spray plume and the plume's relative density
there (``Hits.spray_in_m / spray_out_m / spray_density``: plume shapes in
:mod:`rt_lidar.unreal_bridge.world.spray`); the density of water at relative density 1 scales with the road's
wetness w (0..1). The drops echo as a localised soft target (:mod:`rt_lidar.kernels.spray`): a clutter echo
beside the object's, which it attenuates two-way. Spray points are flagged
:attr:`~rt_lidar.points.PointFlag.RAIN_CLUTTER` (they are water drops, and rain filters are what
removes them; the flag byte has no free bit).

Parameters (the drop size from a measurement, the water content assumed):

- effective droplet diameter :data:`SPRAY_D_EFF_MM` = 0.19 mm, from the USC tyre-spray rig (a grooved
  tyre rolling through a water film, droplets imaged downstream; Browand's group, C. Radovich's thesis,
  and Plocher, Browand & Radovich's images at a rim speed of 6 m/s): drops of 80 um to 9 mm, mean
  ~0.8 mm at a Weber number of 2,700, the mean falling as We^-1/2, i.e. as 1/v since We = rho v^2 w /
  sigma. Taking We = 2,700 at the 6 m/s of their images (a groove ~5 mm wide) gives 0.8 mm x 6 / 25 =
  0.19 mm at the plume's reference speed, 90 km/h (:data:`~unreal_bridge.world.spray.SPRAY_REF_SPEED_M_S`).
  The mean stands in for the Sauter diameter (third over second moment), which a wide distribution
  puts somewhat higher: the plume is if anything slightly denser here than measured drops would give;
- liquid water content at relative density 1 (close behind the wheels of a car at 90 km/h on a fully
  wet road): :data:`SPRAY_LWC_G_M3` = 1.5 g/m^3, scaled by w (assumed: no measurement of it was found;
  trackside spray studies, e.g. TRL's RR162, report the light a spray cloud transmits, not its water);
- extinction for drops much larger than the wavelength, Q_ext = 2:
  ``alpha = 3 LWC / (rho_w D_eff)`` = 0.024 /m at density 1 (a visibility of ~165 m inside the plume);
- backscatter from the lidar ratio of liquid water drops, S = 18.8 sr at 905 nm (O'Connor, Illingworth &
  Hogan, "A technique for autocalibration of cloud lidar", J. Atmos. Oceanic Technol. 21, 777-786,
  2004): ``beta = alpha / S``.
"""

from __future__ import annotations

import numpy as np

from rt_lidar.kernels.intensity import SPEED_OF_LIGHT, sensor_constant
from rt_lidar.kernels.spray import SprayParams, spray_echoes
from rt_lidar.kernels.xp import array_module
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.weather import OVERLAP_FULL_M, OVERLAP_START_M
from rt_lidar.pipeline.sources import Hits

__all__ = [
    "LIDAR_RATIO_SR",
    "SPRAY_D_EFF_MM",
    "SPRAY_LWC_G_M3",
    "spray_apply",
    "spray_extinction",
    "spray_params",
]

SPRAY_LWC_G_M3 = 1.5
SPRAY_D_EFF_MM = 0.19
LIDAR_RATIO_SR = 18.8
_RHO_WATER_G_M3 = 1e6


def spray_extinction(lwc_g_m3: float, d_eff_mm: float = SPRAY_D_EFF_MM) -> float:
    """Extinction (1/m) of drops of liquid water content ``lwc_g_m3`` and effective diameter
    ``d_eff_mm``, Q_ext = 2: ``3 LWC / (rho_w D_eff)``."""
    return 3.0 * lwc_g_m3 / (_RHO_WATER_G_M3 * d_eff_mm * 1e-3)


def spray_params(echo: EchoModel, wetness: float) -> SprayParams:
    """The kernel parameters of ``echo``'s sensor for a road of ``wetness``."""
    p = echo.preset
    k = sensor_constant(p.pulse.peak_power_w, p.optics.receiver_aperture_m, p.optics.system_efficiency)
    alpha = spray_extinction(SPRAY_LWC_G_M3 * wetness)
    return SprayParams(
        k_sensor=k,
        beta_per_density=alpha / LIDAR_RATIO_SR,
        alpha_per_density=alpha,
        pulse_len_m=SPEED_OF_LIGHT * p.pulse.width_ns * 1e-9 / 2,
        a_total=echo.extinction_per_m,
        r1=OVERLAP_START_M,
        r2=OVERLAP_FULL_M,
    )


def spray_apply(
    echo: EchoModel, hits: Hits, wetness: float, power: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray] | None:
    """The spray clutter echo ``(range m, power W)`` of every ray (power 0: none), dimmed by the sensor's
    window as every echo is (``Hits.window_transmission``, a power fault), with the object echoes
    ``power`` attenuated through the plume in place; None (and no draw of ``rng``) when the road is dry
    or the source gave no plume segments. The arrays are of the hits' array module (NumPy, or CuPy on
    the device frame)."""
    if wetness <= 0 or hits.spray_in_m is None or hits.spray_out_m is None or hits.spray_density is None:
        return None
    xp = array_module(hits.spray_density)
    idx = xp.flatnonzero(hits.spray_density > 0)
    if idx.shape[0] == 0:
        return None
    key = int(rng.integers(0, 2**63 - 1))
    prm = spray_params(echo, wetness)
    n = len(hits)
    rng_m, p_w = xp.full(n, np.inf, xp.float32), xp.zeros(n, xp.float32)
    window = None if hits.window_transmission is None else hits.window_transmission[idx]
    r_i, p_i, trans = spray_echoes(
        hits.spray_in_m[idx], hits.spray_out_m[idx], hits.spray_density[idx], prm, key, ray=idx, window=window
    )
    power[idx] *= trans
    rng_m[idx], p_w[idx] = r_i, p_i
    return rng_m, p_w
