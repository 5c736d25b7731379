"""The weather model one ray at a time in plain Python (``math``): the reference the array kernels of
:mod:`kernels.weather` must equal, and the point-by-point baseline of ``tools/bench/bench_weather.py``.

It reads the same tables (:class:`kernels.weather.WeatherKernelParams`) and draws the same counter-based
random numbers, so for one ray it gives what the kernels give, up to float32 rounding.
"""

from __future__ import annotations

import math

from rt_lidar.kernels import weather as kw
from rt_lidar.kernels.weather_rays import NORMAL_TABLE

__all__ = ["reference_ray"]

M64 = (1 << 64) - 1


def _mix(key: int, c: int) -> int:
    z = (c * 0x9E3779B97F4A7C15 + key) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _u(z: int, shift: int) -> float:
    return (((z >> shift) & 0xFFFFFF) + 0.5) * 2.0**-24


def reference_ray(
    i: int, r: float, p: float, prm: kw.WeatherKernelParams, key: int, window: float = 1.0
) -> tuple[float, float, int]:
    """(range m, power W, clutter flag) of ray ``i`` after the weather: the loop a per-point
    implementation runs (``r`` is inf and ``p`` 0 on a miss; ``window``: the ray's two-way
    transmission of the sensor's window, on every clutter echo)."""
    p *= math.exp(-2 * prm.a_weather * r) if math.isfinite(r) else 0.0
    h0, h1 = _mix(key, i * kw.SLOTS_PER_RAY), _mix(key, i * kw.SLOTS_PER_RAY + 1)
    bp, bz, bf = 0.0, 0.0, 0
    for s, sp in enumerate(prm.species):
        cum = sp.cum
        t = min(max((r - sp.z0) / sp.dz, 0.0), len(cum) - 1.001)
        j0 = int(t)
        mu = cum[j0] + (t - j0) * (cum[j0 + 1] - cum[j0])
        u = _u(h0 if s == 0 else h1, 40)
        pk, cdf, k = math.exp(-mu), math.exp(-mu), 0
        while u > cdf and k < kw.MAX_PARTICLES:
            k += 1
            pk *= mu / k
            cdf += pk
        for j in range(k):
            h = _mix(key, i * kw.SLOTS_PER_RAY + sp.slot + j)
            target = _u(h, 40) * mu
            lo, hi = 0, len(cum) - 1
            while hi - lo > 1:
                m = (lo + hi) // 2
                lo, hi = (m, hi) if cum[m] <= target else (lo, m)
            w = cum[hi] - cum[lo]
            z = sp.z0 + sp.dz * (lo + ((target - cum[lo]) / w if w > 0 else 0.0))
            xi = min(max((z - prm.r1) / (prm.r2 - prm.r1), 0.0), 1.0)
            bd = math.sqrt((prm.d0 + prm.th_h * z) * (prm.d0 + prm.th_v * z))
            if prm.gain_exp != 0.0:  # the receiver's range law
                xi *= (z / prm.gain_ref_m) ** prm.gain_exp
            gain = prm.k_sensor * sp.rho * xi * math.exp(-2 * prm.a_total * z) / (z * z)
            q = prm.threshold_w / prm.draw_gain / max(gain, 1e-30)
            dmin = min(max(bd * 1e3 * math.sqrt(q) if q < 1 else math.inf, sp.d_lo_mm), sp.d_hi_mm)
            d = dmin - math.log1p(-_u(h, 16) * (1 - math.exp(-sp.lam * (sp.d_hi_mm - dmin)))) / sp.lam
            pw = gain * min((d * 1e-3 / bd) ** 2, 1.0) * window
            if pw > bp:
                bp, bz, bf = pw, z, sp.flag
    if prm.fog.power_w > 0 and r > prm.fog.range_m:
        fp = -math.log(((h1 & 0xFFFF) + 0.5) * 2.0**-16) * prm.fog.power_w * window  # speckle
        if bp < fp:
            bp, bz, bf = fp, min(prm.fog.range_m - prm.fog.jitter_m * math.log(_u(h1, 16)), r), prm.fog_flag
    if bp >= prm.threshold_w and bp > p:
        r, p = bz, bp
    else:
        bf = 0
    if prm.noise_sigma_m > 0 and p >= prm.threshold_w:
        r += float(NORMAL_TABLE[h0 & 4095]) * prm.noise_sigma_m
    return r, p, bf
