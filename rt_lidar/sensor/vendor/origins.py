"""Per-beam origins as the vendors' decoders place them, in the preset's head frame.

A preset's beam origin (:class:`~rt_lidar.sensor.presets.Beam`'s ``origin_radial_m``,
``origin_lateral_m``, ``origin_up_m``) is given in the frame of its column's azimuth (the firing's
azimuth less the beam's azimuth offset) and turns with the head:

- Ouster (ouster-sdk's XYZ table): ``beam_to_lidar_transform``'s out and up, turned with the encoder
  (:mod:`.ouster` reads them);
- Velodyne (velodyne_decoder's geometry, checked against it): ``vert_offset_correction`` straight up,
  ``horiz_offset_correction`` to the beam's left, turned with the beam's own azimuth (``rotation -
  rot_correction``), so they are turned here into the column's frame;
- RoboSense (rs_driver's ``RX``, ``RZ`` lens centre per model, not in the file): out along the encoder
  azimuth and up (rs_driver's ``RY`` is declared but not used by its decoders).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ROBOSENSE_LENS_CENTRE_M", "robosense_origin", "velodyne_origin"]

ROBOSENSE_LENS_CENTRE_M: dict[str, tuple[float, float]] = {
    "RS-16": (0.03825, 0.0),
    "RS-32": (0.03997, 0.0),
    "RS-Bpearl": (0.01473, 0.09427),
    "RS-Helios": (0.03498, 0.0),
    "RS-Helios-16P": (0.03498, 0.0),
}
"""Model -> (RX, RZ) m: rs_driver's ``getConstParam`` lens centre of its decoder for that model."""


def velodyne_origin(beam: dict[str, Any]) -> dict[str, float]:
    """The origin fields of a Velodyne beam (``{}`` where it has no offsets)."""
    vo = float(beam.get("vert_offset_correction_m") or 0.0)
    ho = float(beam.get("horiz_offset_correction_m") or 0.0)
    if not (vo or ho):
        return {}
    a = math.radians(float(beam["azimuth_offset_deg"]))
    # velodyne_decoder: x, y = d cos(el) (sin, cos)(rot) + ho (-cos, sin)(rot), z = d sin(el) + vo, i.e.
    # the origin is ho to the beam's left and vo up, in the frame of the beam's own azimuth
    return {
        "origin_radial_m": round(-ho * math.sin(a), 12) + 0.0,
        "origin_lateral_m": round(ho * math.cos(a), 12) + 0.0,
        "origin_up_m": vo,
    }


def robosense_origin(model: str) -> dict[str, float]:
    """The origin fields of every beam of a RoboSense ``model`` (``{}`` where rs_driver's lens centre
    for it is not known here)."""
    lens = ROBOSENSE_LENS_CENTRE_M.get(model)
    if lens is None:
        return {}
    return {"origin_radial_m": lens[0], "origin_up_m": lens[1]}
