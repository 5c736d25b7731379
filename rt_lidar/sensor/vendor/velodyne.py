"""Velodyne calibration files as :class:`VendorTable`: the ROS driver's YAML (and velodyne_decoder's,
the same format) and VeloView / LidarView ``db.xml``.

The YAML is read with a real YAML parser (ruamel.yaml): flow, block and multi-line flow layouts, trailing
commas, repeated keys (the last wins, as the drivers' parsers do). Angles in radians, distances in metres;
``rot_correction`` is already counter-clockwise positive. ``db.xml`` (boost serialization) holds degrees
and centimetres, 64 or 128 entries and an ``enabled_`` mask; VLS-128 files spell
``horizOffsetCorection_``. Rings follow the ROS driver: ascending elevation, laser id kept.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from rt_lidar.sensor.vendor.table import VendorTable, check_angles, check_azimuths, refuse, wrap_deg

__all__ = ["parse_velodyne_yaml", "read_velodyne_xml", "read_velodyne_yaml"]

# YAML key -> (beam field, factor to the preset's unit)
_YAML_FIELDS = {
    "dist_correction": "dist_correction_m",
    "dist_correction_x": "dist_correction_x_m",
    "dist_correction_y": "dist_correction_y_m",
    "vert_offset_correction": "vert_offset_correction_m",
    "horiz_offset_correction": "horiz_offset_correction_m",
    "focal_distance": "focal_distance",
    "focal_slope": "focal_slope",
}
FOCUS_RANGE_M = (0.1, 1000.0)
"""``focal_distance`` values read as the laser's receiver focus (``Beam.receiver_focus_m``'s range)."""
# db.xml tag -> YAML key, factor (cm -> m)
_XML_FIELDS = {
    "distCorrection_": ("dist_correction", 0.01),
    "distCorrectionX_": ("dist_correction_x", 0.01),
    "distCorrectionY_": ("dist_correction_y", 0.01),
    "vertOffsetCorrection_": ("vert_offset_correction", 0.01),
    "horizOffsetCorrection_": ("horiz_offset_correction", 0.01),
    "horizOffsetCorection_": ("horiz_offset_correction", 0.01),  # VLS-128 files' spelling
    "focalDistance_": ("focal_distance", 0.01),
    "focalSlope_": ("focal_slope", 1.0),
}


def parse_velodyne_yaml(text: str, path: str = "<yaml>") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ``lasers`` list (dicts of numbers) and the other top-level keys of a ROS velodyne file."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    yaml = YAML(typ="safe", pure=True)

    def plain(node: Any) -> Any:  # a repeated key keeps its last value, as the drivers' parsers do
        if isinstance(node, MappingNode):
            return {plain(k): plain(v) for k, v in node.value}
        if isinstance(node, SequenceNode):
            return [plain(v) for v in node.value]
        return yaml.constructor.construct_object(node, deep=True)

    try:
        node = yaml.compose(text)
        data = plain(node) if node is not None else None
    except YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise refuse(path, "<file>", f"not valid YAML: {first}") from None
    if not isinstance(data, dict) or "lasers" not in data:
        raise refuse(path, "lasers", "missing: not a Velodyne calibration (no 'lasers' list)")
    lasers = data["lasers"]
    if not isinstance(lasers, list) or not lasers:
        raise refuse(path, "lasers", "must be a non-empty list of lasers")
    out = []
    for i, las in enumerate(lasers):
        if not isinstance(las, dict):
            raise refuse(path, f"lasers[{i}]", "must be a mapping of laser_id, vert_correction, ...")
        for key in ("laser_id", "vert_correction"):
            if key not in las:
                raise refuse(path, f"lasers[{i}].{key}", "missing")
        fields: dict[str, Any] = {}
        for k, v in las.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue  # two_pt_correction_available and other flags
            fields[str(k)] = float(v)
        out.append(fields)
    rest = {k: v for k, v in data.items() if k != "lasers"}
    return out, rest


def _model_hint(text: str, path: str) -> tuple[str | None, str]:
    m = re.search(r"^#\s*aka\s+(.+?)\s*$", text, re.MULTILINE)  # velodyne_decoder's files
    if m:
        return m[1], "comment 'aka'"
    return Path(path).stem, "file name"


def _table(
    lasers: list[dict[str, float]], rest: dict[str, Any], path: str, layout: str, unit: str
) -> VendorTable:
    ids = [int(las["laser_id"]) for las in lasers]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        missing = sorted(set(range(len(ids))) - set(ids))
        raise refuse(
            path,
            "lasers.laser_id",
            f"laser id {', '.join(map(str, dup[:5]))} appears twice and {', '.join(map(str, missing[:5]))} "
            "never: the table is inconsistent",
        )
    if sorted(ids) != list(range(len(ids))):
        raise refuse(
            path, "lasers.laser_id", f"must be 0..{len(ids) - 1}, one each; got {sorted(ids)[:8]}..."
        )
    num = rest.get("num_lasers")
    if num is not None and int(num) != len(lasers):
        raise refuse(path, "num_lasers", f"says {num} but the file lists {len(lasers)} lasers")
    check_azimuths(
        path, [math.degrees(las.get("rot_correction", 0.0)) for las in lasers], "lasers.rot_correction"
    )
    order = sorted(range(len(lasers)), key=lambda i: (lasers[i]["vert_correction"], lasers[i]["laser_id"]))
    beams = []
    for ring, i in enumerate(order):
        las = lasers[i]
        b: dict[str, Any] = {
            "ring": ring,
            "laser_id": int(las["laser_id"]),
            "elevation_deg": math.degrees(las["vert_correction"]),
            "azimuth_offset_deg": wrap_deg(math.degrees(las.get("rot_correction", 0.0))) + 0.0,
        }
        for key, name in _YAML_FIELDS.items():
            b[name] = float(las.get(key, 0.0))
        if FOCUS_RANGE_M[0] <= b["focal_distance"] <= FOCUS_RANGE_M[1]:  # 0: the file gives none
            b["receiver_focus_m"] = b["focal_distance"]
        beams.append(b)
    check_angles(path, beams, "lasers.vert_correction")
    beams.sort(key=lambda b: b["laser_id"])
    from_file = {
        "beams.elevation_deg": f"vert_correction ({unit})",
        "beams.azimuth_offset_deg": f"rot_correction ({unit})",
        "beams.dist_correction_m": "dist_correction, _x, _y, vert/horiz_offset_correction, focal_*",
    }
    focused = [b for b in beams if "receiver_focus_m" in b]
    if focused:
        from_file["beams.receiver_focus_m"] = (
            f"focal_distance (m) of {len(focused)} of {len(beams)} lasers (the receiver lens's focus)"
        )
    unused = []
    odd = [b["laser_id"] for b in beams if b["focal_distance"] and "receiver_focus_m" not in b]
    if odd:
        unused.append(
            f"focal_distance outside {FOCUS_RANGE_M[0]:g}-{FOCUS_RANGE_M[1]:g} m (laser ids "
            f"{', '.join(map(str, odd[:8]))}): those lasers take the preset's optics.receiver_focus_m"
        )
    if any(b["dist_correction_x_m"] or b["focal_distance"] for b in beams):
        unused.append("two-point distance corrections (_x, _y, focal_*): kept, not applied to ranges")
    res = rest.get("distance_resolution")
    if res is not None:
        unused.append(f"distance_resolution {res} (the packet unit is the model's)")
    return VendorTable(
        path=path, vendor="Velodyne", layout=layout, beams=beams, from_file=from_file, unused=unused
    )


def read_velodyne_yaml(text: str, path: str) -> VendorTable:
    """A ROS velodyne / velodyne_decoder calibration YAML."""
    lasers, rest = parse_velodyne_yaml(text, path)
    table = _table(lasers, rest, path, "Velodyne calibration YAML (ROS driver / velodyne_decoder)", "radians")
    table.model, table.model_said_by = _model_hint(text, path)
    return table


def _num(el: ET.Element | None, path: str, where: str) -> float:
    if el is None or el.text is None:
        raise refuse(path, where, "missing")
    try:
        return float(el.text.strip())
    except ValueError:
        raise refuse(path, where, f"{el.text.strip()!r} is not a number") from None


def read_velodyne_xml(text: str, path: str) -> VendorTable:
    """A VeloView / LidarView ``db.xml`` (degrees, centimetres, ``enabled_`` mask)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise refuse(path, "<file>", f"not valid XML: {exc}") from None
    db = root.find("DB") if root.tag != "DB" else root
    points = db.find("points_") if db is not None else None
    if db is None or points is None:
        raise refuse(path, "DB.points_", "missing: not a VeloView/LidarView calibration (db.xml)")
    pxs = [item.find("px") for item in points.findall("item")]
    enabled_el = db.find("enabled_")
    enabled = (
        [int(float(_num(e, path, "enabled_.item"))) for e in enabled_el.findall("item")]
        if enabled_el is not None
        else [1] * len(pxs)
    )
    lasers: list[dict[str, float]] = []
    every: list[dict[str, float]] = []
    for i, px in enumerate(pxs):
        if px is None:
            raise refuse(path, f"points_[{i}]", "has no px entry")
        las = {
            "laser_id": _num(px.find("id_"), path, f"points_[{i}].id_"),
            "vert_correction": math.radians(
                _num(px.find("vertCorrection_"), path, f"points_[{i}].vertCorrection_")
            ),
            "rot_correction": math.radians(
                _num(px.find("rotCorrection_"), path, f"points_[{i}].rotCorrection_")
            ),
        }
        for tag, (key, factor) in _XML_FIELDS.items():
            el = px.find(tag)
            if el is not None:
                las[key] = _num(el, path, f"points_[{i}].{tag}") * factor
        every.append(las)
        if i >= len(enabled) or enabled[i] != 0:
            lasers.append(las)
    if not lasers:
        raise refuse(path, "enabled_", "no laser is enabled")
    lasers, note = _drop_repeats(lasers)
    calibrated, _ = _drop_repeats(_drop_blank_tail(every))
    rest: dict[str, Any] = {}
    lsb = db.find("distLSB_")
    if lsb is not None:
        rest["distance_resolution"] = _num(lsb, path, "distLSB_") * 0.01
    table = _table(lasers, rest, path, "VeloView/LidarView db.xml", "degrees, centimetres")
    table.model, table.model_said_by = Path(path).stem, "file name"
    if note:
        table.warnings.append(f"{path}: {note}")
    n_cal = len(calibrated)
    if n_cal != len(lasers) and sorted(int(las["laser_id"]) for las in calibrated) == list(range(n_cal)):
        alt = _table(calibrated, rest, path, table.layout, "degrees, centimetres")
        table.alternatives[n_cal] = (
            alt.beams,
            f"enabled_ enables {len(lasers)} lasers but entries 0..{n_cal - 1} hold calibrated angles",
        )
    return table


def _drop_blank_tail(lasers: list[dict[str, float]]) -> list[dict[str, float]]:
    """The entries up to the last one that holds a correction (old db.xml files pad to 64 with zeros)."""
    end = len(lasers)
    while end > 1 and not any(v for k, v in lasers[end - 1].items() if k != "laser_id"):
        end -= 1
    return lasers[:end]


def _drop_repeats(lasers: list[dict[str, float]]) -> tuple[list[dict[str, float]], str]:
    """A db.xml of a 16- or 32-laser unit with every entry enabled repeats its lasers up to 64: keep one
    period (the entries from ``period`` on equal those ``period`` before them)."""
    n = len(lasers)
    for period in (16, 32):
        if n > period and n % period == 0:
            key = [
                (round(las["vert_correction"], 9), round(las.get("rot_correction", 0.0), 9)) for las in lasers
            ]
            ids = [int(las["laser_id"]) for las in lasers]
            if all(key[i] == key[i % period] for i in range(n)) and sorted(ids[:period]) == list(
                range(period)
            ):
                return lasers[
                    :period
                ], f"entries {period}..{n - 1} repeat lasers 0..{period - 1}: kept {period}"
    return lasers, ""
