"""Which drop sizes make a preset's rain points, and where each size sits (issue 40, docs/rain.md change
49): the diagnostic behind the finding that the rain points' median range grows with the rain rate.

The rain tables (:meth:`rt_lidar.physics.weather.WeatherModel.params`) sum, at each range, the drops of
every size whose echo reaches the threshold (:func:`rt_lidar.physics.particle_receiver.detectable_density`).
Whether a drop of a given size is detected at a given range depends on the optics and the threshold, not
on the rain rate (only the path's extinction does, by a few per cent over 10 m). So each size band's range
distribution is the same at every rate, and what moves the rain points' range is how many drops of each
band the rate brings: :func:`detected_drops_by_size` splits the detectable drops into size bands and gives
each band's share and its 10 / 50 / 90 % ranges.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from rt_lidar.kernels.intensity import sensor_constant
from rt_lidar.physics.drop_backscatter import drop_cross_section
from rt_lidar.physics.particle_receiver import detectable_density
from rt_lidar.physics.weather import (
    WeatherConfig,
    rain_drop_counts,
    receiver_gain_law,
    receiver_optics,
    weather_model,
)
from rt_lidar.sensor.presets import CLEAR_AIR_EXTINCTION_PER_M, SensorPreset

__all__ = ["SIZE_BANDS_MM", "detected_drops_by_size"]

SIZE_BANDS_MM = (0.1, 0.5, 2.5, 3.0, 3.5, 4.0, 6.0)
"""Band edges (mm): drops under 0.5 mm are spheres that keep their glory (rho 0.7-1 while round, 0.10
at 0.5 mm; :mod:`rt_lidar.physics.drop_backscatter`; on a VLP-16 those of 0.3-0.5 mm are detected), 0.5-2.5 mm
oblate drops of rho ~ 0.03 that a VLP-16 detects almost nowhere, and half-millimetre bands of the big
oblate drops that fill enough of the beam farther out, the bigger the farther (a band of its own each,
so that the drop sizes' mix inside a band hardly moves with the rate)."""
QUANTILES = (0.1, 0.5, 0.9)


def _quantiles(z: np.ndarray, dens: np.ndarray) -> tuple[float, list[float]]:
    """(expected number per beam, the 10 / 50 / 90 % ranges) of a density over the grid ``z``."""
    cum = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2.0 * np.diff(z))])
    total = float(cum[-1])
    if total <= 0.0:
        return 0.0, [math.nan] * len(QUANTILES)
    return total, [float(np.interp(q, cum / total, z)) for q in QUANTILES]


def detected_drops_by_size(
    preset: SensorPreset,
    rain_mm_h: float,
    edges_mm: tuple[float, ...] = SIZE_BANDS_MM,
    n_ranges: int = 200,
) -> list[dict[str, Any]]:
    """Per size band ``[lo, hi)`` of ``edges_mm`` (the last band includes its upper edge): the share of
    ``preset``'s detectable rain drops per open-sky beam at ``rain_mm_h`` that the band holds, and its
    10 / 50 / 90 % ranges (m; NaN where the band holds none), from the same sum over the beam's
    cross-section and the drop sizes that the weather kernels' table is built from, at the preset's
    datasheet threshold, over the table's own span of ranges (``n_ranges`` of them)."""
    o = preset.optics
    threshold = preset.pulse.detection_threshold_w
    config = WeatherConfig(rain_mm_h=rain_mm_h)
    species = weather_model(config).params(preset, threshold).species[0]
    z = np.linspace(species.z0, species.z0 + species.dz * (len(species.cum) - 1), n_ranges)
    k_sensor = sensor_constant(preset.pulse.peak_power_w, o.receiver_aperture_m, o.system_efficiency)
    a_total = CLEAR_AIR_EXTINCTION_PER_M + config.extinction_per_m
    sizes, counts = rain_drop_counts(rain_mm_h)
    args = (receiver_optics(preset), k_sensor, threshold, a_total, receiver_gain_law(preset))

    def cross_section(d: np.ndarray) -> np.ndarray:
        return drop_cross_section(d, o.wavelength_nm)

    bands = []
    for i, (lo, hi) in enumerate(itertools.pairwise(edges_mm)):
        inside = (sizes >= lo) & ((sizes < hi) | ((i == len(edges_mm) - 2) & (sizes <= hi)))
        dens, _ = detectable_density(z, *args, sizes, np.where(inside, counts, 0.0), cross_section, 256)
        bands.append((lo, hi, *_quantiles(z, dens)))
    total = sum(b[2] for b in bands)
    return [
        {"d_mm": (lo, hi), "share": n / total if total > 0 else 0.0, "quantiles_m": q}
        for lo, hi, n, q in bands
    ]
