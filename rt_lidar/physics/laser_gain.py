"""Each laser's own sensitivity: a real multi-beam unit's lasers differ in transmit power and receiver gain.

In KITTI's HDL-64E S2 frame 000008 four lasers drop 32-42 % of their rays in the camera crop where their
neighbours, aimed alike at the same cars, drop 8-25 % (docs/realism.md, changes 32 and 42). A laser's
gain ``g`` multiplies the power of its echoes (:meth:`rt_lidar.physics.echo.EchoModel.beam_focus`, where
each laser's own focus already acts): detection sees it as a threshold of ``T / g``, the uncalibrated
amplitude carries it, and calibrated reflectivity divides it out again, as a calibrated unit's factory
table does laser by laser.

Where a gain comes from, per beam:

- ``Beam.laser_gain`` set in the preset (a list over ``[[beams]]``): that laser's gain;
- otherwise drawn per unit: ``g = exp(s z)`` with ``s = receiver.laser_gain_spread`` and ``z`` the unit's
  lasers' standard normal draws from ``receiver.laser_unit_seed``, standardised over the drawn lasers
  (mean 0, standard deviation 1), so a unit's log-gains have exactly the stated spread and its
  geometric mean gain is 1: the preset's sensitivity (its datasheet ranges) stays the unit's average.

The draw depends on the preset only (the unit seed is the preset's, not the run's): every run of a preset
is the same unit, and the same preset gives the same bytes. ``laser_gain_spread = 0`` and no beam's
``laser_gain`` leave the physics as it was (no per-laser factor is applied at all).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from rt_lidar.sensor.presets import SensorPreset

__all__ = ["UNIT_STREAM", "alike_lasers", "laser_gains", "ring_gains"]

UNIT_STREAM = 0x6C61736572
"""The unit's draw's stream, beside its seed (``SeedSequence([laser_unit_seed, UNIT_STREAM])``): no other
draw of the project uses it."""


def laser_gains(preset: SensorPreset) -> np.ndarray:
    """Each beam's gain (float64, in ``preset.beams``' order) as the module docstring gives it."""
    beams = preset.beams
    spread = float(preset.receiver.laser_gain_spread)
    gains = np.array([1.0 if b.laser_gain is None else float(b.laser_gain) for b in beams])
    drawn = np.array([b.laser_gain is None for b in beams])
    n = int(drawn.sum())
    if spread > 0.0 and n >= 2:
        seq = np.random.SeedSequence([int(preset.receiver.laser_unit_seed), UNIT_STREAM])
        z = np.random.Generator(np.random.PCG64(seq)).standard_normal(len(beams))[drawn]
        z = (z - z.mean()) / z.std()
        gains[drawn] = np.exp(spread * z)
    return gains


@functools.lru_cache(maxsize=64)
def ring_gains(preset: SensorPreset) -> np.ndarray | None:
    """Each ring's gain (float32, indexed by ring; read-only, built once per preset), or None where every
    laser is alike (no spread, no beam's own gain): then nothing is multiplied."""
    if preset.receiver.laser_gain_spread == 0.0 and all(b.laser_gain is None for b in preset.beams):
        return None
    out = np.ones(max(b.ring for b in preset.beams) + 1, np.float32)
    for b, g in zip(preset.beams, laser_gains(preset), strict=True):
        out[b.ring] = np.float32(g)
    out.flags.writeable = False
    return out


def alike_lasers(preset: SensorPreset) -> SensorPreset:
    """``preset`` with every laser at gain 1 (no spread, no beam's own gain): its average laser, the one
    its datasheet figures describe (``preset`` itself where its lasers are alike already)."""
    if ring_gains(preset) is None:
        return preset
    beams = tuple(dataclasses.replace(b, laser_gain=None) for b in preset.beams)
    receiver = dataclasses.replace(preset.receiver, laser_gain_spread=0.0)
    return dataclasses.replace(preset, beams=beams, receiver=receiver)
