"""Sunlight on the device-resident frame (docs/gpu.md): each pulse's background power and noise floor,
and the pulses the sun blinds, on the frame's array module ``xp`` (CuPy on ``--device cuda``, NumPy on
the CPU twin), by the host's own code (:mod:`rt_lidar.physics.ambient`).

The source casts the sun cosines where it casts the rays (``Hits.sun_cos`` and ``beam_sun_cos``,
:class:`~rt_lidar.pipeline.device_frame.DeviceWorldSource`); here they become the (P,) noise floors the
detection, the waveform's noise, the range noise, the false alarms and the intensity chain read, as
:meth:`SensorPhysics.apply` and :func:`~rt_lidar.physics.ambient.noise_detections` use them on the host.
Without sunlight the floor stays one number for every pulse (the frame's bytes unchanged).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rt_lidar.kernels.ambient import false_alarm_probability, receiver_sigma_w
from rt_lidar.physics.ambient import pulse_background_w, sun_blinds

__all__ = ["at_pulses", "blinded_pulses", "false_alarm_chance", "noise_floor", "per_pulse"]


def noise_floor(physics: Any, hits: Any) -> tuple[Any, float | Any]:
    """(background W (P,) or None at night, noise floor W): the floor one float without sunlight,
    else (P,) float64 on the hits' array module (:func:`~rt_lidar.physics.ambient.pulse_noise_w`)."""
    p = physics.preset
    rx, thr = p.receiver, p.pulse.detection_threshold_w
    lux = physics.config.sun_illuminance_lux
    if lux <= 0:
        return None, float(receiver_sigma_w(rx.dark_sigma_w(thr), rx.shot_w, np.zeros(1))[0])
    background = pulse_background_w(physics.echo, lux, hits)
    return background, receiver_sigma_w(rx.dark_sigma_w(thr), rx.shot_w, background)


def per_pulse(xp: Any, sigma: float | Any, n: int) -> Any:
    """The noise floor as (n,) float64 on ``xp``: one value repeated, or the floors themselves."""
    if isinstance(sigma, float):
        return xp.full(n, sigma, xp.float64)
    return sigma.astype(xp.float64)


def at_pulses(sigma: float | Any, pulse: Any) -> float | Any:
    """The noise floor of the pulses ``pulse``: the one float, or the (P,) floors taken there."""
    return sigma if isinstance(sigma, float) else sigma[pulse]


def blinded_pulses(physics: Any, hits: Any) -> Any:
    """(P,) bool: the pulses whose beam points within ``optics.sun_blinding_deg`` of the sun (their
    true returns are lost and they report noise, :func:`~rt_lidar.physics.ambient.noise_detections`),
    but not behind a blocked window;
    None where no sun is out or the hits carry no beam cosines."""
    if physics.config.sun_illuminance_lux <= 0 or hits.beam_sun_cos is None:
        return None
    return sun_blinds(hits.beam_sun_cos[:: hits.subrays], physics.preset.optics.sun_blinding_deg, hits)


def false_alarm_chance(xp: Any, threshold_w: float, sigma: float | Any, n_cells: float, blinded: Any) -> Any:
    """Each pulse's chance of a false detection: one float without sunlight; else (P,), 1 where
    ``blinded`` (as :func:`~rt_lidar.physics.ambient.noise_detections`)."""
    if isinstance(sigma, float):
        return float(false_alarm_probability(threshold_w, np.array([sigma]), n_cells)[0])
    p_fa = false_alarm_probability(threshold_w, sigma, n_cells)
    return p_fa if blinded is None else xp.where(blinded, 1.0, p_fa)
