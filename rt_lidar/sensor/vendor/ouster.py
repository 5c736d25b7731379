"""Ouster metadata JSON, every layout, as a :class:`VendorTable`.

Layouts: nested (firmware 2.4+/3.x and ouster-sdk's output: ``sensor_info``, ``beam_intrinsics``,
``lidar_data_format``, ``config_params``); flat (firmware 1.x-2.3: angles at the top, ``data_format``);
Studio's reduced one (angles and ``lidar_mode``); beam-intrinsics-only dumps (angles and the beam
origin, no lidar mode: ``lidar_mode`` must be given). Channel 0 is the top beam; the file's azimuths are
clockwise, the preset's counter-clockwise. All beams of a column fire together.
"""

from __future__ import annotations

import re
from typing import Any

from rt_lidar.sensor.vendor.table import VendorTable, check_angles, check_azimuths, refuse, wrap_deg

__all__ = ["LIDAR_MODES", "is_ouster", "parse_lidar_mode", "read_ouster"]

LIDAR_MODES = ("512x10", "512x20", "1024x10", "1024x20", "2048x10", "4096x5")
# ouster-sdk's fallback beam origin (mm) by product line, for files before firmware 1.14 / 2.0
_ORIGIN_MM = {"OS0": 27.67, "OS1": 15.806, "OS2": 13.762}
_DEFAULT_ORIGIN_MM = 12.163  # ouster-sdk's lidar_origin_to_beam_origin_mm when the product is unknown
_PROD = re.compile(r"^OS-?(\d|DOME)(?:-(\d+))?(?:-(.*))?$", re.IGNORECASE)


def is_ouster(d: Any) -> bool:
    """Whether a parsed JSON document is Ouster metadata (has beam altitude angles somewhere)."""
    if not isinstance(d, dict):
        return False
    bi = d.get("beam_intrinsics")
    return "beam_altitude_angles" in d or (isinstance(bi, dict) and "beam_altitude_angles" in bi)


def parse_lidar_mode(mode: str, path: str, where: str = "lidar_mode") -> tuple[int, float]:
    """``1024x10`` -> (1024 columns, 10 Hz)."""
    m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", str(mode))
    if not m or f"{int(m[1])}x{int(m[2])}" not in LIDAR_MODES:
        raise refuse(path, where, f"{mode!r}: expected one of {', '.join(LIDAR_MODES)}")
    return int(m[1]), float(m[2])


def _numbers(v: Any, path: str, where: str) -> list[float]:
    if not isinstance(v, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        raise refuse(path, where, "must be a list of numbers (degrees)")
    return [float(x) for x in v]


def read_ouster(d: dict[str, Any], path: str, lidar_mode: str | None = None) -> VendorTable:
    """The beam table and lidar mode of Ouster metadata ``d`` (read from ``path``)."""
    nested = isinstance(d.get("beam_intrinsics"), dict)
    bi: dict[str, Any] = d["beam_intrinsics"] if nested else d
    fmt = d.get("lidar_data_format") if nested else d.get("data_format")
    fmt = fmt if isinstance(fmt, dict) else {}
    cfg_key = next((k for k in ("config_params", "config_param") if isinstance(d.get(k), dict)), None)
    cfg: dict[str, Any] = d[cfg_key] if cfg_key else d  # ouster_example's early dumps: "config_param"
    info: dict[str, Any] = d["sensor_info"] if isinstance(d.get("sensor_info"), dict) else d
    pre = "beam_intrinsics." if nested else ""
    alt = _numbers(bi.get("beam_altitude_angles"), path, pre + "beam_altitude_angles")
    if "beam_azimuth_angles" not in bi:
        raise refuse(path, pre + "beam_azimuth_angles", "missing: the file has altitudes but no azimuths")
    az = _numbers(bi["beam_azimuth_angles"], path, pre + "beam_azimuth_angles")
    if len(az) != len(alt):
        raise refuse(
            path, pre + "beam_azimuth_angles", f"{len(az)} azimuths for {len(alt)} altitudes (one each)"
        )
    keys = set(d)
    if nested:
        layout = "Ouster metadata, nested (firmware 2.4+/3.x or ouster-sdk)"
    elif keys <= {"beam_altitude_angles", "beam_azimuth_angles", "lidar_mode"} and "lidar_mode" in keys:
        layout = "Ouster Studio reduced metadata"
    elif keys <= {
        "beam_altitude_angles",
        "beam_azimuth_angles",
        "lidar_origin_to_beam_origin_mm",
        "beam_to_lidar_transform",
    }:
        layout = "Ouster beam intrinsics (get_beam_intrinsics)"
    else:
        layout = "Ouster metadata, flat (firmware 1.x-2.3)"
    from_file = {
        "beams.elevation_deg": f"{pre}beam_altitude_angles",
        "beams.azimuth_offset_deg": f"{pre}beam_azimuth_angles (clockwise, sign flipped)",
    }

    # the lidar mode: columns a turn and the rotation rate
    file_mode = cfg.get("lidar_mode") if isinstance(cfg, dict) else None
    mode_where = (f"{cfg_key}." if cfg_key else "") + "lidar_mode"
    warnings: list[str] = []
    if lidar_mode is not None:
        mode, said = lidar_mode, "--lidar-mode"
        if file_mode is not None and str(file_mode) != str(lidar_mode):
            warnings.append(f"{path}: {mode_where} is {file_mode}; --lidar-mode {lidar_mode} taken instead")
    elif file_mode is not None:
        mode, said = str(file_mode), mode_where
    else:
        raise refuse(
            path,
            "lidar_mode",
            f"missing: the file ({layout}) does not say the columns and rate; give --lidar-mode "
            f"(one of {', '.join(LIDAR_MODES)})",
        )
    columns, hz = parse_lidar_mode(mode, path, mode_where if said != "--lidar-mode" else "--lidar-mode")
    from_file["scan.columns_per_rev"] = f"{said} {mode}"
    from_file["scan.rotation_hz"] = f"{said} {mode}"
    cpf = fmt.get("columns_per_frame")
    if cpf is not None and said != "--lidar-mode" and int(cpf) != columns:
        raise refuse(path, "columns_per_frame", f"{cpf} disagrees with lidar_mode {mode} ({columns} columns)")
    ppc = fmt.get("pixels_per_column")
    if ppc is not None and int(ppc) != len(alt):
        raise refuse(path, "pixels_per_column", f"{ppc} pixels a column but {len(alt)} beam angles")

    # the product: model line and beam count
    prod = str(info.get("prod_line", "")) if isinstance(info, dict) else ""
    model, said_by = None, ""
    m = None
    if prod:
        m = _PROD.match(prod.strip())
        if not m:
            warnings.append(
                f"{path}: prod_line {prod!r} is not one we know (OS-0/1/2/DOME-N-...): model from the fan"
            )
    if prod and m:
        line = "OSDome" if m[1].upper() == "DOME" else f"OS{m[1]}"
        build = str(info.get("build_rev", ""))
        model = "OS1 gen1" if line == "OS1" and build.startswith("v1.") and len(alt) <= 64 else line
        said_by = f"prod_line {prod}"
        if m[2] is not None and int(m[2]) != len(alt):
            raise refuse(
                path,
                pre + "beam_altitude_angles",
                f"{len(alt)} beam angles but prod_line {prod} has {int(m[2])} beams "
                "(firmware 1.x lists every channel of the detector; ouster-sdk refuses it too)",
            )
    check_azimuths(path, az, pre + "beam_azimuth_angles")
    beams = [
        {"ring": i, "laser_id": i, "elevation_deg": e, "azimuth_offset_deg": wrap_deg(-a) + 0.0}
        for i, (e, a) in enumerate(zip(alt, az, strict=True))
    ]
    check_angles(path, beams, pre + "beam_altitude_angles")

    unused = []
    btl = bi.get("beam_to_lidar_transform")
    origin = bi.get("lidar_origin_to_beam_origin_mm")
    out_mm = up_mm = 0.0
    if isinstance(btl, list) and len(btl) == 16:
        out_mm, up_mm = float(btl[3]), float(btl[11])
        said_origin = f"beam_to_lidar_transform ({out_mm:g} mm out, {up_mm:g} mm up)"
    elif isinstance(origin, (int, float)):
        out_mm = float(origin)
        said_origin = f"lidar_origin_to_beam_origin_mm ({out_mm:g} mm)"
    elif model is not None and model.split()[0] in _ORIGIN_MM:
        out_mm = _ORIGIN_MM[model.split()[0]]
        said_origin = f"none in the file: {model}'s {out_mm:g} mm, ouster-sdk's fallback"
    else:  # no prod_line either (Studio's reduced files): ouster-sdk's default for an unnamed product
        out_mm = _DEFAULT_ORIGIN_MM
        said_origin = f"none in the file, no prod_line: ouster-sdk's default {out_mm:g} mm"
    if out_mm or up_mm:  # every beam starts there, turned with the encoder (ouster-sdk's XYZ table)
        for b in beams:
            b["origin_radial_m"] = out_mm / 1000.0
            b["origin_up_m"] = up_mm / 1000.0
        from_file["beams.origin_m"] = f"{said_origin}, turned with the encoder as ouster-sdk does"
    if fmt.get("pixel_shift_by_row") is not None:
        unused.append("pixel_shift_by_row (the packet sinks take it from the metadata file)")
    profile = fmt.get("udp_profile_lidar") or (
        cfg.get("udp_profile_lidar") if isinstance(cfg, dict) else None
    )
    if profile:
        unused.append(f"udp_profile_lidar {profile} (give the file as the sink's metadata= to write it)")
    if isinstance(d.get("lidar_to_sensor_transform"), list) or "lidar_intrinsics" in d:
        unused.append("lidar_to_sensor_transform: points are in the lidar frame")
    return VendorTable(
        path=path,
        vendor="Ouster",
        layout=layout,
        beams=beams,
        model=model,
        model_said_by=said_by,
        columns_per_rev=columns,
        rotation_hz=hz,
        from_file=from_file,
        unused=unused,
        warnings=warnings,
    )
