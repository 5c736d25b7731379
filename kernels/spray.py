"""Tyre spray kernel: the droplet echo of each ray that crosses a spray plume (NumPy or CuPy).

A plume is a cloud of small water drops (tens to hundreds of micrometres, much larger than the
wavelength), so it echoes like a localised fog: a soft target of backscatter coefficient beta and
extinction alpha = S beta (lidar ratio S). The pulse-integrated return of the drops in the beam between
the plume's entry ``z_in`` and exit ``z_out`` (:mod:`kernels.weather`'s fog integral over the pulse length
``c tau / 2``, restricted to the plume) is::

    P(z) = K pi beta g xi(z) exp(-2 a z) exp(-2 alpha (z - z_in)) min(c tau / 2, z_out - z_in) / z^2

at the echo's range z, drawn uniformly in [z_in, z_out] per ray (the plume fills its volume, so its
points do too), with ``g`` an exponential(1) draw per ray: spray comes in clumps, and the ray-to-ray
fluctuation spreads the share of rays that see it smoothly with density (as the fog's does). The
object behind the plume is attenuated two-way by ``exp(-2 alpha (z_out - z_in))``.

Draws come from the counter-based hash of :mod:`kernels.weather_rays` (key, ray), so a batch gives the
same echoes in any order and on either array module.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from rt_lidar.kernels.weather import overlap
from rt_lidar.kernels.weather_rays import hash_uniform
from rt_lidar.kernels.xp import array_module

__all__ = ["SprayParams", "spray_echoes"]

_SLOT_RANGE, _SLOT_CLUMP = 0, 1


class SprayParams(NamedTuple):
    """The plume optics and sensor numbers the kernel needs."""

    k_sensor: float  # P_e D_r^2 eta / 4 (W m^2)
    beta_per_density: float  # backscatter 1/(m sr) at relative density 1
    alpha_per_density: float  # extinction 1/m at relative density 1
    pulse_len_m: float  # c tau / 2
    a_total: float  # clear air (+ weather) extinction for the clutter echo, 1/m
    r1: float  # overlap start (m)
    r2: float  # full overlap (m)


def spray_echoes(
    z_in: Any,
    z_out: Any,
    density: Any,
    prm: SprayParams,
    key: int,
    ray: Any = None,
    window: Any = None,
) -> tuple[Any, Any, Any]:
    """(echo range m, echo power W, two-way transmission) of every ray through a plume segment
    ``[z_in, z_out]`` (float32, z_in inf = none) of relative ``density`` (float32, 0 = none). Rays
    without a plume get range inf, power 0 and transmission 1. ``ray`` numbers the rays for the draws
    (default 0..n-1): a subset of a batch passes its rays' numbers and gets their draws. ``window``
    (float32 per ray, None = 1): the two-way transmission of the sensor's own window (a power fault,
    ``Hits.window_transmission``), which the droplets' echo passes out and back as every echo does."""
    xp = array_module(z_in)
    n = z_in.shape[0]
    ray = xp.arange(n, dtype=xp.uint64) if ray is None else ray.astype(xp.uint64)
    has = xp.isfinite(z_in) & (density > 0)
    zi = xp.where(has, z_in, 0.0).astype(xp.float64)
    zo = xp.where(has, z_out, 0.0).astype(xp.float64)
    depth = xp.maximum(zo - zi, 0.0)
    d = density.astype(xp.float64)
    u = hash_uniform(key, ray * xp.uint64(2) + xp.uint64(_SLOT_RANGE)).astype(xp.float64)
    g = -xp.log(hash_uniform(key, ray * xp.uint64(2) + xp.uint64(_SLOT_CLUMP)).astype(xp.float64))
    z = zi + u * depth
    zz = xp.maximum(z, 1e-3)
    alpha = prm.alpha_per_density * d
    power = (
        prm.k_sensor
        * math.pi
        * prm.beta_per_density
        * d
        * g
        * overlap(zz, prm.r1, prm.r2)
        * xp.exp(-2.0 * prm.a_total * zz)
        * xp.exp(-2.0 * alpha * (z - zi))
        * xp.minimum(prm.pulse_len_m, depth)
        / (zz * zz)
    )
    if window is not None:  # out through the sensor's window and back
        power = power * window.astype(xp.float64)
    trans = xp.exp(-2.0 * alpha * depth)
    rng = xp.where(has, z, xp.inf).astype(xp.float32)
    return rng, xp.where(has, power, 0.0).astype(xp.float32), xp.where(has, trans, 1.0).astype(xp.float32)
