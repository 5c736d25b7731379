"""Points/s of the weather kernels on a 131k-point scan vs the same model point by point in plain Python.

    .venv/bin/python tools/bench/bench_weather.py [--points 131072] [--ref-points 4000] [--out FILE.json]

The reference applies the identical model (same tables, same counter-based draws) one ray at a time with
``math``; it runs on ``--ref-points`` rays and its rate is per point. Kernel runs and reference passes
are interleaved (a reference pass every 5 kernel runs) so both see the same machine; ``*_best``
compares the least disturbed run of each (as ``timeit`` does), ``*_median`` the medians, ``*_cpu_*``
the process CPU time (what a busy neighbour on a shared machine does not inflate). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.kernels.intensity import sensor_constant
from rt_lidar.kernels.weather_reference import reference_ray
from rt_lidar.physics.weather import WeatherConfig, WeatherModel
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.session.realtime import tune_allocator

CONFIGS = {
    "rain_25mm_h": WeatherConfig(rain_mm_h=25.0),
    "rain_50mm_h": WeatherConfig(rain_mm_h=50.0),
    "fog_100m": WeatherConfig(fog_visibility_m=100.0),
    "snow_1mm_h": WeatherConfig(snow_mm_h=1.0),
    "rain_10_fog_200": WeatherConfig(rain_mm_h=10.0, fog_visibility_m=200.0),
}


def synthetic_rays(preset: SensorPreset, n: int) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    """``n`` object returns of a spinning scan for ``preset`` (a third see sky: range inf, power 0):
    float32 range and received power, and the generator that drew them (seed 0) for further draws."""
    rng = np.random.default_rng(0)
    r0 = rng.uniform(1.0, 120.0, n).astype(np.float32)
    r0[rng.random(n) < 0.35] = np.inf  # a third of a spinning scan sees sky
    k = sensor_constant(
        preset.pulse.peak_power_w, preset.optics.receiver_aperture_m, preset.optics.system_efficiency
    )
    p0 = np.where(np.isfinite(r0), k * rng.uniform(0.05, 0.6, n) / np.minimum(r0, 1e6) ** 2, 0)
    return r0, p0.astype(np.float32), rng


def main() -> None:
    tune_allocator()  # as the rt-lidar CLI runs the product
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=131072)
    ap.add_argument("--ref-points", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    preset = load_preset("VLP-16")
    thr = preset.pulse.detection_threshold_w
    r0, p0, _ = synthetic_rays(preset, args.points)
    results = {}
    for name, cfg in CONFIGS.items():
        model = WeatherModel(cfg)
        prm = model.params(preset, thr)
        n_ref = min(args.ref_points, args.points)
        wall, cpu, ref_wall, ref_cpu = [], [], [], []
        for k in range(args.repeat):  # kernel runs and reference passes interleaved: same conditions
            r, p, f = r0.copy(), p0.copy(), np.zeros(args.points, np.uint8)
            t, c = time.perf_counter(), time.process_time()
            model.apply(r, p, f, None, preset, thr, np.random.default_rng(k))
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            if k % 5 == 0:
                t, c = time.perf_counter(), time.process_time()
                for i in range(n_ref):
                    reference_ray(i, float(r0[i]), float(p0[i]), prm, 12345)
                ref_wall.append((time.perf_counter() - t) / n_ref)
                ref_cpu.append((time.process_time() - c) / n_ref)
        ref_s, ref_med = min(ref_wall), float(np.median(ref_wall))
        best, med = min(wall), float(np.median(wall))
        results[name] = {
            "points": args.points,
            "kernel_ms_best": round(best * 1e3, 3),
            "kernel_ms_median": round(med * 1e3, 3),
            "kernel_points_per_s_best": round(args.points / best),
            "kernel_points_per_s_median": round(args.points / med),
            "reference_points_per_s": round(1.0 / ref_s),
            "speedup_best": round(ref_s * args.points / best, 1),
            "speedup_median": round(ref_med * args.points / med, 1),
            "kernel_points_per_s_cpu_best": round(args.points / min(cpu)),
            "speedup_cpu_best": round(min(ref_cpu) * args.points / min(cpu), 1),
            "clutter_fraction": round(float((f != 0).mean()), 4),
        }
    print(json.dumps({"preset": "VLP-16", "results": results}, indent=2))
    if args.out:
        write_json(args.out, {"preset": "VLP-16", "results": results})


if __name__ == "__main__":
    main()
