"""Presets from the vendors' own calibration files: the sensor a user owns, not a catalogue model.

:func:`preset_from_vendor_file` sniffs the format from the file's content (not its name) and reads it:

- Ouster metadata JSON (every layout; :mod:`.ouster`);
- Velodyne ROS / velodyne_decoder YAML and VeloView / LidarView ``db.xml`` (:mod:`.velodyne`);
- Hesai angle-correction CSV (with a firetime CSV), AT128 ``.dat`` (:mod:`.hesai`);
- RoboSense ``angle.csv`` (:mod:`.robosense`).

Files that hold no beam table (firetime files alone, Livox driver configs, temperature or intensity
tables, other binaries) are refused with one line naming the file and what is missing. A preset
reference may carry the options: ``FILE#model=VLP-32A,lidar_mode=1024x10,firetime=FT.csv``.
"""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path

from rt_lidar.errors import PresetError
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.vendor.build import preset_from_table
from rt_lidar.sensor.vendor.hesai import (
    angle_rows_start,
    is_hesai_angle_header,
    is_hesai_firetime,
    read_at128_dat,
    read_firetime,
    read_firetime_states,
    read_hesai_csv,
)
from rt_lidar.sensor.vendor.ouster import is_ouster, read_ouster
from rt_lidar.sensor.vendor.robosense import as_robosense, read_robosense_csv, robosense_model_named
from rt_lidar.sensor.vendor.table import VendorTable, refuse
from rt_lidar.sensor.vendor.velodyne import read_velodyne_xml, read_velodyne_yaml

__all__ = ["is_vendor_ref", "preset_from_vendor_file", "read_vendor_table", "split_ref", "vendor_ref"]

VENDOR_SUFFIXES = (".json", ".yaml", ".yml", ".xml", ".csv", ".dat", ".txt")
_OPTIONS = {"model": "model", "lidar_mode": "lidar_mode", "lidar-mode": "lidar_mode", "firetime": "firetime"}


def split_ref(ref: str | Path) -> tuple[str, dict[str, str]]:
    """``FILE#model=M,lidar_mode=X`` -> (FILE, {model: M, lidar_mode: X}); a plain path has no options."""
    text = str(ref)
    path, sep, tail = text.rpartition("#")
    if not sep or "=" not in tail:
        return text, {}
    opts: dict[str, str] = {}
    for part in tail.split(","):
        key, eq, value = part.partition("=")
        key = key.strip().lower()
        if not eq or key not in _OPTIONS:
            raise PresetError(
                text,
                key or "#",
                f"unknown option; a vendor file takes {', '.join(sorted(set(_OPTIONS.values())))}",
            )
        opts[_OPTIONS[key]] = value.strip()
    return path, opts


def vendor_ref(path: str | Path, model: str | None = None, lidar_mode: str | None = None) -> str:
    """The one-string reference of a vendor file and its options (what ``--model`` / ``--lidar-mode``
    become, so a run's config.json, a rig or a sweep file can hold them)."""
    opts = [f"{k}={v}" for k, v in (("model", model), ("lidar_mode", lidar_mode)) if v]
    return f"{path}#{','.join(opts)}" if opts else str(path)


def is_vendor_ref(ref: str | Path) -> bool:
    """Whether ``ref`` names a vendor file (an existing non-TOML file, a vendor suffix, or options)."""
    path, opts = split_ref(ref)
    if opts:
        return True
    if path.lower().endswith(".toml"):
        return False
    p = Path(path)
    return p.is_file() or p.suffix.lower() in VENDOR_SUFFIXES


def read_vendor_table(path: str, lidar_mode: str | None = None) -> VendorTable:
    """The beam table of a vendor file, its format sniffed from the content."""
    p = Path(path)
    if not p.is_file():
        raise refuse(path, "<file>", "no such calibration file")
    data = p.read_bytes()
    if data[:2] == b"\xee\xff" or (b"\x00" in data[:256] and b"\xee\xff\x01" in data[:64]):
        return read_at128_dat(data, path)  # (nebula finds the delimiter after a few bytes too)
    text = _decode(data, path)
    body = text.lstrip()
    if not body:
        raise refuse(path, "<file>", "is empty")
    if body[0] in "{[":
        return _json(body, path, lidar_mode)
    if body.startswith("<"):
        return read_velodyne_xml(text, path)
    if "lasers" not in text:
        text = body = _as_csv(body)
    head = [ln for ln in body.splitlines()[:8] if ln.strip()]
    first = head[0]
    if any(is_hesai_angle_header(ln) for ln in head):
        return read_hesai_csv(text, path)
    if first.lower().startswith("eeff") and angle_rows_start(body) is not None:
        return read_hesai_csv(text, path)  # an EEFF version line, then header-less angle rows
    if is_hesai_firetime(first):
        raise refuse(
            path,
            "<file>",
            "a Hesai firetime / channel-config file holds firing times, no beam angles: give the "
            "angle-correction CSV, with this file as #firetime=... (or --firetime)",
        )
    if "lasers" in text and ":" in first + text[:2000]:
        return read_velodyne_yaml(text, path)
    cells = [c.strip() for c in first.split(",")]
    if all(_is_number(c) for c in cells if c) and len(cells) <= 3:
        if len([c for c in cells if c]) == 3:
            return read_hesai_csv(text, path)  # a headerless channel,elevation,azimuth table
        return read_robosense_csv(text, path)
    if all(_is_number(c) for c in cells if c):
        return read_robosense_csv(text, path)  # refuses the wide temperature / intensity tables
    raise refuse(
        path,
        "<file>",
        "no beam table: not a calibration format we read (Ouster JSON, Velodyne YAML / db.xml, "
        "Hesai CSV / .dat, RoboSense angle.csv)",
    )


def _decode(data: bytes, path: str) -> str:
    """The file's text: UTF-8 (with or without a BOM), UTF-16 with its BOM (Excel's "Unicode text"), or
    a mostly-ASCII file in a legacy code page (a GBK or Latin-1 comment: the numbers are ASCII)."""
    binary = refuse(path, "<file>", "a binary file of unknown format: no beam table we can read")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise binary from None
    if b"\x00" in data:
        raise binary
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    controls = sum(1 for b in data if b < 32 and b not in (9, 10, 13))
    if controls or sum(1 for b in data if b < 128) < 0.9 * len(data):
        raise binary
    return data.decode("latin-1")


def _as_csv(text: str) -> str:
    """A table exported with tabs or semicolons instead of commas, or with quoted cells, as plain CSV
    (the vendors' readers split on commas; the numbers are the same)."""
    text = text.replace('"', "")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if lines and not any("," in ln for ln in lines):
        for sep in ("\t", ";"):
            if all(sep in ln.strip() for ln in lines[1:]) and len(lines) > 1:
                return "\n".join(
                    ",".join(c.strip() for c in ln.strip().split(sep)) for ln in text.splitlines()
                )
    return text


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _json(text: str, path: str, lidar_mode: str | None) -> VendorTable:
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise refuse(path, "<file>", f"not valid JSON: {exc}") from None
    if is_ouster(d):
        return read_ouster(d, path, lidar_mode)
    keys = " ".join(str(k).lower() for k in (d if isinstance(d, dict) else {}))
    if any(
        w in keys for w in ("livox", "lidar_config", "broadcast_code", "lidar_summary_info", "mid360", "hap")
    ):
        raise refuse(
            path,
            "<file>",
            "a Livox driver configuration (connection settings): Livox publishes no per-beam "
            "table; use a Livox preset (rt-lidar presets list)",
        )
    raise refuse(
        path, "beam_altitude_angles", "missing: a JSON file without a beam table (not Ouster metadata)"
    )


def preset_from_vendor_file(
    ref: str | Path, model: str | None = None, lidar_mode: str | None = None, firetime: str | None = None
) -> SensorPreset:
    """The validated preset of a vendor calibration file (``ref`` may carry ``#model=...`` options;
    arguments given here win over them)."""
    path, opts = split_ref(ref)
    model = model or opts.get("model") or None
    lidar_mode = lidar_mode or opts.get("lidar_mode") or None
    firetime = firetime or opts.get("firetime") or None
    p = Path(path)
    stamp = (p.stat().st_mtime_ns, p.stat().st_size) if p.is_file() else None
    preset, said = _cached(path, stamp, model, lidar_mode, firetime)
    for w in said:  # every call says them (Python shows each distinct one once)
        warnings.warn(w, stacklevel=2)
    return preset


@functools.lru_cache(maxsize=64)
def _cached(
    path: str, stamp: tuple[int, int] | None, model: str | None, lidar_mode: str | None, firetime: str | None
) -> tuple[SensorPreset, tuple[str, ...]]:
    table = read_vendor_table(path, lidar_mode)
    if table.layout == "Hesai angle-correction CSV":
        rs = robosense_model_named(path, model)
        if rs is not None:  # nebula keeps RoboSense tables in Hesai's layout
            table = as_robosense(table, rs, "--model" if model else "file name")
    if lidar_mode is not None and table.vendor != "Ouster":
        raise refuse(path, "--lidar-mode", f"applies to Ouster metadata only; this is a {table.layout}")
    firing = None
    states = None
    said = ""
    if firetime is not None:
        if table.vendor != "Hesai":
            raise refuse(
                firetime,
                "firetime",
                f"a Hesai firetime file goes with a Hesai angle file, not a {table.layout}",
            )
        fp = Path(firetime)
        if not fp.is_file():
            raise refuse(firetime, "<file>", "no such firetime file")
        text = fp.read_bytes().decode("utf-8-sig", errors="replace")
        said = f"firetime {fp.name}"
        states = read_firetime_states(text, firetime, len(table.beams))
        if states is None:
            firing, why = read_firetime(text, firetime, len(table.beams))
            if firing is None:
                table.warnings.append(why)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        preset = preset_from_table(table, model, firing, said, states)
    return preset, tuple(str(w.message) for w in caught)
