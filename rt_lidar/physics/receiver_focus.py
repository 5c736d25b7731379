"""The receiver lens's focus: echoes nearer than the distance it is focused at are blurred on the detector.

A multi-beam lidar images each laser's spot through one receiver lens onto that laser's detector. The lens
is focused at a finite distance F (Velodyne's HDL-64E calibrations give it per laser as ``focal_distance``:
10.5-24 m for the upper block of the S3 unit in ``../shared/reference/calibrations/64e_s3-xiesc.yaml``,
median 15 m; 9-13.5 m for most of the lower block), and Velodyne's drivers add ``focal_slope x |256 (1 -
F / 131 m)^2 - 256 (1 - R / 131 m)^2|`` to the raw intensity to undo the loss away from it (ros-drivers
``velodyne_pointcloud/rawdata.cc``; the same in tier4's nebula). An echo from R < F images behind the
detector: in object-space angle its blur circle is ``D |1 / R - 1 / F|`` for a lens of aperture D (thin
lens, R and F much longer than its focal length), and with the spot's own image (the beam's divergence
``theta``, which the detector is matched to at focus) the detector collects

    eta(R) = theta^2 / (theta^2 + D^2 (1 / R - 1 / F)^2)   for R < F, 1 beyond.

For the HDL-64E S2 (D = 0.05 m, theta = 2 mrad, F = 15 m): 0.59 at 10 m, 0.32 at 8 m, 0.14 at 6 m, 0.045
at 4 m. It multiplies the receiver's range law (:mod:`rt_lidar.physics.receiver_range`), so detection sees
it and calibrated reflectivity divides it out again, as the drivers' focal compensation does: near dark
targets (a car's cabin through its glazing) drop or read 0 under the weak-return rule, as KITTI's S2 frame
shows, while the near road keeps its level. Presets without ``optics.receiver_focus_m`` are focused at
infinity here (eta = 1, their bytes unchanged). Not modelled: the transmitter-receiver parallax of a
biaxial head, which also moves a near spot's image off its detector.

Each laser may have its own focus (``Beam.receiver_focus_m``: a calibration's ``focal_distance``, e.g.
the S3's lower block at ~11 m). The preset-wide ``optics.receiver_focus_m`` stays in the receiver's path
factor (what every echo and the white reference target see); a beam with its own F changes its object
and glass echoes by :func:`beam_focus_ratio`, ``eta(R, F_beam) / eta(R, F_preset)``, and calibrated
reflectivity divides that ratio out again (:meth:`rt_lidar.physics.echo.EchoModel.beam_focus`), so a
laser's reading is focus-compensated with its own F as Velodyne's drivers compensate each laser's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rt_lidar.sensor.presets import SensorPreset

__all__ = ["beam_focus_ratio", "beam_inverse_focus", "focus_gain", "focus_parameters", "receiver_focus_gain"]


def focus_parameters(preset: SensorPreset) -> tuple[float, float, float] | None:
    """``(focus m, aperture m, spot rad)`` of the preset's receiver lens, or None when it is focused at
    infinity (no ``optics.receiver_focus_m``)."""
    o = preset.optics
    if o.receiver_focus_m is None:
        return None
    spot = 0.5e-3 * (o.beam_divergence_h_mrad + o.beam_divergence_v_mrad)
    return float(o.receiver_focus_m), float(o.receiver_aperture_m), max(spot, 1e-6)


def focus_gain(xp: Any, range_m: Any, params: tuple[float, float, float]) -> Any:
    """``eta(R)`` (float64 array of ``xp``, NumPy or CuPy) at ``range_m`` for ``focus_parameters``'s
    ``params``: the share of a near echo's image that falls on its detector (1 at and beyond focus)."""
    focus, aperture, spot = params
    r = xp.maximum(xp.asarray(range_m, dtype=xp.float64), 1e-3)
    blur = aperture * xp.maximum(1.0 / r - 1.0 / focus, 0.0)
    return spot * spot / (spot * spot + blur * blur)


def receiver_focus_gain(preset: SensorPreset, range_m: np.ndarray) -> np.ndarray | None:
    """:func:`focus_gain` on the host (float32), or None where the preset's receiver has no focus set."""
    params = focus_parameters(preset)
    if params is None:
        return None
    return np.asarray(focus_gain(np, range_m, params), np.float32)


def beam_inverse_focus(preset: SensorPreset) -> np.ndarray | None:
    """Each ring's ``1 / F`` (1/m, float64, indexed by ring) where any beam sets its own
    ``receiver_focus_m`` (the others take ``optics.receiver_focus_m``; +inf where a beam has no focus at
    all: no loss at any range); None when no beam does (the preset-wide focus alone applies)."""
    if all(b.receiver_focus_m is None for b in preset.beams):
        return None
    default = preset.optics.receiver_focus_m
    inv = np.full(max(b.ring for b in preset.beams) + 1, np.inf)
    for b in preset.beams:
        focus = b.receiver_focus_m if b.receiver_focus_m is not None else default
        if focus is not None:
            inv[b.ring] = 1.0 / focus
    return inv


def beam_focus_ratio(xp: Any, preset: SensorPreset, inverse_focus: Any, ring: Any, range_m: Any) -> Any:
    """``eta(R, F_beam) / eta(R, F_preset)`` (float64 array of ``xp``) of echoes at ``range_m`` fired by
    rings ``ring``, for :func:`beam_inverse_focus`'s ``inverse_focus`` (on ``xp``): what a beam's own focus
    changes against the preset-wide one that the path factor applies (1 where they agree)."""
    o = preset.optics
    spot = max(0.5e-3 * (o.beam_divergence_h_mrad + o.beam_divergence_v_mrad), 1e-6)
    aperture = float(o.receiver_aperture_m)
    r = xp.maximum(xp.asarray(range_m, dtype=xp.float64), 1e-3)
    inv_r = 1.0 / r
    blur = aperture * xp.maximum(inv_r - xp.take(inverse_focus, xp.asarray(ring, dtype=xp.int64)), 0.0)
    own = spot * spot / (spot * spot + blur * blur)
    if o.receiver_focus_m is None:
        return own
    blur0 = aperture * xp.maximum(inv_r - 1.0 / float(o.receiver_focus_m), 0.0)
    return own * ((spot * spot + blur0 * blur0) / (spot * spot))
