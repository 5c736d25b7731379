"""What a vendor file gave: its beam table and the few scan figures some formats carry.

Every reader (:mod:`.ouster`, :mod:`.velodyne`, :mod:`.hesai`, :mod:`.robosense`) returns a
:class:`VendorTable`; :func:`rt_lidar.sensor.vendor.build.preset_from_table` makes the preset from it
and the model's datasheet figures. Angles here are already in the presets' conventions: elevation up
positive, ``azimuth_offset_deg`` counter-clockwise positive seen from above, in [-180, 180).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rt_lidar.errors import PresetError

__all__ = ["VendorTable", "check_angles", "check_azimuths", "refuse", "wrap_deg"]


@dataclass
class VendorTable:
    """One vendor file's beam table and what else it said."""

    path: str
    vendor: str
    layout: str
    """The file's format in words (``Ouster metadata, nested (fw 2.4+/3.x)``)."""
    beams: list[dict[str, Any]]
    """Per beam, in the preset's ring order: ``ring``, ``laser_id``, ``elevation_deg``,
    ``azimuth_offset_deg``, optionally ``firing_offset_us`` and the Velodyne corrections."""
    model: str | None = None
    """The product the file names (or its file name or comments do), None when it does not say."""
    model_said_by: str = ""
    """Where ``model`` came from (``prod_line``, ``comment``, ``file name``)."""
    columns_per_rev: int | None = None
    rotation_hz: float | None = None
    scan_extra: dict[str, Any] = field(default_factory=dict)
    """Scan fields the file gives beyond the model's (the AT128's ``mirror_fields_deg``)."""
    from_file: dict[str, str] = field(default_factory=dict)
    """Preset field -> what in the file gave it (provenance)."""
    unused: list[str] = field(default_factory=list)
    """What the file holds that the preset does not use (one phrase each)."""
    warnings: list[str] = field(default_factory=list)
    alternatives: dict[int, tuple[list[dict[str, Any]], str]] = field(default_factory=dict)
    """Other beam tables the file may mean, by beam count, with why (a db.xml whose ``enabled_`` mask
    disagrees with its calibrated entries): taken when the model has that count and not ``len(beams)``."""


def refuse(path: str, what: str, problem: str) -> PresetError:
    """The one-line error for a vendor file: names the file, the part and what is wrong or missing."""
    return PresetError(path, what, problem)


def wrap_deg(a: float) -> float:
    """``a`` in [-180, 180)."""
    return (a + 180.0) % 360.0 - 180.0


def check_azimuths(path: str, azimuths_deg: list[float], where: str) -> None:
    """Refuse azimuth offsets beyond a full turn (before they are wrapped to +-180): a unit mistake."""
    for i, a in enumerate(azimuths_deg):
        if not math.isfinite(a) or abs(a) > 360.0:
            raise refuse(path, f"{where}[{i}]", f"azimuth {a:g} deg is outside -360..360 deg")


def check_angles(path: str, beams: list[dict[str, Any]], where: str) -> None:
    """Refuse tables with non-finite angles, elevations outside +-90 deg or all equal."""
    if not beams:
        raise refuse(path, where, "holds no beams")
    for i, b in enumerate(beams):
        el, az = b["elevation_deg"], b["azimuth_offset_deg"]
        if not (math.isfinite(el) and math.isfinite(az)):
            raise refuse(path, f"{where}[{i}]", f"angle is not a number (elevation {el}, azimuth {az})")
        if not -90.0 <= el <= 90.0:
            raise refuse(path, f"{where}[{i}]", f"elevation {el:g} deg is outside -90..90 deg")
    first = beams[0]["elevation_deg"]
    if len(beams) > 1 and all(b["elevation_deg"] == first for b in beams):
        raise refuse(
            path, where, f"all {len(beams)} elevations are {first:g} deg: not a calibrated beam table"
        )
