"""Detection statistics of a preset on a datasheet target, straight through the physics stage.

A datasheet's range figure is measured on a large Lambertian target of known reflectivity (10 %
usually) at normal incidence. :func:`target_hits` builds exactly that as :class:`Hits` (no ray cast:
every pulse meets the target at the range asked), :func:`detection_curve` fires many pulses at each
range and counts the target's returns (the probability of detection) and the noise's false detections
(per pulse), and :func:`range_at` reads the range where the curve falls through a probability.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rt_lidar.physics.laser_gain import alike_lasers
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.pipeline.sources import Hits
from rt_lidar.points import PointFlag
from rt_lidar.sensor.materials import MaterialArrays
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import Firings

__all__ = ["DetectionCurve", "datasheet_physics", "detection_curve", "range_at", "target_hits"]

TARGET_SEGMENT = 1


def datasheet_physics(
    preset: SensorPreset, reflectivity: float = 0.1, config: PhysicsConfig | None = None
) -> SensorPhysics:
    """Physics of ``preset`` in a world of one material: a Lambertian reflector of ``reflectivity``."""
    one = np.ones(1, np.float32)
    mats = MaterialArrays(
        names=("datasheet_target",),
        diffuse=np.full(1, reflectivity, np.float32),
        retro_gain=0 * one,
        retro_exponent=one,
        specular_gain=0 * one,
        specular_exponent=one,
        transmission=0 * one,
    )
    return SensorPhysics(preset, mats, config)


def target_hits(preset: SensorPreset, range_m: np.ndarray, sun_cos: float | None = None) -> Hits:
    """One pulse per entry of ``range_m`` (ring 0, straight ahead, 1 us apart) on the target, head-on;
    ``sun_cos``: the cosine between the target's normal and the sun (None: unknown)."""
    n = int(range_m.shape[0])
    firings = Firings(
        ring=np.zeros(n, np.uint16),
        t_ns=np.arange(n, dtype=np.int64) * 1000,
        azimuth_deg=np.zeros(n),
        elevation_deg=np.zeros(n),
        column=np.arange(n, dtype=np.int64),
    )
    f32 = np.float32
    return Hits(
        firings=firings,
        direction=firings.directions(),
        range_m=range_m.astype(f32),
        cos_incidence=np.ones(n, f32),
        material=np.zeros(n, np.int16),
        segment=np.full(n, TARGET_SEGMENT, np.uint32),
        glass_range_m=np.full(n, np.inf, f32),
        glass_cos=np.zeros(n, f32),
        glass_material=np.full(n, -1, np.int16),
        glass_segment=np.zeros(n, np.uint32),
        glass_transmission=np.ones(n, f32),
        sun_cos=None if sun_cos is None else np.full(n, sun_cos, f32),
        beam_sun_cos=None if sun_cos is None else np.zeros(n, f32),
    )


@dataclass(frozen=True)
class DetectionCurve:
    """Per range: probability of detecting the target, false detections per pulse, range noise (m)."""

    range_m: np.ndarray
    p_detect: np.ndarray
    false_per_pulse: np.ndarray
    range_sigma_m: np.ndarray


def detection_curve(
    preset: SensorPreset,
    ranges_m: Sequence[float] | np.ndarray,
    reflectivity: float = 0.1,
    pulses: int = 2000,
    sun_lux: float | None = None,
    sun_cos: float = 1.0,
    seed: int = 0,
    config: PhysicsConfig | None = None,
) -> DetectionCurve:
    """Fire ``pulses`` at the target at each range (single-ray path of the preset's physics) in
    ``sun_lux`` of sunlight; None: the light of the preset's datasheet figures where its threshold
    follows the ambient light (``receiver.photon_floor_counts``: ``receiver.datasheet_ambient_lux``,
    the target lit square-on), else night. The pulses are the preset's average laser (gain 1, what the
    datasheet's figures describe: :func:`rt_lidar.physics.laser_gain.alike_lasers`)."""
    preset = alike_lasers(preset)
    if sun_lux is None:
        rx = preset.receiver
        sun_lux = rx.datasheet_ambient_lux if rx.photon_floor_counts is not None else 0.0
    cfg = dataclasses.replace(config or PhysicsConfig(), sun_illuminance_lux=sun_lux)
    phys = datasheet_physics(preset, reflectivity, cfg)
    rng = np.random.default_rng(seed)
    pd, fa, sig = [], [], []
    for r in ranges_m:
        hits = target_hits(preset, np.full(pulses, r, np.float32), sun_cos if sun_lux > 0 else None)
        pts = phys.apply(hits, rng).points
        target = (pts["segment"] == TARGET_SEGMENT) & ((pts["flags"] & int(PointFlag.AMBIENT_NOISE)) == 0)
        pd.append(float(np.count_nonzero(target)) / pulses)
        fa.append(float(np.count_nonzero(pts["flags"] & int(PointFlag.AMBIENT_NOISE))) / pulses)
        x = pts["x"][target].astype(np.float64)
        sig.append(float(np.std(x - r)) if x.size > 2 else float("nan"))
    return DetectionCurve(np.asarray(ranges_m, float), np.array(pd), np.array(fa), np.array(sig))


def range_at(curve: DetectionCurve, probability: float) -> float:
    """The range at which the detection probability falls through ``probability`` (linear between the
    two ranges that bracket it; the last range if it never does)."""
    pd = curve.p_detect
    below = np.nonzero(pd < probability)[0]
    if below.size == 0:
        return float(curve.range_m[-1])
    j = int(below[0])
    if j == 0:
        return float(curve.range_m[0])
    r0, r1, p0, p1 = curve.range_m[j - 1], curve.range_m[j], pd[j - 1], pd[j]
    return float(r0 + (p0 - probability) / max(p0 - p1, 1e-12) * (r1 - r0))
