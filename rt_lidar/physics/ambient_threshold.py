"""A photon-counting receiver's threshold over the scene's ambient light (constant false-alarm rate).

A SPAD receiver counts photons; between echoes it counts the background (sunlight scattered by what the
pixel looks at) and its own dark counts. It keeps its false-alarm rate (Ouster's gen-1 datasheet: "false
positive rate of 1/10,000") by setting its threshold at a fixed multiple ``k`` (``threshold_snr``) of
the counts' fluctuation, ``sqrt(floor^2 + b)`` for ``b`` background counts in the echo's window and a
floor ``floor`` with no light (``receiver.photon_floor_counts``). A datasheet that quotes its ranges "in
100 klx sunlight" thus describes the threshold at that background; at night the same receiver detects
echoes ``sqrt(floor^2 + b_ds) / floor`` times weaker.

The datasheet fixes ``b_ds`` with the preset's count scale: an echo at the datasheet's threshold gives
``counts_at_threshold`` counts, which is ``k sqrt(floor^2 + b_ds)``, so
``b_ds = (counts_at_threshold / k)^2 - floor^2``. The scene's background is the datasheet's scaled by its
illuminance, ``b = b_ds E / E_ds`` (the datasheet's reference: its target lit square-on by the sun); one
threshold per scene, not per pixel. Counts stay photons: the counts per watt do not change with the
threshold, so an echo reads the same counts by day and by night; only which echoes are detected changes.
The sun's per-ray background still adds its own shot noise (:mod:`rt_lidar.physics.ambient`).
"""

from __future__ import annotations

import dataclasses
import math

from rt_lidar.sensor.presets import SensorPreset

__all__ = ["background_counts_at_datasheet", "preset_at_ambient", "threshold_ratio"]


def background_counts_at_datasheet(preset: SensorPreset) -> float | None:
    """Background counts in the echo's window that the datasheet's threshold implies (``b_ds``), or None
    for a receiver without a constant false-alarm-rate threshold."""
    rx = preset.receiver
    if rx.photon_floor_counts is None:
        return None
    return (preset.output.counts_at_threshold / rx.threshold_snr) ** 2 - rx.photon_floor_counts**2


def threshold_ratio(preset: SensorPreset, ambient_lux: float) -> float:
    """The threshold at ``ambient_lux`` over the datasheet's (1 at the datasheet's ambient, and for a
    fixed-threshold receiver at every ambient)."""
    b_ds = background_counts_at_datasheet(preset)
    if b_ds is None:
        return 1.0
    rx = preset.receiver
    floor2 = (rx.photon_floor_counts or 0.0) ** 2
    b = b_ds * max(ambient_lux, 0.0) / rx.datasheet_ambient_lux
    return math.sqrt((floor2 + b) / (floor2 + b_ds))


def preset_at_ambient(preset: SensorPreset, ambient_lux: float) -> SensorPreset:
    """``preset`` with its threshold for a scene lit with ``ambient_lux``: the threshold and the counts at
    it scaled by :func:`threshold_ratio` (counts per watt unchanged), the receiver's saturation held at
    the datasheet's absolute power. The same object where nothing changes (fixed-threshold receivers,
    the datasheet's own ambient), so those scans keep their bytes."""
    k = threshold_ratio(preset, ambient_lux)
    if k == 1.0:
        return preset
    thr = preset.pulse.detection_threshold_w
    rx = preset.receiver
    return dataclasses.replace(
        preset,
        pulse=dataclasses.replace(preset.pulse, detection_threshold_w=thr * k),
        output=dataclasses.replace(preset.output, counts_at_threshold=preset.output.counts_at_threshold * k),
        receiver=dataclasses.replace(rx, saturation_w=rx.saturation(thr)),
    )
