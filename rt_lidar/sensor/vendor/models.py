"""Datasheet figures of the products whose calibration files we read, by product name.

A vendor file holds the beam table (and sometimes the lidar mode), never the range, power or optics.
Those come from here: each model names the shipped preset whose non-beam fields (optics, pulse,
receiver, output, returns) stand in for it, and overrides the figures its own datasheet gives (range,
rotation rates, firing cycle, wavelength, packet layout). ``--model`` takes the vendor's product name;
case, spaces and punctuation are not significant (``puck hi-res`` = ``PuckHiRes``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rt_lidar.errors import PresetError

__all__ = ["MODELS", "ModelSpec", "find_model", "model_key", "models_for"]

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


def _velo(step_us: float, group: int = 1) -> FiringUs:
    return lambda lid: (lid // group) * step_us


def _table(times_us: tuple[float, ...]) -> FiringUs:
    """Firing offset by laser id (the row of the angle file) from a driver's firing table."""
    return lambda lid: times_us[lid % len(times_us)]


# rs_driver's firing tables (decoder_RS16/RS32/RSBP/RSHELIOS.hpp), by the row of angle.csv
_RS16_US = tuple(round(2.8 * i, 2) for i in range(16))
_RS32_US = (
    0.0,
    2.88,
    5.76,
    8.64,
    11.52,
    14.4,
    17.28,
    20.16,
    23.04,
    25.92,
    28.8,
    31.68,
    34.56,
    37.44,
    40.32,
    44.64,
    1.44,
    4.32,
    7.2,
    10.08,
    12.96,
    15.84,
    18.72,
    21.6,
    24.48,
    27.36,
    30.24,
    33.12,
    36.0,
    38.88,
    41.76,
    46.08,
)
_RSBP_US = (
    0.0,
    2.56,
    5.12,
    7.68,
    10.24,
    12.8,
    15.36,
    17.92,
    25.68,
    28.24,
    30.8,
    33.36,
    35.92,
    38.48,
    41.04,
    43.6,
    1.28,
    3.84,
    6.4,
    8.96,
    11.52,
    14.08,
    16.64,
    19.2,
    26.96,
    29.52,
    32.08,
    34.64,
    37.2,
    39.76,
    42.32,
    44.88,
)
_HELIOS_US = tuple(round(1.73 * i, 2) for i in range(32))


def _hdl64(lid: int) -> float:
    # HDL-64E S2/S3: upper and lower block fire together, four lasers a 6 us group
    return (lid % 32) // 4 * 6.0 + (0.0, 1.26, 2.46, 3.66)[lid % 4]


_VLP16: dict[str, Any] = dict(firing_cycle_us=55.296, firing=_velo(2.304), distance_resolution_m=0.002)
_VLP32: dict[str, Any] = dict(firing_cycle_us=55.296, firing=_velo(2.304, 2), distance_resolution_m=0.004)
_VLS128_CHANNEL_US = 8.0 / 3.0  # firmware 5.1.7 (Rev3 manual); velodyne_decoder and VeloView time it so


def _vls128(lid: int) -> float:
    # eight lasers a firing group; the groups of lasers 64-127 come after a two-group gap
    return (lid // 8 + lid // 64 * 2) * _VLS128_CHANNEL_US


_VLS128: dict[str, Any] = dict(
    firing_cycle_us=20 * _VLS128_CHANNEL_US, firing=_vls128, distance_resolution_m=0.004
)

_LIST: tuple[ModelSpec, ...] = (
    # ------------------------------------------------------------------ Velodyne
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
        note="Ultra Puck VLP-32A: 200 m, 903 nm",
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
        note="Ultra Puck VLP-32B: 200 m, 903 nm",
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
        firing=_velo(1.152),
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
    # ------------------------------------------------------------------ Hesai
    ModelSpec(
        "Pandar64",
        "Hesai",
        "pandar64",
        (64,),
        "hesai-pandar64",
        200.0,
        200.0,
        0.3,
        0.02,
        rotation_hz_range=(10.0, 20.0),
        firing_cycle_us=55.56,
        aliases=("Pandar64E3X",),
        note="Pandar64 datasheet: 200 m at 10 %, 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "Pandar40P",
        "Hesai",
        "pandar64",
        (40,),
        "hesai-pandar40p",
        200.0,
        200.0,
        0.3,
        0.02,
        rotation_hz_range=(10.0, 20.0),
        firing_cycle_us=55.56,
        aliases=("Pandar40", "Pandar40E3X"),
        note="Pandar40P datasheet: 200 m at 10 %, 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "Pandar40M",
        "Hesai",
        "pandar64",
        (40,),
        "none",
        120.0,
        120.0,
        0.3,
        0.02,
        rotation_hz_range=(10.0, 20.0),
        firing_cycle_us=55.56,
        note="Pandar40M datasheet: 120 m at 10 %, 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "PandarXT-16",
        "Hesai",
        "pandar64",
        (16,),
        "none",
        120.0,
        80.0,
        0.05,
        0.01,
        rotation_hz_range=(5.0, 20.0),
        firing_cycle_us=50.0,
        aliases=("XT16", "PandarXT16"),
        note="PandarXT-16 datasheet: 120 m (80 m at 10 %), +-1 cm, 0.18 deg at 10 Hz",
    ),
    ModelSpec(
        "PandarXT-32",
        "Hesai",
        "pandar64",
        (32,),
        "hesai-xt32",
        120.0,
        80.0,
        0.05,
        0.01,
        rotation_hz_range=(5.0, 20.0),
        firing_cycle_us=50.0,
        aliases=("XT32", "PandarXT32", "PandarXT"),
        note="PandarXT-32 datasheet: 120 m (80 m at 10 %), +-1 cm, 0.18 deg at 10 Hz",
    ),
    ModelSpec(
        "PandarXT-32M2X",
        "Hesai",
        "pandar64",
        (32,),
        "hesai-xt32",
        300.0,
        80.0,
        0.5,
        0.01,
        rotation_hz_range=(5.0, 20.0),
        firing_cycle_us=50.0,
        aliases=("XT32M", "XT32M2X", "PandarXT32M"),
        note="XT32M2X datasheet: 300 m (80 m at 10 %), +-1 cm, 0.18 deg at 10 Hz",
    ),
    ModelSpec(
        "PandarQT64",
        "Hesai",
        "pandar64",
        (64,),
        "hesai-qt64",
        60.0,
        20.0,
        0.1,
        0.03,
        rotation_hz_range=(10.0, 10.0),
        firing_cycle_us=166.67,
        aliases=("PandarQT", "QT64"),
        note="PandarQT datasheet: 60 m (20 m at 10 %), 0.6 deg at 10 Hz, 104.2 deg fan",
    ),
    ModelSpec(
        "PandarQT128",
        "Hesai",
        "pandar64",
        (128,),
        "hesai-qt128",
        50.0,
        20.0,
        0.05,
        0.03,
        rotation_hz_range=(10.0, 10.0),
        firing_cycle_us=111.11,
        aliases=("QT128", "QT128C2X"),
        note="QT128C2X datasheet: 50 m (20 m at 10 %), 0.4 deg at 10 Hz",
    ),
    ModelSpec(
        "Pandar128E3X",
        "Hesai",
        "pandar64",
        (128,),
        "hesai-ot128",
        200.0,
        200.0,
        0.3,
        0.02,
        rotation_hz_range=(10.0, 20.0),
        firing_cycle_us=55.56,
        aliases=("Pandar128", "Pandar128E4X"),
        note="Pandar128 datasheet: 200 m at 10 %, 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "Pandar90",
        "Hesai",
        "pandar64",
        (90,),
        "none",
        200.0,
        200.0,
        0.3,
        0.02,
        rotation_hz_range=(10.0, 20.0),
        firing_cycle_us=55.56,
        aliases=("Pandar90E3X",),
        note="Pandar90 datasheet: 200 m at 10 %, 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "OT128",
        "Hesai",
        "pandar64",
        (128,),
        "hesai-ot128",
        230.0,
        200.0,
        0.3,
        0.02,
        rotation_hz_range=(10.0, 20.0),
        firing_cycle_us=55.56,
        aliases=("PandarOT128",),
        note="OT128 datasheet: 230 m (200 m at 10 %), 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "JT16",
        "Hesai",
        "pandar64",
        (16,),
        "none",
        30.0,
        30.0,
        0.05,
        0.02,
        rotation_hz_range=(10.0, 10.0),
        firing_cycle_us=277.78,
        aliases=("PandarJT16",),
        note="JT16 datasheet: hemispherical, 30 m, 1 deg at 10 Hz",
    ),
    ModelSpec(
        "JT128",
        "Hesai",
        "pandar64",
        (128,),
        "none",
        60.0,
        30.0,
        0.05,
        0.02,
        rotation_hz_range=(10.0, 10.0),
        firing_cycle_us=138.89,
        aliases=("PandarJT128",),
        note="JT128 datasheet: hemispherical, 60 m (30 m at 10 %), 0.5 deg at 10 Hz",
    ),
    ModelSpec(
        "AT128",
        "Hesai",
        "at128",
        (128,),
        "hesai-at128",
        210.0,
        200.0,
        0.5,
        0.03,
        rotation_hz_range=(10.0, 10.0),
        aliases=("AT128E2X", "AT128P", "PandarAT128", "AT128E3X"),
        note="AT128 datasheet: 120 x 25.4 deg, 200 m at 10 %, 0.1 deg x 1200 columns",
    ),
    # ------------------------------------------------------------------ RoboSense
    ModelSpec(
        "RS-16",
        "RoboSense",
        "vlp-16",
        (16,),
        "robosense-rs16",
        150.0,
        150.0,
        0.4,
        0.03,
        firing_cycle_us=55.5,
        firing=_table(_RS16_US),
        aliases=("RS-LiDAR-16", "RSLIDAR16"),
        note="RS-LiDAR-16 datasheet: 150 m, +-3 cm, 905 nm, 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "RS-32",
        "RoboSense",
        "vlp-32c",
        (32,),
        "robosense-rs32",
        200.0,
        200.0,
        0.4,
        0.03,
        firing_cycle_us=55.5,
        firing=_table(_RS32_US),
        aliases=("RS-LiDAR-32", "RSLIDAR32"),
        note="RS-LiDAR-32 datasheet: 200 m, +-3 cm, 905 nm, 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "RS-Bpearl",
        "RoboSense",
        "vlp-32c",
        (32,),
        "robosense-bp",
        100.0,
        30.0,
        0.1,
        0.03,
        firing_cycle_us=55.5,
        firing=_table(_RSBP_US),
        aliases=("Bpearl", "RSBP"),
        note="RS-Bpearl datasheet: 100 m (30 m at 10 %), 360 x 90 deg, 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "RS-Helios",
        "RoboSense",
        "vlp-32c",
        (32,),
        "none",
        150.0,
        110.0,
        0.2,
        0.02,
        firing_cycle_us=55.5,
        firing=_table(_HELIOS_US),
        aliases=("Helios", "RS-Helios-5515", "Helios5515", "RS-Helios-32"),
        note="RS-Helios datasheet: 150 m (110 m at 10 %), 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "RS-Helios-16P",
        "RoboSense",
        "vlp-16",
        (16,),
        "none",
        150.0,
        110.0,
        0.2,
        0.02,
        firing_cycle_us=55.5,
        firing=_table(_HELIOS_US[:16]),
        aliases=("Helios16P",),
        note="RS-Helios-16P datasheet: 150 m (110 m at 10 %), 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "RS-Ruby Lite",
        "RoboSense",
        "vls-128",
        (80,),
        "none",
        230.0,
        160.0,
        0.4,
        0.03,
        firing_cycle_us=55.5,
        aliases=("RS-Ruby-Lite", "RubyLite", "RS-LiDAR-80"),
        note="RS-Ruby Lite datasheet: 230 m (160 m at 10 %), 80 beams, 0.2 deg at 10 Hz",
    ),
    ModelSpec(
        "RS-Ruby",
        "RoboSense",
        "vls-128",
        (128,),
        "none",
        250.0,
        200.0,
        0.4,
        0.03,
        firing_cycle_us=55.5,
        aliases=("RS-Ruby-128", "Ruby", "RS-Ruby Plus", "RubyPlus"),
        note="RS-Ruby datasheet: 250 m (200 m at 10 %), 0.2 deg at 10 Hz",
    ),
    # ------------------------------------------------------------------ Ouster (one entry a product line)
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

MODELS: dict[str, ModelSpec] = {}
for _m in _LIST:
    for _name in (_m.name, *_m.aliases):
        MODELS[model_key(_name)] = _m


def find_model(name: str, source: str, vendor: str | None = None) -> ModelSpec:
    """The model called ``name`` (any case or punctuation); a FieldError naming ``source`` otherwise."""
    spec = MODELS.get(model_key(name))
    if spec is None:
        # the product with a suffix the table does not list (HDL-64E S3, OS-1-64-U13): the longest
        # name that starts it
        key = model_key(name)
        starts = [k for k in MODELS if key.startswith(k) and len(k) >= 3]
        spec = MODELS[max(starts, key=len)] if starts else None
    if spec is None or (vendor is not None and spec.vendor != vendor):
        names = ", ".join(m.name for m in _LIST if vendor is None or m.vendor == vendor)
        raise PresetError(source, "model", f"unknown {vendor or 'sensor'} model {name!r}; known: {names}")
    return spec


def models_for(vendor: str, n_beams: int) -> list[ModelSpec]:
    """The vendor's models with ``n_beams`` beams, in table order."""
    return [m for m in _LIST if m.vendor == vendor and n_beams in m.beams]
