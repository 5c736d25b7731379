#!/usr/bin/env python3
"""Write the ``[[beams]]`` tables of the sensor presets from the published calibration files.

    python tools/import_calibrations.py --calibrations ../shared/reference/calibrations --out sensor_presets/

The non-beam fields (datasheet figures, with their provenance in ``source``) live in the TOML files
themselves, in one place, and are kept as they are; only ``pulse.detection_threshold_w`` is
recomputed: the power a 10 % Lambertian target at normal incidence returns from ``range.range_10pct_m``
(``rt_lidar.sensor.presets.lambertian_return_w``). Every written file is validated by loading it back.

Azimuth conventions: the presets store offsets counter-clockwise positive (math convention). The ROS
velodyne driver's ``rot_correction`` already is (it computes the ROS-frame azimuth as rot - head);
Hesai and Ouster tables give clockwise angles, so their sign is flipped.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
import sys
import tomllib
from pathlib import Path
from typing import Any

from rt_lidar.errors import PresetError
from rt_lidar.sensor.presets import lambertian_return_w, load_preset
from rt_lidar.sensor.vendor.velodyne import parse_velodyne_yaml as _parse_velodyne_yaml

__all__ = ["SOURCES", "beams_for", "main", "parse_velodyne_yaml", "render_toml"]

# Preset file stem -> (parser, calibration file or rule). The non-beam fields live in the TOML files.
SOURCES: dict[str, tuple[str, str]] = {
    "vlp-16": ("velodyne", "VLP16db.yaml"),
    "vlp-32c": ("velodyne", "VeloView-VLP-32C.yaml"),
    "hdl-32e": ("velodyne", "32db.yaml"),
    "hdl-64e": ("velodyne", "64e_utexas.yaml"),  # HDL-64E S2; 64e_s3-xiesc.yaml is an S3 unit
    "vls-128": ("velodyne", "VLS128.yaml"),
    "os1-64": ("ouster", "os1_64_gen1_beam_intrinsics.txt"),
    "os1-128": ("uniform", "22.5,-22.5,128"),  # Ouster's published uniform spread, no per-unit table
    "pandar64": ("hesai", "pandar64_nebula_64.csv"),
    "at128": ("at128", "at128_nebula_summary.txt"),
    "livox-mid40": ("single", ""),
    "cube-1": ("uniform", "15,-15,75"),  # one nominal elevation per scan line
    "scala-gen2": ("uniform", "5,-5,16"),
}
# Preset file stem -> (calibration file, laser ids): those lasers' receiver focus (beams.receiver_focus_m)
# is the median focal_distance of the same lasers in that file, where the preset's own file gives none.
# The HDL-64E S2's file (64e_utexas.yaml) has no focal_distance; the S3 unit's lower block is focused at
# 9-16.5 m (median 11.2 m), 13 of its lasers at 0.25-5 m, nearer than any road they see (read as not
# calibrated, left out); the upper block's median (15 m) is the preset's optics.receiver_focus_m.
FOCUS_SOURCES: dict[str, tuple[str, range]] = {"hdl-64e": ("64e_s3-xiesc.yaml", range(32, 64))}
FOCUS_FLOOR_M = 9.0
PRESET_DIR = Path(__file__).resolve().parents[1] / "sensor_presets"
HESAI_FIRING_STEP_US = 0.65  # Pandar64 channel firing offsets, evenly spread (approximation)

# Velodyne firing schedule within the firing cycle, from the laser id.
_VELO_FIRING_US = {
    "velodyne-vlp16": lambda lid: lid * 2.304,
    "velodyne-vlp32c": lambda lid: (lid // 2) * 2.304,
    "velodyne-hdl32": lambda lid: lid * 1.152,
    # HDL-64E S2 firing table: upper and lower block fire together, four lasers a 6 us group
    "velodyne-hdl64": lambda lid: (lid % 32) // 4 * 6.0 + (0.0, 1.26, 2.46, 3.66)[lid % 4],
    "velodyne-vls128": lambda lid: (lid // 8) * 2.665,
}


def parse_velodyne_yaml(text: str) -> list[dict[str, float]]:
    """The ``lasers`` list of a ROS velodyne calibration file (flow, block or multi-line layout) as
    dicts of numbers, read with a YAML parser (:func:`rt_lidar.sensor.vendor.velodyne.parse_velodyne_yaml`;
    the regular expression this used to be returned no lasers for block and multi-line files)."""
    return _parse_velodyne_yaml(text)[0]


def _velodyne(path: Path, packet: str) -> list[dict[str, Any]]:
    lasers = parse_velodyne_yaml(path.read_text())
    order = sorted(range(len(lasers)), key=lambda i: (lasers[i]["vert_correction"], lasers[i]["laser_id"]))
    beams = []
    for ring, i in enumerate(order):
        las = lasers[i]
        lid = int(las["laser_id"])
        beams.append(
            {
                "ring": ring,
                "laser_id": lid,
                "elevation_deg": math.degrees(las["vert_correction"]),
                "azimuth_offset_deg": math.degrees(las.get("rot_correction", 0.0)),
                "firing_offset_us": _VELO_FIRING_US[packet](lid),
                "dist_correction_m": las.get("dist_correction", 0.0),
                "dist_correction_x_m": las.get("dist_correction_x", 0.0),
                "dist_correction_y_m": las.get("dist_correction_y", 0.0),
                "vert_offset_correction_m": las.get("vert_offset_correction", 0.0),
                "horiz_offset_correction_m": las.get("horiz_offset_correction", 0.0),
                "focal_distance": las.get("focal_distance", 0.0),
                "focal_slope": las.get("focal_slope", 0.0),
            }
        )
        if las.get("focal_distance", 0.0) > 0:  # the laser's receiver focus, as the vendor reader takes it
            beams[-1]["receiver_focus_m"] = las["focal_distance"]
    return sorted(beams, key=lambda b: b["laser_id"])


def _channels(
    elev: list[float], azim_cw: list[float], offsets_us: list[float] | None = None
) -> list[dict[str, Any]]:
    """Channel-ordered beams (ring = channel - 1, laser_id = channel), clockwise azimuths flipped."""
    return [
        {
            "ring": i,
            "laser_id": i + 1,
            "elevation_deg": e,
            "azimuth_offset_deg": -a + 0.0,
            "firing_offset_us": offsets_us[i] if offsets_us else 0.0,
        }
        for i, (e, a) in enumerate(zip(elev, azim_cw, strict=True))
    ]


def beams_for(key: str, calibrations: Path, packet: str) -> list[dict[str, Any]]:
    """The beam table of preset file ``key`` (see ``SOURCES``) from its file in ``calibrations``."""
    kind, arg = SOURCES[key]
    if kind == "velodyne":
        return _velodyne(calibrations / arg, packet)
    if kind == "hesai":
        text_lines = [
            ln for ln in (calibrations / arg).read_text().splitlines() if ln.strip() and ln[0] != "#"
        ]
        rows = list(csv.reader(text_lines))[1:]
        rows.sort(key=lambda r: int(r[0]))
        return _channels(
            [float(r[1]) for r in rows],
            [float(r[2]) for r in rows],
            [(int(r[0]) - 1) * HESAI_FIRING_STEP_US for r in rows],
        )
    if kind == "ouster":
        lines = (calibrations / arg).read_text().splitlines()
        elev = [float(v) for v in next(ln for ln in lines if ln.strip() and ln[0] != "#").split(",")]
        pattern = [float(v) for v in re.search(r"\[([^\]]+)\]", lines[-1]).group(1).split(",")]  # type: ignore[union-attr]
        beams = _channels(elev, [pattern[i % len(pattern)] for i in range(len(elev))])
        for b in beams:
            b["laser_id"] -= 1  # Ouster channels count from 0
        return beams
    if kind == "at128":
        text = (calibrations / arg).read_text()
        m = re.search(
            r"elevation ([-\d.]+) deg \(ch1\) to ([-\d.]+) deg \(ch(\d+)\), uniform ([\d.]+) deg step", text
        )
        g = re.search(r"groups of (\d+) over \{([^}]*)\} and \{([^}]*)\}", text)
        assert m and g, f"{arg}: rule not understood"
        top, bottom, n, step = float(m[1]), float(m[2]), int(m[3]), float(m[4])
        assert abs(top - (n - 1) * step - bottom) < 1e-6, f"{arg}: elevation rule inconsistent"
        size, even, odd = int(g[1]), [float(v) for v in g[2].split(",")], [float(v) for v in g[3].split(",")]
        az = [(even if (i // size) % 2 == 0 else odd)[i % 2] for i in range(n)]
        return _channels([round(top - i * step, 6) for i in range(n)], az)
    if kind == "uniform":
        first, last, count = arg.split(",")
        e0, e1, nb = float(first), float(last), int(count)
        return _channels([e0 + (e1 - e0) * i / (nb - 1) for i in range(nb)], [0.0] * nb)
    return [{"ring": 0, "elevation_deg": 0.0, "azimuth_offset_deg": 0.0, "firing_offset_us": 0.0}]


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(round(v, 9) if abs(v) >= 1e-3 else v)
    if isinstance(v, str):
        return json.dumps(v)
    return "[" + ", ".join(_toml_value(x) for x in v) + "]"


def _toml_key(key: str) -> str:
    """A bare TOML key, or a quoted one where it holds anything else (``[provenance]``'s dotted keys)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def render_toml(preset: dict[str, Any]) -> str:
    """A preset dict (TOML-shaped) as TOML text: scalars, then tables, then ``[[beams]]``."""
    out = [
        "# Generated by tools/import_calibrations.py: the [[beams]] tables are rewritten from the",
        "# calibration files; other fields are kept (pulse.detection_threshold_w is recomputed).",
        "",
    ]
    out += [f"{k} = {_toml_value(v)}" for k, v in preset.items() if not isinstance(v, (dict, list))]
    for k, v in preset.items():
        if isinstance(v, dict):
            out += ["", f"[{k}]"] + [f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in v.items()]
    for beam in preset["beams"]:
        out += ["", "[[beams]]"] + [f"{kk} = {_toml_value(vv)}" for kk, vv in beam.items()]
    return "\n".join(out) + "\n"


def build(key: str, calibrations: Path, out_dir: Path) -> dict[str, Any]:
    """The preset dict of ``key``: its kept non-beam fields, fresh beams and detection threshold.

    The non-beam fields are read from ``out_dir/<key>.toml``, or from the project's ``sensor_presets/``
    when the output folder does not have that file yet.
    """
    path = out_dir / f"{key}.toml"
    if not path.exists():
        path = PRESET_DIR / f"{key}.toml"
    preset = {k: v for k, v in tomllib.loads(path.read_text()).items() if k != "beams"}
    beams = beams_for(key, calibrations, preset["packet_format"])
    if key in FOCUS_SOURCES:
        name, ids = FOCUS_SOURCES[key]
        focus = [
            las["focal_distance"]
            for las in parse_velodyne_yaml((calibrations / name).read_text())
            if int(las["laser_id"]) in ids and las.get("focal_distance", 0.0) >= FOCUS_FLOOR_M
        ]
        for b in beams:
            if b["laser_id"] in ids and "receiver_focus_m" not in b:
                b["receiver_focus_m"] = round(statistics.median(focus), 6)
    for b in beams:
        b["elevation_deg"] = round(b["elevation_deg"], 6)
        b["azimuth_offset_deg"] = round(b["azimuth_offset_deg"], 6)
        b["firing_offset_us"] = round(b["firing_offset_us"], 6)
    o, p = preset["optics"], preset["pulse"]
    threshold = lambertian_return_w(
        p["peak_power_w"], o["receiver_aperture_m"], o["system_efficiency"], preset["range"]["range_10pct_m"]
    )
    p["detection_threshold_w"] = float(f"{threshold:.4g}")
    preset["beams"] = beams
    return preset


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--calibrations", type=Path, required=True, help="folder of the calibration files")
    ap.add_argument("--out", type=Path, required=True, help="preset folder (sensor_presets/)")
    ap.add_argument("--only", nargs="*", choices=sorted(SOURCES), help="presets to write (default: all)")
    args = ap.parse_args(argv)
    for key in args.only or sorted(SOURCES):
        preset = build(key, args.calibrations, args.out)
        path = args.out / f"{key}.toml"
        path.write_text(render_toml(preset))
        try:
            loaded = load_preset(path)
        except PresetError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(
            f"{path}: {loaded.name}, {loaded.n_rings} beams, "
            f"detection_threshold_w = {loaded.pulse.detection_threshold_w:.4g}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
