"""Hesai calibration files as :class:`VendorTable`: the angle-correction CSV, the firetime CSV (beside
an angle file) and the AT128's binary ``.dat`` (version 1.5).

The CSV: a header (``Laser id`` / ``Channel`` / ``LaserID``, ``Elevation``, ``Azimuth``), maybe a UTF-8 BOM
and CRLF, 1-based channels, maybe a trailing SHA-256 line. Azimuth offsets are clockwise (flipped here)
and reach 116-269 deg on the JT series (wrapped to +-180). Rings are channels - 1 (top beam first on most
models; the QT series lists its bottom beam first).
"""

from __future__ import annotations

import hashlib
import re
import struct
from pathlib import Path

from rt_lidar.sensor.vendor.table import VendorTable, check_angles, check_azimuths, refuse, wrap_deg

__all__ = [
    "angle_rows_start",
    "is_hesai_angle_header",
    "is_hesai_firetime",
    "read_at128_dat",
    "read_firetime",
    "read_firetime_states",
    "read_hesai_csv",
]

_SHA = re.compile(r"^[0-9a-fA-F]{64}$")
AT128_MAGIC = b"\xee\xff\x01\x05"
AT128_V13_MAGIC = b"\xee\xff\x01\x03"  # the PandarAT / early AT128P .dat (HesaiLidar_Swift_ROS reads it)
AT128_UNIT_DEG = 1.0 / 25600.0  # the .dat's angles: 1/256 of 0.01 deg, times its resolution byte


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.lstrip("\ufeff").splitlines() if ln.strip()]


def is_hesai_angle_header(line: str) -> bool:
    """Whether a first CSV line is an angle-correction header."""
    low = line.lower()
    return "elevation" in low and "azimuth" in low


def is_hesai_firetime(line: str) -> bool:
    """Whether a first CSV line is one of the firetime layouts' headers."""
    low = line.lstrip("\ufeff").lower()
    return (
        "fire" in low
        or low.startswith(("operational state", "operation mode", "eeff"))
        or "distance>=" in low
    )


def angle_rows_start(text: str) -> int | None:
    """Where a header-less angle table's rows (``1,elevation,azimuth``, ``2,...``) begin after at most
    three preamble lines (Hesai's SDKs accept an ``EEFF`` version line and one more before them), or
    None when the lines are not such a table."""
    lines = _lines(text)
    for start in range(min(4, len(lines))):
        rows = [ln.split(",") for ln in lines[start:]]
        if rows and _SHA.match(rows[-1][0].strip()):
            rows = rows[:-1]
        if len(rows) < 2 or any(len(r) < 3 for r in rows):
            continue
        try:
            chans = [int(r[0]) for r in rows]
            [(float(r[1]), float(r[2])) for r in rows]
        except ValueError:
            continue
        if chans == list(range(1, len(rows) + 1)):
            return start
    return None


def read_hesai_csv(text: str, path: str) -> VendorTable:
    """An angle-correction CSV (with a header, or header-less after a short preamble)."""
    lines = _lines(text)
    if not lines:
        raise refuse(path, "<file>", "is empty")
    start = next((i for i, ln in enumerate(lines[:8]) if is_hesai_angle_header(ln)), None)
    bare = angle_rows_start(text) if start is None else None
    cut = start if start is not None else bare or 0
    preamble = lines[:cut]  # e.g. an "EEFF,1,4" version line before the header or the rows
    header = [h.strip().lower() for h in lines[start].split(",")] if start is not None else []
    body = lines[start + 1 :] if start is not None else lines[cut:]
    if any("column" in h for h in header):
        raise refuse(
            path,
            "<file>",
            f"header {lines[start or 0][:40]!r}: a per-pixel table of a flash lidar (Hesai FT120), "
            "not a beam table",
        )
    if start is None:
        ch_col, el_col, az_col = 0, 1, 2
    else:
        ch_col = next((i for i, h in enumerate(header) if "laser" in h or "channel" in h), 0)
        el_col = next(i for i, h in enumerate(header) if "elev" in h)
        az_col = next(i for i, h in enumerate(header) if "azi" in h)
    rows: dict[int, tuple[float, float]] = {}
    checksum = None
    for n, line in enumerate(body):
        cells = [c.strip() for c in line.split(",")]
        if _SHA.match(cells[0]) and not any(cells[1:]):
            checksum = cells[0]
            continue
        try:
            ch = int(float(cells[ch_col]))
            el, az = float(cells[el_col]), float(cells[az_col])
        except (ValueError, IndexError):
            raise refuse(
                path, f"line {n + 2 + (start or 0)}", f"{line!r}: expected channel,elevation,azimuth numbers"
            ) from None
        if ch in rows:
            raise refuse(path, f"line {n + 2 + (start or 0)}", f"channel {ch} appears twice")
        rows[ch] = (el, az)
    chans = sorted(rows)
    zero_based = chans == list(range(len(chans)))
    if zero_based:  # some tools write channels from 0: the same table
        rows = {ch + 1: v for ch, v in rows.items()}
        chans = sorted(rows)
    if chans != list(range(1, len(chans) + 1)):
        raise refuse(path, "channel", f"channels must be 1..{len(chans)}, one each; got {chans[:6]}...")
    check_azimuths(path, [rows[ch][1] for ch in chans], "Azimuth")
    beams = [
        {
            "ring": ch - 1,
            "laser_id": ch,
            "elevation_deg": rows[ch][0],
            "azimuth_offset_deg": wrap_deg(-rows[ch][1]) + 0.0,
        }
        for ch in chans
    ]
    check_angles(path, beams, "Elevation")
    table = VendorTable(
        path=path,
        vendor="Hesai",
        layout="Hesai angle-correction CSV",
        beams=beams,
        from_file={
            "beams.elevation_deg": "Elevation",
            "beams.azimuth_offset_deg": "Azimuth (clockwise, sign flipped, wrapped to +-180)",
        },
    )
    if zero_based:
        table.warnings.append(f"{path}: channels numbered from 0: taken as channels 1..{len(chans)}")
    if preamble:
        table.unused.append(f"{len(preamble)} line(s) before the header ({preamble[0][:30]!r})")
    if checksum is not None:
        table.unused.append("trailing SHA-256 line (not checked: Hesai does not say what it hashes)")
    table.model, table.model_said_by = Path(path).stem, "file name"
    return table


def read_firetime(text: str, path: str, n_channels: int) -> tuple[list[float] | None, str]:
    """Per channel firing offsets (us) of a firetime CSV, or None and why not (layouts that depend on
    the operating mode, azimuth state or distance, or loop tables)."""
    lines = _lines(text)
    if not lines or not is_hesai_firetime(lines[0]):
        raise refuse(path, "<file>", "not a Hesai firetime CSV (no 'fire time' header)")
    head = lines[0].lower()
    if not head.startswith(("channel", "laser")):
        return None, f"{path}: firetime layout '{lines[0][:40]}' depends on the operating state: not used"
    scale = 1e-3 if "(ns)" in head else 1.0
    times: dict[int, float] = {}
    for n, line in enumerate(lines[1:]):
        cells = [c.strip() for c in line.split(",")]
        try:
            times[int(float(cells[0]))] = float(cells[1]) * scale
        except (ValueError, IndexError):
            raise refuse(path, f"line {n + 2}", f"{line!r}: expected channel,time") from None
    if sorted(times) != list(range(1, n_channels + 1)):
        raise refuse(
            path,
            "channel",
            f"has channels {min(times)}..{max(times)} ({len(times)}); the angle file {n_channels}",
        )
    return [times[ch] for ch in range(1, n_channels + 1)], ""


def read_firetime_states(text: str, path: str, n_channels: int) -> dict[int, list[list[float]]] | None:
    """The OT128's firetime table (rows ``Operational State``, ``Azimuth State``, then per channel the
    firing offset in us of each (operational state, azimuth state) column, ``-`` where the channel
    does not fire in that state): per operational state (0 high resolution, 2 standard), per azimuth
    state, per channel the offset, -1 where it does not fire. None for the other layouts."""
    lines = _lines(text)
    if len(lines) < 3 or not lines[0].lower().startswith("operational state"):
        return None
    op_row, az_row = ([c.strip() for c in ln.split(",")] for ln in lines[:2])
    if not az_row[0].lower().startswith("azimuth state") or len(op_row) != len(az_row):
        raise refuse(path, "line 2", "expected 'Azimuth State' and one state per column of line 1")
    try:
        cols = [(int(o), int(a)) for o, a in zip(op_row[1:], az_row[1:], strict=True)]
    except ValueError:
        raise refuse(path, "line 1", "operational and azimuth states must be integers") from None
    times: dict[int, list[float]] = {}
    for n, line in enumerate(lines[2:]):
        cells = [c.strip() for c in line.split(",")]
        try:
            ch = int(cells[0])
            times[ch] = [-1.0 if c == "-" else float(c) for c in cells[1 : len(cols) + 1]]
        except (ValueError, IndexError):
            raise refuse(
                path, f"line {n + 3}", f"{line!r}: expected channel, then a time or '-' a column"
            ) from None
        if len(times[ch]) != len(cols) or any(v < 0 and v != -1.0 for v in times[ch]):
            raise refuse(
                path, f"line {n + 3}", f"{line!r}: one time (>= 0 us) or '-' for each of {len(cols)} columns"
            )
    if sorted(times) != list(range(1, n_channels + 1)):
        raise refuse(
            path,
            "channel",
            f"has channels {min(times)}..{max(times)} ({len(times)}); the angle file {n_channels}",
        )
    out: dict[int, list[list[float]]] = {}
    for op in sorted({o for o, _ in cols}):
        states = sorted(a for o, a in cols if o == op)
        if states != list(range(len(states))):
            raise refuse(
                path, "Azimuth State", f"operational state {op}: azimuth states {states}, expected 0..N-1"
            )
        out[op] = [[times[ch][cols.index((op, a))] for ch in range(1, n_channels + 1)] for a in states]
    return out


def read_at128_dat(data: bytes, path: str) -> VendorTable:
    """The AT128's binary angle-correction file (version 1.5)."""
    at = data.find(b"\xee\xff", 0, 64)  # the delimiter, maybe after a few bytes (nebula searches for it)
    data = data[at:] if at > 0 else data
    if data[:2] != b"\xee\xff":
        raise refuse(path, "<file>", "not a Hesai .dat (no EE FF delimiter)")
    if data[:4] == AT128_V13_MAGIC:
        return _read_at128_dat_v13(data, path)
    if data[:4] != AT128_MAGIC:
        raise refuse(
            path,
            "version",
            f"Hesai .dat version {data[2]}.{data[3]}: only the AT128's 1.3 and 1.5 are read (other versions "
            "are other products' formats: ATX, ET25, FT120)",
        )
    ch, mirrors = data[4], data[5]
    res = data[15]
    need = 16 + 8 * mirrors + 8 * ch + 2 * 180 * ch + 32
    if len(data) < need or ch == 0 or mirrors == 0:
        raise refuse(path, "<file>", f"{len(data)} bytes; {ch} channels x {mirrors} mirrors need {need}")
    off = 16
    start = struct.unpack_from(f"<{mirrors}I", data, off)
    off += 4 * mirrors
    end = struct.unpack_from(f"<{mirrors}I", data, off)
    off += 4 * mirrors
    az = struct.unpack_from(f"<{ch}i", data, off)
    off += 4 * ch
    el = struct.unpack_from(f"<{ch}i", data, off)
    off += 4 * ch
    adj_az = struct.unpack_from(f"<{ch * 180}b", data, off)
    adj_el = struct.unpack_from(f"<{ch * 180}b", data, off + ch * 180)
    unit = res * AT128_UNIT_DEG
    adj_unit = res * 0.01  # the adjust tables: 0.01 deg times the resolution byte, as nebula scales them
    beams = [
        {
            "ring": i,
            "laser_id": i + 1,
            "elevation_deg": round(el[i] * unit, 6),
            "azimuth_offset_deg": round(wrap_deg(az[i] * unit), 6)
            + 0.0,  # the .dat's sign is the CSV's flipped
            "azimuth_adjust_deg": [round(v * adj_unit, 6) for v in adj_az[i * 180 : (i + 1) * 180]],
            "elevation_adjust_deg": [round(v * adj_unit, 6) for v in adj_el[i * 180 : (i + 1) * 180]],
        }
        for i in range(ch)
    ]
    check_angles(path, beams, "elevation")
    digest_ok = hashlib.sha256(data[: need - 32]).digest() == data[need - 32 : need]
    frames_txt = ", ".join(f"{s * unit:.2f}-{e * unit:.2f}" for s, e in zip(start, end, strict=True))
    table = VendorTable(
        path=path,
        vendor="Hesai",
        layout="Hesai AT128 angle-correction .dat (v1.5)",
        beams=beams,
        model="AT128",
        model_said_by="version 1.5 .dat",
        from_file={
            "beams.elevation_deg": "elevation[channel]",
            "beams.azimuth_offset_deg": "azimuth[channel] (sign as the CSV's flipped)",
            "beams.azimuth_adjust_deg": "azimuth adjust table (every 2 deg of encoder, x resolution x 0.01)",
            "beams.elevation_adjust_deg": "elevation adjust table (as the azimuth's)",
            "scan.mirror_fields_deg": f"mirror frames' starts ({mirrors} mirrors, encoder {frames_txt} deg)",
        },
        scan_extra={"mirror_fields_deg": [round(v * unit, 6) for v in start]},
    )
    if not digest_ok:
        table.warnings.append(f"{path}: the trailing SHA-256 does not match the file's bytes")
    return table


def _read_at128_dat_v13(data: bytes, path: str) -> VendorTable:
    """The AT128's older .dat (version 1.3): int16 angles in 0.01 deg x the resolution byte, frames as
    uint16, and adjust tables indexed by the encoder angle (not by channel; not used)."""
    ch, frames, res = data[4], data[6], data[15]
    need = 16 + 4 * frames + 4 * ch + 2 * 36000 + 32
    if len(data) < need or ch == 0 or frames == 0:
        raise refuse(
            path, "<file>", f"{len(data)} bytes; a v1.3 .dat of {ch} channels, {frames} frames needs {need}"
        )
    off = 16
    start = struct.unpack_from(f"<{frames}H", data, off)
    off += 4 * frames  # the starts, then the ends
    az = struct.unpack_from(f"<{ch}h", data, off)
    el = struct.unpack_from(f"<{ch}h", data, off + 2 * ch)
    unit = 0.01 * res
    beams = [
        {
            "ring": i,
            "laser_id": i + 1,
            "elevation_deg": round(el[i] * unit, 6),
            "azimuth_offset_deg": round(wrap_deg(az[i] * unit), 6) + 0.0,  # subtracted from the encoder's
        }
        for i in range(ch)
    ]
    check_angles(path, beams, "elevation")
    digest_ok = hashlib.sha256(data[: need - 32]).digest() == data[need - 32 : need]
    table = VendorTable(
        path=path,
        vendor="Hesai",
        layout="Hesai AT128 angle-correction .dat (v1.3)",
        beams=beams,
        model="AT128",
        model_said_by="version 1.3 .dat",
        from_file={
            "beams.elevation_deg": "elevation[channel] (0.01 deg x resolution)",
            "beams.azimuth_offset_deg": "azimuth[channel] (subtracted from the encoder angle: sign kept)",
            "scan.mirror_fields_deg": f"frame starts ({frames} frames)",
        },
        scan_extra={"mirror_fields_deg": [round(v * unit, 6) for v in start]},
        unused=["azimuth / elevation adjust tables by encoder angle (v1.3): not applied"],
    )
    if not digest_ok:
        table.warnings.append(f"{path}: the trailing SHA-256 does not match the file's bytes")
    return table
