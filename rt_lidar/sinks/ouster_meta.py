"""Ouster sensor metadata: read a real sensor's file (any firmware's layout), check it against the
preset, and complete it to the nested layout ouster-sdk 1.0 reads.

Three layouts are read:
- nested (firmware 2.4+ / 3.x, and what ouster-sdk writes): ``beam_intrinsics``, ``config_params``,
  ``lidar_data_format``, ``sensor_info`` (``prod_sn``, ``initialization_id``), ``lidar_intrinsics``, ...;
- flat (firmware 1.x-2.3 and older SDKs): the beam angles, ``lidar_mode``, ``prod_sn``,
  ``initialization_id`` and the transforms at the top level, the packet layout under ``data_format``;
- reduced (Ouster Studio's): only the beam angles and ``lidar_mode``.

The packets follow what the file says: ``udp_profile_lidar``, ``columns_per_packet``, ``column_window``,
``pixel_shift_by_row``, the beam angles, ``initialization_id`` and ``prod_sn``. A file the preset
cannot produce (beam count, beam altitudes of another model, columns a turn, frame rate) is a
:class:`~rt_lidar.errors.FieldError` naming the file and the field.
"""

from __future__ import annotations

import copy
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import FieldError
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sinks.pcap import slots_per_scan

__all__ = [
    "DUAL_PROFILES",
    "FUSA_HEADER",
    "NIR_COUNTS_PER_W",
    "PIXEL_BYTES",
    "PROFILES",
    "OusterFormat",
    "complete_metadata",
    "flat_view",
    "nir_counts",
    "ouster_format",
    "read_metadata",
    "shift_spread",
]

PROFILES = {
    "LEGACY": "LEGACY",
    "RNG19": "RNG19_RFL8_SIG16_NIR16",
    "RNG15": "RNG15_RFL8_NIR8",
    "DUAL": "RNG19_RFL8_SIG16_NIR16_DUAL",
    "RNG15_DUAL": "RNG15_RFL8_NIR8_DUAL",
    "FUSA": "FUSA_RNG15_RFL8_NIR8_DUAL",
}
"""Short name (the sink's ``profile=`` option) -> Ouster's ``udp_profile_lidar``."""
PIXEL_BYTES = {
    "LEGACY": 12,
    "RNG19_RFL8_SIG16_NIR16": 12,
    "RNG15_RFL8_NIR8": 4,
    "RNG19_RFL8_SIG16_NIR16_DUAL": 16,
    "RNG15_RFL8_NIR8_DUAL": 8,
    "FUSA_RNG15_RFL8_NIR8_DUAL": 8,
}
"""Bytes a pixel (channel) takes in each profile's packets."""
DUAL_PROFILES = frozenset(p for p in PIXEL_BYTES if p.endswith("_DUAL"))
"""Profiles with a second return in every pixel."""
FUSA_HEADER = frozenset({"FUSA_RNG15_RFL8_NIR8_DUAL"})
"""Profiles whose packets carry the FUSA packet header (ouster-sdk's ``HeaderType::FUSA``: packet type
u8 at byte 0, initialization id u24 at 1, frame id u32 at 4, serial number u40 at 11)."""
COLUMNS_PER_PACKET = (8, 16, 32, 64)
ALTITUDE_TOLERANCE_DEG = 2.5
"""Largest beam altitude difference between a file and the preset: units of one model differ by up to
~2 deg (OS1-128 files of ouster-sdk's tests: top beam 21.3 deg at fw 2.4, 20.5 deg at fw 3.0 (42.4 deg
fan), the preset's 22.5 deg), other models by 10 deg and more (OS-2 11 deg, OS-0 24 deg). Within it,
ouster-sdk puts our rows at the file's altitudes: up to that many degrees from where we cast them."""
SHIFT_TOLERANCE_COLUMNS = 1.5
"""Largest spread of ``pixel_shift_by_row`` against the beam azimuths (rounding gives up to 1 column)
before a warning: of ouster-sdk's test files only firmware 1.14's exceed it (1.3 to 15.4 columns)."""
INIT_ID = 1
PROD_SN = 992000000001
NIR_COUNTS_PER_W = 3.0e11
"""Near-IR counts per watt of ambient power on the detector (1 nW -> 300 counts; at 850 nm and a
1024x10 column's 97.7 us, 1 nW is 4.2e5 photons, so an effective detection efficiency of 7e-4). Set
so full summer sun (100 klx) on the street scene gives NEAR_IR of the order of ouster-sdk's sample
recordings (docs/ouster-metadata.md): median ~900, 95th percentile ~1500 counts."""
_NESTED = ("beam_intrinsics", "config_params", "lidar_data_format", "sensor_info")


@dataclass(frozen=True)
class OusterFormat:
    """What the packets must look like, read from complete metadata."""

    profile: str
    columns_per_frame: int
    columns_per_packet: int
    column_window: tuple[int, int]
    pixels_per_column: int
    pixel_shift_by_row: tuple[int, ...]
    beam_azimuth_deg: tuple[float, ...]
    init_id: int
    prod_sn: int
    fps: int

    @property
    def packet_bytes(self) -> int:
        """Size of one lidar packet."""
        px = PIXEL_BYTES[self.profile] * self.pixels_per_column
        if self.profile == "LEGACY":
            return self.columns_per_packet * (16 + px + 4)
        return 32 + self.columns_per_packet * (12 + px) + 32

    def window_columns(self) -> list[int]:
        """Measurement ids inside ``column_window`` (it may wrap through 0)."""
        a, b = self.column_window
        w = self.columns_per_frame
        return list(range(a, b + 1)) if a <= b else [*range(a, w), *range(0, b + 1)]


def _preset_origin_mm(preset: SensorPreset) -> tuple[float | None, float | None]:
    """(out, up) mm of the preset's beam origins where it has them (every beam alike, as Ouster's are),
    else (None, None)."""
    o = preset.beam_origins_m
    if o is None:
        return None, None
    return round(float(o[0, 0]) * 1000.0, 6), round(float(o[0, 2]) * 1000.0, 6)


def nir_counts(ambient_w: np.ndarray) -> np.ndarray:
    """Ambient power (W) on the detector -> an Ouster's near-IR / ambient counts (int64, 0..65535)."""
    return np.clip(np.round(np.asarray(ambient_w, np.float64) * NIR_COUNTS_PER_W), 0, 65535).astype(np.int64)


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The JSON object of an Ouster metadata file (a FieldError naming the file if it is not one)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FieldError(str(p), "(file)", f"not a readable JSON metadata file: {exc}") from exc
    if not isinstance(data, dict):
        raise FieldError(str(p), "(file)", "expected a JSON object")
    return data


def flat_view(given: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Every field we use, from any layout: ``name -> (path in the file, value)``."""
    out: dict[str, tuple[str, Any]] = {}

    def take(section: str | None, keys: tuple[str, ...]) -> None:
        src = given.get(section, {}) if section else given
        if not isinstance(src, dict):
            return
        for k in keys:
            if k in src and k not in out:
                out[k] = (f"{section}.{k}" if section else k, src[k])

    beam = (
        "beam_altitude_angles",
        "beam_azimuth_angles",
        "lidar_origin_to_beam_origin_mm",
        "beam_to_lidar_transform",
    )
    fmt = (
        "columns_per_frame",
        "columns_per_packet",
        "column_window",
        "pixels_per_column",
        "pixel_shift_by_row",
        "udp_profile_lidar",
        "udp_profile_imu",
        "fps",
        "header_type",
    )
    info = (
        "prod_sn",
        "initialization_id",
        "prod_line",
        "prod_pn",
        "build_rev",
        "build_date",
        "image_rev",
        "status",
    )
    cfg = (
        "lidar_mode",
        "udp_port_lidar",
        "udp_port_imu",
        "udp_dest",
        "udp_profile_lidar",
        "udp_profile_imu",
        "columns_per_packet",
        "azimuth_window",
    )
    take("beam_intrinsics", beam)
    take("lidar_data_format", fmt)
    take("sensor_info", info)
    take("config_params", cfg)
    take("lidar_intrinsics", ("lidar_to_sensor_transform",))
    take("imu_intrinsics", ("imu_to_sensor_transform",))
    take("data_format", fmt)  # firmware 2.x flat layout
    take(None, beam + info + cfg + ("lidar_to_sensor_transform", "imu_to_sensor_transform"))
    return out


def shift_spread(shift: list[int], az_deg: list[float], cols: int) -> float:
    """How far (columns) ``pixel_shift_by_row`` strays from the beam azimuths, a constant offset aside
    (firmware before 2.4 writes its shifts counted from the smallest, so a constant is normal)."""
    d = np.asarray(shift, np.float64) - np.asarray(az_deg, np.float64) * cols / 360.0
    return float(np.ptp(d)) if d.size else 0.0


def _default_shift(az_deg: list[float], cols: int) -> list[int]:
    """``pixel_shift_by_row`` as firmware 3.x derives it from the beam azimuths."""
    return [round(a * cols / 360.0) for a in az_deg]


def complete_metadata(
    preset: SensorPreset,
    given: dict[str, Any] | None = None,
    profile: str | None = None,
    source: str = "metadata",
) -> dict[str, Any]:
    """Complete metadata (ouster-sdk 1.0's nested layout) for ``preset``.

    ``given`` (a real sensor's metadata, any layout) wins over the preset where it has a field; it must
    agree with the preset on beams, columns a turn and frame rate. ``profile`` (a short or full
    ``udp_profile_lidar`` name) sets the packet profile where ``given`` has none; where both name one
    they must agree. Errors are FieldErrors naming ``source`` and the field.
    """
    g = flat_view(given or {})
    cols = slots_per_scan(preset)
    fps = round(preset.scan.rotation_hz or 10)
    h = preset.n_rings

    def val(name: str, default: Any) -> Any:
        return g[name][1] if name in g else default

    def where(name: str) -> str:
        return g[name][0] if name in g else name

    def bad(name: str, problem: str) -> FieldError:
        return FieldError(source, where(name), problem)

    alt = [float(v) for v in val("beam_altitude_angles", list(preset.elevations_deg))]
    az = [float(v) for v in val("beam_azimuth_angles", [-float(a) for a in preset.azimuth_offsets_deg])]
    for name, angles in (("beam_altitude_angles", alt), ("beam_azimuth_angles", az)):
        if len(angles) != h:
            raise bad(
                name, f"{len(angles)} beams; preset {preset.name} has {h} (--preset {source} makes one)"
            )
    off = np.abs(np.asarray(alt) - np.asarray(preset.elevations_deg, np.float64))
    if off.max() > ALTITUDE_TOLERANCE_DEG:  # another model: ouster-sdk would put our rows at its angles
        r = int(off.argmax())
        raise bad(
            "beam_altitude_angles",
            f"beam {r} looks up {alt[r]:g} deg, preset {preset.name}'s {preset.elevations_deg[r]:g} deg "
            f"(more than {ALTITUDE_TOLERANCE_DEG:g} deg apart: another model; use a preset with this "
            f"sensor's beam table: --preset {source} makes one from this file)",
        )
    mode = str(val("lidar_mode", f"{cols}x{fps}"))
    try:
        m_cols, m_fps = (int(v) for v in mode.split("x"))
    except ValueError:
        raise bad("lidar_mode", f"'{mode}' is not COLUMNSxFPS, e.g. 1024x10") from None
    if m_cols != cols or m_fps != fps:
        raise bad(
            "lidar_mode",
            f"{mode}: preset {preset.name} fires {cols} columns a turn at {fps} Hz ({cols}x{fps})",
        )
    if int(val("columns_per_frame", cols)) != cols:
        raise bad("columns_per_frame", f"{val('columns_per_frame', cols)}: lidar_mode {mode} has {cols}")
    if int(val("pixels_per_column", h)) != h:
        raise bad("pixels_per_column", f"{val('pixels_per_column', h)}: preset {preset.name} has {h} beams")

    wanted = PROFILES.get(profile.upper(), profile.upper()) if profile else None
    prof = str(val("udp_profile_lidar", wanted or "LEGACY"))
    if prof not in PIXEL_BYTES:
        raise bad("udp_profile_lidar", f"'{prof}' is not written; supported: {', '.join(PIXEL_BYTES)}")
    if wanted is not None and wanted != prof:
        raise bad("udp_profile_lidar", f"{prof}, but the sink was asked for profile={profile}")
    header = "FUSA" if prof in FUSA_HEADER else "STANDARD"
    if str(val("header_type", header)) != header:
        raise bad(
            "header_type", f"{val('header_type', header)}: profile {prof} is sent with {header} headers"
        )

    cpp = int(val("columns_per_packet", 16))
    if cpp not in COLUMNS_PER_PACKET or cols % cpp:
        raise bad("columns_per_packet", f"{cpp}: expected one of {COLUMNS_PER_PACKET} dividing {cols}")
    window = [int(v) for v in val("column_window", [0, cols - 1])]
    if len(window) != 2 or not all(0 <= v < cols for v in window):
        raise bad("column_window", f"{window}: expected [first, last] measurement ids in 0..{cols - 1}")
    shift = [int(v) for v in val("pixel_shift_by_row", _default_shift(az, cols))]
    if len(shift) != h:
        raise bad("pixel_shift_by_row", f"{len(shift)} rows; preset {preset.name} has {h} beams")
    spread = shift_spread(shift, az, cols)
    if spread > SHIFT_TOLERANCE_COLUMNS:
        warnings.warn(
            f"{source}: {where('pixel_shift_by_row')} disagrees with the beam azimuths by up to "
            f"{spread:.1f} columns: the packets follow the azimuths, so ouster-sdk's destagger with this "
            "file leaves rows that far apart (as it would the real sensor's)",
            stacklevel=2,
        )
    try:
        init_id = int(val("initialization_id", INIT_ID))
        sn = int(str(val("prod_sn", PROD_SN)))
    except ValueError as exc:
        raise bad("prod_sn", f"not an integer: {exc}") from None
    if not 0 <= init_id < 1 << 24:
        raise bad("initialization_id", f"{init_id}: the packet header holds 24 bits")
    if not 0 <= sn < 1 << 40:
        raise bad("prod_sn", f"{sn}: the packet header holds 40 bits")
    fmt = OusterFormat(prof, cols, cpp, (window[0], window[1]), h, tuple(shift), tuple(az), init_id, sn, fps)
    if fmt.packet_bytes > 65535:
        raise bad(
            "columns_per_packet", f"{cpp}: a {prof} packet of {h} beams would be {fmt.packet_bytes} bytes"
        )

    # a preset with beam origins (from a metadata file) writes its own; the others ouster-sdk's OS1 default
    out_mm, up_mm = _preset_origin_mm(preset)
    beam_mm = float(val("lidar_origin_to_beam_origin_mm", 15.806 if out_mm is None else out_mm))
    port_lidar = int(val("udp_port_lidar", 7502)) or 7502  # 0 reads as profile OFF in ouster-sdk
    port_imu = int(val("udp_port_imu", 7503)) or 7503
    eye = [1.0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 1.0]
    beam_to_lidar = [1.0, 0, 0, beam_mm, 0, 1.0, 0, 0, 0, 0, 1.0, up_mm or 0, 0, 0, 0, 1.0]
    out: dict[str, Any] = copy.deepcopy(
        {k: v for k, v in (given or {}).items() if k in ("calibration_status",)}
    )
    out.update(
        {
            "beam_intrinsics": {
                "beam_altitude_angles": alt,
                "beam_azimuth_angles": az,
                "beam_to_lidar_transform": val("beam_to_lidar_transform", beam_to_lidar),
                "lidar_origin_to_beam_origin_mm": beam_mm,
            },
            "config_params": {
                "lidar_mode": mode,
                "udp_port_lidar": port_lidar,
                "udp_port_imu": port_imu,
                "udp_profile_lidar": prof,
                "udp_profile_imu": "LEGACY",
                "columns_per_packet": cpp,
                "azimuth_window": val("azimuth_window", [0, 360000]),
            },
            "lidar_data_format": {
                "column_window": window,
                "columns_per_frame": cols,
                "columns_per_packet": cpp,
                "pixels_per_column": h,
                "pixel_shift_by_row": shift,
                "udp_profile_lidar": prof,
                "udp_profile_imu": "LEGACY",
                "fps": fps,
            },
            "lidar_intrinsics": {
                "lidar_to_sensor_transform": val(
                    "lidar_to_sensor_transform",
                    [-1.0, 0, 0, 0, 0, -1.0, 0, 0, 0, 0, 1.0, 36.18, 0, 0, 0, 1.0],
                )
            },
            "imu_intrinsics": {"imu_to_sensor_transform": val("imu_to_sensor_transform", eye)},
            "sensor_info": {
                "prod_line": str(val("prod_line", f"OS-1-{h}")),
                "prod_sn": str(sn),
                "prod_pn": str(val("prod_pn", "rt-lidar")),
                "build_rev": str(val("build_rev", "v2.0.0")),
                "build_date": str(val("build_date", "")),
                "image_rev": str(val("image_rev", "")),
                "initialization_id": init_id,
                "status": "RUNNING",
            },
            "user_data": "rt-lidar simulated sensor",
        }
    )
    if val("udp_dest", ""):  # an empty udp_dest makes ouster-sdk 1.0 read no frame at all
        out["config_params"]["udp_dest"] = str(val("udp_dest", ""))
    if header == "FUSA":  # firmware 3.2+ names it; ouster-sdk infers it from the profile otherwise
        out["lidar_data_format"]["header_type"] = header
    out.setdefault("calibration_status", {})
    return out


def ouster_format(meta: dict[str, Any]) -> OusterFormat:
    """The packet format of complete (nested) metadata, as :func:`complete_metadata` writes it."""
    f, info = meta["lidar_data_format"], meta["sensor_info"]
    w = f["column_window"]
    return OusterFormat(
        profile=f["udp_profile_lidar"],
        columns_per_frame=int(f["columns_per_frame"]),
        columns_per_packet=int(f["columns_per_packet"]),
        column_window=(int(w[0]), int(w[1])),
        pixels_per_column=int(f["pixels_per_column"]),
        pixel_shift_by_row=tuple(int(v) for v in f["pixel_shift_by_row"]),
        beam_azimuth_deg=tuple(float(v) for v in meta["beam_intrinsics"]["beam_azimuth_angles"]),
        init_id=int(info["initialization_id"]),
        prod_sn=int(info["prod_sn"]),
        fps=int(f["fps"]),
    )
