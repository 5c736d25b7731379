"""Sub-ray waveform throughput on CPU: a 131k-pulse scan with 7 sub-rays per pulse.

    .venv/bin/python tools/bench/bench_waveform.py [--sub-rays 7] [--repeat 3] [--out FILE.json]

Casts one whole HDL-64E revolution of the street scene (2 x 65,536 = 131,072 pulses at 10 Hz... the
preset's own schedule; ``--pulses`` trims or tiles it) as 7-sub-ray bundles, then times (1) the
waveform kernel alone (:func:`rt_lidar.kernels.waveform.waveform_returns`: clustering, synthesis on the time
bins, peak picking, EPW, dual selection) and (2) the whole physics stage on those hits (power, waveform,
returns, range noise, output), against the single-ray physics for reference. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.pipeline.builder import build_world
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.sensor.beam import BeamConfig, exit_m_per_rad
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between, scan_period_ns
from rt_lidar.session.realtime import tune_allocator

C_M_PER_NS = 0.299792458


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print (and optionally write) JSON."""
    tune_allocator()  # as the rt-lidar CLI runs the product
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="HDL-64E")
    ap.add_argument("--sub-rays", type=int, default=7)
    ap.add_argument("--pulses", type=int, default=131_072)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from rt_lidar.kernels.waveform import waveform_returns

    preset = load_preset(args.preset)
    world = build_world("street")
    beam = PhysicsConfig(beam=BeamConfig(sub_rays=args.sub_rays, return_mode="dual"))
    phys = SensorPhysics.from_preset(preset, world.material_names, load_material_table(), beam)
    single = SensorPhysics.from_preset(preset, world.material_names, load_material_table(), PhysicsConfig())
    src = WorldSource(world, preset.range.max_m, phys.materials.transmission, exit_m_per_rad(preset))
    period = scan_period_ns(preset)
    firings = firings_between(preset, period, period + period * max(1, -(-args.pulses // 130_000)))
    keys = ("ring", "t_ns", "azimuth_deg", "elevation_deg", "column", "unit")
    firings = type(firings)(**{k: getattr(firings, k)[: args.pulses] for k in keys})
    t0 = time.perf_counter()
    hits = src.beam_hits(firings, period, period * 2, phys.pattern)
    cast_s = time.perf_counter() - t0
    n_pulse, n_sub = hits.pulses, hits.subrays
    # the echo table the physics builds (object echoes, weighted), for the kernel alone
    with np.errstate(invalid="ignore", over="ignore"):
        power, _ = phys.power(
            hits.range_m, hits.cos_incidence, np.maximum(hits.material, 0), hits.glass_transmission
        )
    amp = np.where(hits.material >= 0, power, 0).astype(np.float32) * np.tile(phys.pattern.weights, n_pulse)
    t_ns = np.where(np.isfinite(hits.range_m), 2.0 * hits.range_m / C_M_PER_NS, np.inf).reshape(
        n_pulse, n_sub
    )
    amp = amp.reshape(n_pulse, n_sub)
    thr = preset.pulse.detection_threshold_w
    sep = 2 * preset.returns.min_separation_m / C_M_PER_NS
    ret = waveform_returns(t_ns, amp, preset.pulse.width_ns, thr, "strongest_last", sep)
    kernel_s = _best(
        lambda: waveform_returns(t_ns, amp, preset.pulse.width_ns, thr, "strongest_last", sep), args.repeat
    )
    rng = np.random.default_rng(0)
    physics_s = _best(lambda: phys.apply(hits, rng), args.repeat)
    hits1 = src.hits(firings, period, period * 2)
    single_s = _best(lambda: single.apply(hits1, rng), args.repeat)
    res = {
        "preset": preset.name,
        "pulses": n_pulse,
        "sub_rays": n_sub,
        "rays": n_pulse * n_sub,
        "returns": int(ret.pulse.size),
        "dual_pulses": int((ret.return_id == 1).sum()),
        "cast_s": round(cast_s, 4),
        "waveform_kernel_s": round(kernel_s, 4),
        "waveform_kernel_mpulses_per_s": round(n_pulse / kernel_s / 1e6, 3),
        "waveform_kernel_msubrays_per_s": round(n_pulse * n_sub / kernel_s / 1e6, 3),
        "physics_waveform_s": round(physics_s, 4),
        "physics_single_ray_s": round(single_s, 4),
        "threads_note": "numpy, 2 shared cores",
    }
    text = json.dumps(res, indent=2)
    print(text)
    if args.out:
        write_json(args.out, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
