"""The physics stage: received power, detection, range noise and output scale for every hit.

Turns :class:`~rt_lidar.source.Hits` into points of :data:`~rt_lidar.points.POINT_DTYPE` with the
kernels of :mod:`kernels.intensity`. A ray that crossed glass reports whichever echo is stronger, the
glass's own mirror-like reflection or the attenuated object behind it; below the detection threshold
the ray drops.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from kernels import (
    apply_range_noise,
    calibrated_reflectivity_output,
    effective_reflectance,
    received_power,
    received_power_output,
    two_way_transmission,
)
from rt_lidar.materials import MaterialArrays, MaterialTable, load_material_table
from rt_lidar.points import POINT_DTYPE, PointFlag
from rt_lidar.presets import SensorPreset
from rt_lidar.source import Hits
from rt_lidar.weather import WeatherConfig, weather_model

__all__ = ["PhysicsConfig", "PhysicsResult", "SensorPhysics"]


@dataclass(frozen=True)
class PhysicsConfig:
    """Scenario settings of the physics stage (the sensor's own numbers come from its preset)."""

    extinction_per_m: float = 1e-4
    """Clear-air extinction coefficient a (1/m) in exp(-2 a R)."""
    range_noise: bool = True
    weather: WeatherConfig | None = None
    """Rain, fog and snow (:mod:`rt_lidar.weather`); None = clear air."""


@dataclass
class PhysicsResult:
    """Detected points of one batch plus what the batch fired and lost."""

    points: np.ndarray  # POINT_DTYPE, t = absolute firing time in ns (the sweep makes it scan-relative)
    power_w: np.ndarray  # received power of each kept point
    fired: int
    dropped: int


class SensorPhysics:
    """Received power and output of one sensor for the materials of one scene."""

    def __init__(self, preset: SensorPreset, materials: MaterialArrays, config: PhysicsConfig | None = None):
        self.preset = preset
        self.materials = materials
        self.config = config or PhysicsConfig()

    @classmethod
    def from_preset(
        cls,
        preset: SensorPreset,
        material_names: list[str],
        table: MaterialTable | None = None,
        config: PhysicsConfig | None = None,
    ) -> SensorPhysics:
        """Physics for ``preset`` with the scene's material names, evaluated at the preset's wavelength."""
        table = table or load_material_table()
        return cls(preset, table.arrays(material_names, preset.optics.wavelength_nm), config)

    def set_weather(self, weather: dict[str, float] | None) -> None:
        """Switch the weather (a dict of :class:`~rt_lidar.weather.WeatherConfig` fields, or None)."""
        cfg = WeatherConfig(**weather) if weather else None
        self.config = dataclasses.replace(self.config, weather=cfg)

    def _power(
        self, range_m: np.ndarray, cos_inc: np.ndarray, mat: np.ndarray, extra_t: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        m = self.materials
        p = self.preset
        refl = effective_reflectance(
            cos_inc.astype(np.float32),
            mat,
            m.diffuse,
            m.retro_gain,
            m.retro_exponent,
            m.specular_gain,
            m.specular_exponent,
        )
        trans = two_way_transmission(range_m, self.config.extinction_per_m) * extra_t
        power = received_power(
            range_m,
            refl,
            trans,
            p.pulse.peak_power_w,
            p.optics.receiver_aperture_m,
            p.optics.system_efficiency,
        )
        return power, refl

    def apply(self, hits: Hits, rng: np.random.Generator) -> PhysicsResult:
        """Detected points of ``hits``; ``rng`` gives the range-noise draws (seeded upstream)."""
        p = self.preset
        threshold = p.pulse.detection_threshold_w
        n = len(hits)
        obj = hits.material >= 0
        glass = hits.glass_material >= 0

        # Misses have range inf, so their power comes out 0 without masking every array first.
        with np.errstate(invalid="ignore", over="ignore"):
            power, refl = self._power(
                hits.range_m, hits.cos_incidence, np.maximum(hits.material, 0), hits.glass_transmission
            )
        power = np.where(obj, power, np.float32(0)).astype(np.float32, copy=False)
        rng_m = hits.range_m.copy()
        segment = hits.segment.copy()
        flags = np.where(glass & obj, np.uint8(PointFlag.THROUGH_GLASS), np.uint8(0)).astype(np.uint8)
        if glass.any():
            gp, grefl = self._power(
                hits.glass_range_m[glass],
                hits.glass_cos[glass],
                hits.glass_material[glass],
                np.ones(int(glass.sum()), np.float32),
            )
            gi = np.nonzero(glass)[0]
            stronger = gp > power[gi]
            take = gi[stronger]
            power[take], refl[take] = gp[stronger], grefl[stronger]
            rng_m[take] = hits.glass_range_m[take]
            segment[take] = hits.glass_segment[take]
            flags[take] = 0

        if self.config.weather is not None:
            weather_model(self.config.weather).apply(
                rng_m, power, flags, hits.direction, p, threshold, rng,
                clear_air_per_m=self.config.extinction_per_m, reflectivity=refl, segment=segment,
            )  # fmt: skip
        keep = (power >= threshold) & (rng_m >= p.range.min_m) & (rng_m <= p.range.max_m)
        idx = np.nonzero(keep)[0]
        pw = power[idx]
        measured = rng_m[idx]
        if self.config.range_noise and p.range.accuracy_m > 0:
            measured = apply_range_noise(
                measured, rng.standard_normal(idx.size, np.float32), p.range.accuracy_m, pw, threshold
            )
            measured = np.maximum(measured, 0.0)

        out = np.zeros(idx.size, dtype=POINT_DTYPE)
        xyz = hits.direction[idx] * measured[:, None].astype(np.float32)
        out["x"], out["y"], out["z"] = xyz[:, 0], xyz[:, 1], xyz[:, 2]
        if p.output.intensity == "calibrated_reflectivity":
            out["intensity"] = calibrated_reflectivity_output(
                refl[idx], p.output.diffuse_max or p.output.intensity_max, p.output.intensity_max
            )
        else:
            out["intensity"] = received_power_output(pw, threshold, p.output.intensity_max)
        out["reflectivity"] = refl[idx]
        out["ring"] = hits.firings.ring[idx]
        out["t"] = hits.firings.t_ns[idx]
        out["flags"] = flags[idx]
        out["segment"] = segment[idx]
        return PhysicsResult(points=out, power_w=pw, fired=n, dropped=n - idx.size)
