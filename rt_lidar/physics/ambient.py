"""Sunlight on the scene: the noise floor it raises and what that does to a batch's detections.

The scenario gives the sun's illuminance and direction (:class:`~rt_lidar.physics.model.PhysicsConfig`); the
source gives, per ray, the cosine between the lit surface's normal and the sun and between the ray and
the sun (:class:`~rt_lidar.pipeline.sources.Hits` ``sun_cos`` / ``beam_sun_cos``; a source that does not know
them gets a half-lit scene and no blinding). Per pulse, the background power of its footprint (sub-ray
weighted) sets a noise floor (:mod:`kernels.ambient`); then

- a return survives only if its height plus a noise draw still reaches the threshold,
- its range jitters by the noise's timing error,
- a pulse left without any return reports a false detection, uniform over the range gate and flagged
  :attr:`~rt_lidar.points.PointFlag.AMBIENT_NOISE`, with the false-alarm probability of its noise floor,
- within ``optics.sun_blinding_deg`` of the sun the receiver is blinded: every true return is lost
  and the pulse reports noise.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from kernels.ambient import background_power, band_irradiance_w_m2, false_alarm_probability, timing_jitter_ns
from kernels.intensity import SPEED_OF_LIGHT
from kernels.waveform import pulse_sigma_ns, single_echo_epw_ns
from rt_lidar.physics.returns import Detections
from rt_lidar.pipeline.sources import Hits
from rt_lidar.points import PointFlag

if TYPE_CHECKING:
    from rt_lidar.physics.model import SensorPhysics

__all__ = ["UNKNOWN_SUN_COS", "apply_ambient", "pulse_noise_sigma"]

UNKNOWN_SUN_COS = 0.5
"""Sun cosine assumed for every surface when the source does not report it."""


def pulse_noise_sigma(physics: SensorPhysics, hits: Hits) -> np.ndarray:
    """(P,) noise floor (W, 1 sigma) of every pulse from the sunlit footprint it looks at."""
    p, cfg = physics.preset, physics.config
    o = p.optics
    irr = band_irradiance_w_m2(cfg.sun_illuminance_lux, o.wavelength_nm, o.filter_bandwidth_nm)
    hit = hits.material >= 0
    sun_cos = hits.sun_cos if hits.sun_cos is not None else np.full(len(hits), UNKNOWN_SUN_COS, np.float32)
    diffuse = physics.materials.diffuse[np.maximum(hits.material, 0)]
    fov_h, fov_v = max(o.beam_divergence_h_mrad, 0.1) * 1e-3, max(o.beam_divergence_v_mrad, 0.1) * 1e-3
    pb = background_power(
        sun_cos, diffuse, hit, irr, o.receiver_aperture_m, o.system_efficiency, fov_h, fov_v
    )
    n = hits.subrays
    w = hits.subray_weight if hits.subray_weight is not None else np.ones(n, np.float32)
    pb_pulse = pb.reshape(hits.pulses, n).astype(np.float64) @ w.astype(np.float64)
    return np.sqrt(pb_pulse * o.shot_noise_w)


def _renumber(pulse: np.ndarray) -> np.ndarray:
    """Return ids 0, 1, ... within each run of equal (sorted) pulse indices."""
    if pulse.size == 0:
        return np.zeros(0, np.uint8)
    start = np.r_[True, pulse[1:] != pulse[:-1]]
    first = np.maximum.accumulate(np.where(start, np.arange(pulse.size), 0))
    return (np.arange(pulse.size) - first).astype(np.uint8)


def apply_ambient(
    physics: SensorPhysics, hits: Hits, det: Detections, rng: np.random.Generator
) -> Detections:
    """``det`` under sunlight (see the module docstring); ``det.range_m`` is the measured range."""
    p = physics.preset
    thr = p.pulse.detection_threshold_w
    sigma = pulse_noise_sigma(physics, hits)
    blinded = np.zeros(hits.pulses, bool)
    if hits.beam_sun_cos is not None:
        centre = hits.beam_sun_cos[:: hits.subrays]
        blinded = centre >= math.cos(math.radians(p.optics.sun_blinding_deg))
    # true returns: lost under the noise or to blinding, range jitter
    s = sigma[det.pulse]
    draws = rng.standard_normal((2, len(det)))
    keep = (det.power_w + s * draws[0] >= thr) & ~blinded[det.pulse]
    jitter_m = timing_jitter_ns(pulse_sigma_ns(p.pulse.width_ns), s, det.power_w) * (SPEED_OF_LIGHT * 0.5e-9)
    det.range_m = (det.range_m + jitter_m * draws[1]).astype(np.float32)
    det = det.take(keep)
    # false detections of pulses left without a return
    n_cells = (p.range.max_m - p.range.min_m) / (SPEED_OF_LIGHT * p.pulse.width_ns * 0.5e-9)
    p_fa = np.where(blinded, 1.0, false_alarm_probability(thr, sigma, n_cells))
    empty = np.ones(hits.pulses, bool)
    empty[det.pulse] = False
    u = rng.random(hits.pulses)
    fa = np.nonzero(empty & (u < p_fa))[0]
    if fa.size:
        r = rng.uniform(p.range.min_m, p.range.max_m, fa.size).astype(np.float32)
        pw = (thr + np.abs(rng.standard_normal(fa.size)) * np.maximum(sigma[fa], thr * 0.1)).astype(
            np.float32
        )
        false = Detections(
            pulse=fa.astype(np.int64),
            return_id=np.zeros(fa.size, np.uint8),
            range_m=r,
            power_w=pw,
            reflectivity=physics.measured_reflectivity(pw, r),
            segment=np.zeros(fa.size, np.uint32),
            flags=np.full(fa.size, np.uint8(PointFlag.AMBIENT_NOISE), np.uint8),
            epw_ns=None
            if det.epw_ns is None
            else single_echo_epw_ns(pw, thr, p.pulse.width_ns, p.pulse.epw_offset_ns).astype(np.float32),
        )
        det = _merge(det, false)
    det.return_id = _renumber(det.pulse)
    return det


def _merge(a: Detections, b: Detections) -> Detections:
    """Rows of both, sorted by pulse (a's order kept within a pulse)."""

    def cat(x: np.ndarray | None, y: np.ndarray | None) -> np.ndarray | None:
        return None if x is None or y is None else np.concatenate([x, y])

    pulse = np.concatenate([a.pulse, b.pulse])
    order = np.argsort(pulse, kind="stable")
    merged = Detections(
        pulse, np.concatenate([a.return_id, b.return_id]), np.concatenate([a.range_m, b.range_m]),
        np.concatenate([a.power_w, b.power_w]), np.concatenate([a.reflectivity, b.reflectivity]),
        np.concatenate([a.segment, b.segment]), np.concatenate([a.flags, b.flags]), cat(a.epw_ns, b.epw_ns),
    )  # fmt: skip
    return merged.take(order)
