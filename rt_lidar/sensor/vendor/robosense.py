"""RoboSense ``angle.csv`` as a :class:`VendorTable`.

One column (RS-16: elevations) or ``elevation,azimuth`` pairs (RS-32, Bpearl, Helios), degrees, CRLF,
leading blanks, maybe no final newline. Rows are the driver's channels in file order (ring = row); the
azimuths are taken clockwise like Hesai's (flipped here). ``ChannelNum.csv`` (temperature-indexed distance
offsets) and ``curves.csv`` / ``CurveRate.csv`` (intensity) are not beam tables and are refused.
"""

from __future__ import annotations

from pathlib import Path

from rt_lidar.sensor.vendor.table import VendorTable, check_angles, check_azimuths, refuse, wrap_deg

__all__ = ["read_robosense_csv"]


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
    check_azimuths(path, [r[1] for r in rows if len(r) > 1], "azimuth")
    beams = [
        {
            "ring": i,
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
        unused=["laser-origin offsets (per model in rs_driver, not in the file): rays start at the origin"],
    )
    table.model, table.model_said_by = Path(path).parent.name, "folder name"
    return table
