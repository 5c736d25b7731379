"""What a product's datasheet says beyond its beam table (:class:`ModelSpec`), and the helpers the
vendors' tables (``models_<vendor>.py``) build firing schedules with."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["FiringUs", "ModelSpec", "firing_table", "model_key", "velodyne_steps"]

FiringUs = Callable[[int], float]
"""Firing offset (us) within the firing cycle of a laser id."""


@dataclass(frozen=True)
class ModelSpec:
    """What a product's datasheet (and its driver's firing table) says beyond the beam table."""

    name: str
    vendor: str
    template: str
    """Shipped preset whose optics, pulse, receiver, output and returns stand in for this model's."""
    beams: tuple[int, ...]
    """Beam counts this product has (a file with another count is refused)."""
    packet_format: str
    max_m: float
    range_10pct_m: float
    min_m: float = 0.5
    accuracy_m: float = 0.03
    wavelength_nm: float = 905.0
    rotation_hz: float = 10.0
    rotation_hz_range: tuple[float, float] = (5.0, 20.0)
    firing_cycle_us: float | None = None
    """Time between two firings of the same laser; None: ``columns_per_rev`` instead."""
    columns_per_rev: int | None = None
    firing: FiringUs | None = None
    """Firing offset of a laser id within the cycle (None: all fire together, or from a firetime file)."""
    distance_resolution_m: float | None = None
    aliases: tuple[str, ...] = ()
    note: str = ""
    extra: dict[str, float] = field(default_factory=dict)


def model_key(name: str) -> str:
    """A product name without case, spaces and punctuation (``VLP-32C`` -> ``vlp32c``)."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def velodyne_steps(step_us: float, group: int = 1) -> FiringUs:
    return lambda lid: (lid // group) * step_us


def firing_table(times_us: tuple[float, ...]) -> FiringUs:
    """Firing offset by laser id (the row of the angle file) from a driver's firing table."""
    return lambda lid: times_us[lid % len(times_us)]
