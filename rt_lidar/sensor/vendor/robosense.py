"""RoboSense ``angle.csv`` as a :class:`VendorTable`.

One column (RS-16: elevations) or ``elevation,azimuth`` pairs (RS-32, Bpearl, Helios), degrees, CRLF,
leading blanks, maybe no final newline. Each row is a laser (its id = the row, as rs_driver reads the
file); the ring is rs_driver's user channel, the laser's rank by elevation, lowest first. The azimuths
are clockwise, as rs_driver adds them to the head's (flipped here); firing times per model are
rs_driver's tables (:mod:`.models`). ``ChannelNum.csv`` (temperature-indexed distance
offsets) and ``curves.csv`` / ``CurveRate.csv`` (intensity) are not beam tables and are refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from rt_lidar.sensor.vendor.table import VendorTable, check_angles, check_azimuths, refuse, wrap_deg

__all__ = ["as_robosense", "read_robosense_csv", "robosense_model_named"]


def read_robosense_csv(text: str, path: str) -> VendorTable:
    """An ``angle.csv``."""
    rows: list[list[float]] = []
    for n, line in enumerate(text.lstrip("\ufeff").splitlines()):
        cells = [c.strip() for c in line.strip().rstrip(",").split(",")]
        if not any(cells):
            continue
        try:
            rows.append([float(c) for c in cells])
        except ValueError:
            raise refuse(
                path, f"line {n + 1}", f"{line.strip()!r}: expected 1 or 2 numbers (degrees)"
            ) from None
    if not rows:
        raise refuse(path, "<file>", "is empty")
    widths = {len(r) for r in rows}
    if widths - {1, 2}:
        raise refuse(
            path,
            "<file>",
            f"{max(widths)} columns a row: not an angle table (RoboSense's ChannelNum.csv holds "
            "temperature-indexed distance offsets, curves.csv intensity curves)",
        )
    worst = max((abs(r[0]) for r in rows), default=0.0)
    if worst > 90.0:
        raise refuse(
            path, "<file>", f"column 1 reaches {worst:g}: not elevations in degrees (not an angle.csv)"
        )
    check_azimuths(path, [r[1] for r in rows if len(r) > 1], "azimuth")
    # rs_driver's user channel: the laser's rank by elevation, lowest first (laser id = the file's row)
    rank = {row: ring for ring, row in enumerate(sorted(range(len(rows)), key=lambda i: (rows[i][0], i)))}
    beams = [
        {
            "ring": rank[i],
            "laser_id": i,
            "elevation_deg": r[0],
            "azimuth_offset_deg": wrap_deg(-r[1]) + 0.0 if len(r) > 1 else 0.0,
        }
        for i, r in enumerate(rows)
    ]
    check_angles(path, beams, "elevation")
    from_file = {"beams.elevation_deg": "column 1"}
    if 2 in widths:
        from_file["beams.azimuth_offset_deg"] = "column 2 (clockwise, sign flipped)"
    table = VendorTable(
        path=path,
        vendor="RoboSense",
        layout=f"RoboSense angle.csv ({max(widths)} column{'s' if max(widths) > 1 else ''})",
        beams=beams,
        from_file=from_file,
        unused=[
            "lens centre offsets (rs_driver's RX, RY, RZ per model; not in the file): rays start at the axis"
        ],
    )
    table.model, table.model_said_by = Path(path).parent.name, "folder name"
    return table


def robosense_model_named(path: str, model: str | None = None) -> str | None:
    """The RoboSense product that ``model`` or the file's name or folder names (``Helios5515.csv``,
    ``robosense/bpearl/x.csv``), or None."""
    from rt_lidar.errors import PresetError
    from rt_lidar.sensor.vendor.models import find_model

    p = Path(path)
    names = [model] if model else [p.stem, p.parent.name, *re.split(r"[_\s.]+", p.stem)]
    for name in names:
        for cand in (name, re.sub(r"(?i)^robosense[_-]?", "", name)):
            if len(cand) < 3:
                continue
            try:
                return find_model(cand, path, "RoboSense").name
            except PresetError:
                continue
    return None


def as_robosense(table: VendorTable, model: str, said_by: str) -> VendorTable:
    """A ``Laser id,Elevation,Azimuth`` table (nebula's RoboSense calibration layout, the same as Hesai's)
    as RoboSense's: laser id = channel - 1 (rs_driver's row), ring = rank by elevation; the azimuths are
    added clockwise by both drivers, so they stay as read."""
    beams = [dict(b, laser_id=int(b["laser_id"]) - 1) for b in table.beams]
    order = sorted(range(len(beams)), key=lambda i: (beams[i]["elevation_deg"], i))
    for ring, i in enumerate(order):
        beams[i]["ring"] = ring
    table.beams = beams
    table.vendor = "RoboSense"
    table.layout = "RoboSense calibration CSV (nebula's 'Laser id,Elevation,Azimuth' layout)"
    table.model, table.model_said_by = model, said_by
    table.unused.append(
        "lens centre offsets (rs_driver's RX, RY, RZ per model; not in the file): rays start at the axis"
    )
    return table
