"""The binary overlap of a biaxial receiver for point scatterers (issue 40's first and second pass,
kept for comparison) and the smallest drop counted.

A spinning lidar's transmitter and receiver sit side by side (the baseline ``b``); the receiver sees
the cone of full angle ``theta_r`` from its aperture ``D_r``, the beam spreads from the exit diameter
``d0`` at ``theta_t``. :func:`point_overlap` is the share of the beam's cross-section inside that cone
(the geometric overlap function of Halldorsson & Langerholc 1978, Appl. Opt. 17(2) 240, for a uniform
beam): a drop inside returned its whole echo, one outside nothing. Since the third pass the weather
model uses :mod:`rt_lidar.physics.particle_receiver` instead, where a near drop inside that cone returns
only the share of its light that its blurred image puts on the detector, so big near drops are seen
and small ones not (docs/rain.md).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["DROP_D_MIN_MM", "point_overlap"]

DROP_D_MIN_MM = 0.1
"""Smallest drop counted (mm). Drops under 0.5 mm are spheres that keep their Mie glory (``rho`` 0.5-1 at
905 nm, :func:`rt_lidar.physics.drop_backscatter.drop_reflectance`), so a 0.3 mm drop returns as much
as a 1.7 mm oblate one; a 0.1 mm drop returns 1/16 of a 1.5 mm one and reaches a VLP-16's threshold
only inside ~1 m, where its receiver sees nothing. (The weather kernels draw drops of 0.5-6 mm with the
equivalent reflectance; only the count includes the small ones exactly.)"""


def point_overlap(
    z: Any, beam: tuple[float, float, float], baseline_m: float, fov_rad: float, aperture_m: float
) -> np.ndarray:
    """Share of the beam's cross-section (exit diameter, full divergences h and v in rad) at ranges
    ``z`` that lies in a receiver field of full angle ``fov_rad`` from an aperture of ``aperture_m``
    whose axis runs parallel ``baseline_m`` away: the area of the two discs' intersection over the
    beam's (the beam as a disc of its equal-area divergence)."""
    z = np.asarray(z, float)
    d0, th_h, th_v = beam
    rt = (d0 + math.sqrt(th_h * th_v) * z) / 2.0
    rr = (aperture_m + fov_rad * z) / 2.0
    d = float(baseline_m)
    inside = d <= np.abs(rr - rt)
    apart = d >= rt + rr
    with np.errstate(invalid="ignore", divide="ignore"):
        c1 = np.clip((d * d + rt * rt - rr * rr) / (2.0 * d * rt), -1.0, 1.0) if d > 0 else np.ones_like(z)
        c2 = np.clip((d * d + rr * rr - rt * rt) / (2.0 * d * rr), -1.0, 1.0) if d > 0 else np.ones_like(z)
        lens = (
            rt * rt * np.arccos(c1)
            + rr * rr * np.arccos(c2)
            - 0.5 * np.sqrt(np.maximum((-d + rt + rr) * (d + rt - rr) * (d - rt + rr) * (d + rt + rr), 0.0))
        )
    full = np.minimum(rt, rr) ** 2 * math.pi
    area = np.where(apart, 0.0, np.where(inside, full, lens))
    return np.asarray(np.clip(area / (math.pi * rt * rt), 0.0, 1.0))
