"""Ouster product lines' datasheet figures."""

from __future__ import annotations

from rt_lidar.sensor.vendor.model_spec import ModelSpec

__all__ = ["OUSTER"]

OUSTER: tuple[ModelSpec, ...] = (
    ModelSpec(
        "OS0",
        "Ouster",
        "os1-64",
        (32, 64, 128),
        "ouster-legacy",
        75.0,
        35.0,
        0.3,
        0.03,
        865.0,
        rotation_hz_range=(10.0, 20.0),
        columns_per_rev=1024,
        aliases=("OS-0",),
        note="OS0 rev7 datasheet: 75 m (35 m at 10 %), 865 nm, 90 deg fan",
    ),
    ModelSpec(
        "OS1",
        "Ouster",
        "os1-64",
        (16, 32, 64, 128),
        "ouster-legacy",
        200.0,
        100.0,
        0.5,
        0.03,
        865.0,
        rotation_hz_range=(10.0, 20.0),
        columns_per_rev=1024,
        aliases=("OS-1",),
        note="OS1 rev7 datasheet: 200 m (100 m at 10 %), 865 nm, 42.4 deg fan",
    ),
    ModelSpec(
        "OS2",
        "Ouster",
        "os1-64",
        (32, 64, 128),
        "ouster-legacy",
        400.0,
        200.0,
        0.8,
        0.03,
        865.0,
        rotation_hz_range=(10.0, 20.0),
        columns_per_rev=1024,
        aliases=("OS-2",),
        note="OS2 rev7 datasheet: 400 m (200 m at 10 %), 865 nm, 22.5 deg fan",
    ),
    ModelSpec(
        "OS1 gen1",
        "Ouster",
        "os1-64",
        (16, 32, 64),
        "ouster-legacy",
        120.0,
        40.0,
        0.8,
        0.015,
        850.0,
        rotation_hz_range=(10.0, 20.0),
        columns_per_rev=1024,
        aliases=("OS1-gen1", "OS-1 gen1"),
        note="OS1 gen1 datasheet: 120 m (40 m at 10 %), 850 nm",
    ),
)
