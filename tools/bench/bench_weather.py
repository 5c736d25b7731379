"""Points/s of the weather kernels on a 131k-point scan vs the same model point by point in plain Python.

    .venv/bin/python tools/bench/bench_weather.py [--points 131072] [--ref-points 4000] [--out FILE.json]

The reference applies the identical model (same tables, same counter-based draws) one ray at a time with
``math``; it runs on ``--ref-points`` rays and its rate is per point. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from kernels import weather as kw
from rt_lidar.presets import load_preset
from rt_lidar.weather import WeatherConfig, WeatherModel

CONFIGS = {
    "rain_25mm_h": WeatherConfig(rain_mm_h=25.0),
    "rain_50mm_h": WeatherConfig(rain_mm_h=50.0),
    "fog_100m": WeatherConfig(fog_visibility_m=100.0),
    "snow_1mm_h": WeatherConfig(snow_mm_h=1.0),
    "rain_10_fog_200": WeatherConfig(rain_mm_h=10.0, fog_visibility_m=200.0),
}
M64 = (1 << 64) - 1


def _mix(key: int, c: int) -> int:
    z = (c * 0x9E3779B97F4A7C15 + key) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _u(z: int, shift: int) -> float:
    return (((z >> shift) & 0xFFFFFF) + 0.5) * 2.0**-24


def _ref_ray(i: int, r: float, p: float, prm: kw.WeatherKernelParams, key: int) -> tuple[float, float, int]:
    """One ray of the model in plain Python (the loop a per-point implementation runs)."""
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
            gain = prm.k_sensor * sp.rho * xi * math.exp(-2 * prm.a_total * z) / (z * z)
            q = prm.threshold_w / max(gain, 1e-30)
            dmin = min(max(bd * 1e3 * math.sqrt(q) if q < 1 else math.inf, sp.d_lo_mm), sp.d_hi_mm)
            d = dmin - math.log1p(-_u(h, 16) * (1 - math.exp(-sp.lam * (sp.d_hi_mm - dmin)))) / sp.lam
            pw = gain * min((d * 1e-3 / bd) ** 2, 1.0)
            if pw > bp:
                bp, bz, bf = pw, z, sp.flag
    if prm.fog.power_w > 0 and r > prm.fog.range_m and bp < prm.fog.power_w:
        bp, bz, bf = (
            prm.fog.power_w,
            min(prm.fog.range_m - prm.fog.jitter_m * math.log(_u(h1, 16)), r),
            prm.fog_flag,
        )
    if bp >= prm.threshold_w and bp > p:
        r, p = bz, bp
    else:
        bf = 0
    if prm.noise_sigma_m > 0 and p >= prm.threshold_w:
        r += float(kw.NORMAL_TABLE[h0 & 4095]) * prm.noise_sigma_m
    return r, p, bf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=131072)
    ap.add_argument("--ref-points", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    preset = load_preset("VLP-16")
    thr = preset.pulse.detection_threshold_w
    rng = np.random.default_rng(0)
    r0 = rng.uniform(1.0, 120.0, args.points).astype(np.float32)
    r0[rng.random(args.points) < 0.35] = np.inf  # a third of a spinning scan sees sky
    k = (
        preset.pulse.peak_power_w
        * preset.optics.receiver_aperture_m**2
        * preset.optics.system_efficiency
        / 16
    )
    p0 = np.where(np.isfinite(r0), k * rng.uniform(0.05, 0.6, args.points) / np.minimum(r0, 1e6) ** 2, 0)
    p0 = p0.astype(np.float32)
    results = {}
    for name, cfg in CONFIGS.items():
        model = WeatherModel(cfg)
        prm = model.params(preset, thr)
        times = []
        for i in range(args.repeat):
            r, p, f = r0.copy(), p0.copy(), np.zeros(args.points, np.uint8)
            t = time.perf_counter()
            model.apply(r, p, f, None, preset, thr, np.random.default_rng(i))
            times.append(time.perf_counter() - t)
        n_ref = min(args.ref_points, args.points)
        t = time.perf_counter()
        for i in range(n_ref):
            _ref_ray(i, float(r0[i]), float(p0[i]), prm, 12345)
        ref_s = (time.perf_counter() - t) / n_ref
        best, med = min(times), float(np.median(times))
        results[name] = {
            "points": args.points,
            "kernel_ms_best": round(best * 1e3, 3),
            "kernel_ms_median": round(med * 1e3, 3),
            "kernel_points_per_s_median": round(args.points / med),
            "reference_points_per_s": round(1.0 / ref_s),
            "speedup_median": round(ref_s * args.points / med, 1),
            "clutter_fraction": round(float((f != 0).mean()), 4),
        }
    print(json.dumps({"preset": "VLP-16", "results": results}, indent=2))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"preset": "VLP-16", "results": results}, fh, indent=2)


if __name__ == "__main__":
    main()
