"""Velodyne products' datasheet figures and firing schedules (by laser id)."""

from __future__ import annotations

from typing import Any

from rt_lidar.sensor.vendor.model_spec import ModelSpec, velodyne_steps

__all__ = ["VELODYNE"]


def _hdl64(lid: int) -> float:
    # HDL-64E S2/S3: upper and lower block fire together, four lasers a 6 us group
    return (lid % 32) // 4 * 6.0 + (0.0, 1.26, 2.46, 3.66)[lid % 4]


_VLP16: dict[str, Any] = dict(
    firing_cycle_us=55.296, firing=velodyne_steps(2.304), distance_resolution_m=0.002
)
_VLP32: dict[str, Any] = dict(
    firing_cycle_us=55.296, firing=velodyne_steps(2.304, 2), distance_resolution_m=0.004
)
_VLS128_CHANNEL_US = 8.0 / 3.0  # firmware 5.1.7 (Rev3 manual); velodyne_decoder and VeloView time it so


def _vls128(lid: int) -> float:
    # eight lasers a firing group; the groups of lasers 64-127 come after a two-group gap
    return (lid // 8 + lid // 64 * 2) * _VLS128_CHANNEL_US


_VLS128: dict[str, Any] = dict(
    firing_cycle_us=20 * _VLS128_CHANNEL_US, firing=_vls128, distance_resolution_m=0.004
)

VELODYNE: tuple[ModelSpec, ...] = (
    ModelSpec(
        "VLP-16",
        "Velodyne",
        "vlp-16",
        (16,),
        "velodyne-vlp16",
        100.0,
        100.0,
        0.5,
        0.03,
        903.0,
        aliases=("Puck", "VLP16"),
        note="VLP-16 datasheet: 100 m, +-3 cm, 903 nm",
        **_VLP16,
    ),
    ModelSpec(
        "Puck LITE",
        "Velodyne",
        "vlp-16",
        (16,),
        "velodyne-vlp16",
        100.0,
        100.0,
        0.5,
        0.03,
        903.0,
        note="Puck LITE datasheet: 100 m, +-3 cm, 903 nm",
        **_VLP16,
    ),
    ModelSpec(
        "Puck Hi-Res",
        "Velodyne",
        "vlp-16",
        (16,),
        "velodyne-vlp16",
        100.0,
        100.0,
        0.5,
        0.03,
        903.0,
        aliases=("VLP-16 Hi-Res", "VLP16HiRes"),
        note="Puck Hi-Res datasheet: 100 m, +-3 cm, 903 nm, +-10 deg",
        **_VLP16,
    ),
    ModelSpec(
        "VLP-32A",
        "Velodyne",
        "vlp-32c",
        (32,),
        "velodyne-vlp32c",
        200.0,
        200.0,
        1.0,
        0.03,
        903.0,
        note="Ultra Puck (VLP-32C) datasheet, the A build: 200 m, 903 nm",
        **_VLP32,
    ),
    ModelSpec(
        "VLP-32B",
        "Velodyne",
        "vlp-32c",
        (32,),
        "velodyne-vlp32c",
        200.0,
        200.0,
        1.0,
        0.03,
        903.0,
        note="Ultra Puck (VLP-32C) datasheet, the B build: 200 m, 903 nm",
        **_VLP32,
    ),
    ModelSpec(
        "VLP-32C",
        "Velodyne",
        "vlp-32c",
        (32,),
        "velodyne-vlp32c",
        200.0,
        200.0,
        1.0,
        0.03,
        903.0,
        aliases=("Ultra Puck", "VLP-32MR"),
        note="VLP-32C datasheet: 200 m, +-3 cm, 903 nm",
        **_VLP32,
    ),
    ModelSpec(
        "HDL-32E",
        "Velodyne",
        "hdl-32e",
        (32,),
        "velodyne-hdl32",
        100.0,
        70.0,
        1.0,
        0.02,
        903.0,
        firing_cycle_us=46.08,
        firing=velodyne_steps(1.152),
        distance_resolution_m=0.002,
        aliases=("HDL-32", "HDL32"),
        note="HDL-32E datasheet: 80-100 m, +-2 cm, 903 nm",
    ),
    ModelSpec(
        "HDL-64E",
        "Velodyne",
        "hdl-64e",
        (64,),
        "velodyne-hdl64",
        120.0,
        50.0,
        0.9,
        0.02,
        905.0,
        rotation_hz_range=(5.0, 15.0),
        firing_cycle_us=48.0,
        firing=_hdl64,
        distance_resolution_m=0.002,
        aliases=("HDL-64E S2", "HDL-64E S2.1", "HDL-64E S3", "HDL-64", "HDL-64E S1"),
        note="HDL-64E S2/S3 datasheet: 120 m (50 m at 10 %), +-2 cm, 905 nm",
    ),
    ModelSpec(
        "VLS-128",
        "Velodyne",
        "vls-128",
        (128,),
        "velodyne-vls128",
        245.0,
        220.0,
        1.0,
        0.03,
        903.0,
        aliases=("Alpha Prime", "VLS128", "HDL-128"),
        note="Alpha Prime (VLS-128) datasheet: 245 m, +-3 cm, 903 nm; 0.004 m distance unit",
        **_VLS128,
    ),
)
