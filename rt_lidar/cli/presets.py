"""``rt-lidar presets ...``: list, show and export the sensor presets.

The lead's argparse main calls :func:`add_presets_parser` with its subparsers; each leaf parser sets
``func``, which takes the parsed namespace and returns the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rt_lidar.bridge.airsim_settings import airsim_settings_json
from rt_lidar.cli.vendor_options import PRESET_HELP, add_vendor_arguments, preset_ref
from rt_lidar.errors import ConfigError, PresetError
from rt_lidar.sensor.presets import SensorPreset, list_presets, load_preset, preset_to_dict
from rt_lidar.sensor.scan_pattern import firings_per_scan, scan_period_ns
from rt_lidar.sensor.vendor import preset_from_vendor_file
from rt_lidar.sensor.vendor.toml_out import preset_toml_text

__all__ = ["add_presets_parser"]


def add_presets_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``presets list | show NAME | import FILE | airsim-settings NAME`` on an argparse
    subparsers object."""
    presets = subparsers.add_parser("presets", help="list, show and export sensor presets")
    sub = presets.add_subparsers(dest="presets_command", required=True)

    p_list = sub.add_parser("list", help="names of the shipped presets")
    p_list.set_defaults(func=_cmd_list)

    p_show = sub.add_parser("show", help="a preset, resolved (a name, a .toml, or a vendor calibration file)")
    p_show.add_argument("name", help=PRESET_HELP)
    p_show.add_argument("--format", choices=("json", "text"), default="text")
    _add_vendor_file_arguments(p_show)
    p_show.set_defaults(func=_cmd_show)

    p_imp = sub.add_parser(
        "import", help="a vendor calibration file as a standalone preset TOML (beam table + datasheet)"
    )
    p_imp.add_argument(
        "file", help="Ouster JSON, Velodyne YAML / db.xml, Hesai CSV / .dat, RoboSense angle.csv"
    )
    _add_vendor_file_arguments(p_imp)
    p_imp.add_argument(
        "--out", type=Path, required=True, metavar="NAME.toml", help="the preset file to write"
    )
    p_imp.set_defaults(func=_cmd_import)

    p_air = sub.add_parser(
        "airsim-settings", help="a minimal AirSim settings.json carrying the preset's lidar"
    )
    p_air.add_argument("name", nargs="?", help="a preset (or give --rig)")
    p_air.add_argument("--rig", default=None, metavar="RIG.toml", help="every lidar of a rig file")
    p_air.add_argument("--out", type=Path, default=None, help="write here instead of stdout")
    p_air.set_defaults(func=_cmd_airsim)
    return presets


def _add_vendor_file_arguments(p: argparse.ArgumentParser) -> None:
    add_vendor_arguments(p)
    p.add_argument(
        "--firetime",
        default=None,
        metavar="FILE.csv",
        help="a Hesai firetime CSV to go with a Hesai angle-correction CSV (per-channel firing times)",
    )


def _load(name: str, args: argparse.Namespace | None = None) -> SensorPreset | None:
    try:
        model, mode, firetime = (
            (args.model, args.lidar_mode, args.firetime) if args is not None else (None, None, None)
        )
        if firetime is not None:
            return preset_from_vendor_file(name, model=model, lidar_mode=mode, firetime=firetime)
        return load_preset(preset_ref(name, model, mode))
    except (PresetError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def _cmd_list(args: argparse.Namespace) -> int:
    for name in list_presets():
        p = load_preset(name)
        print(f"{p.name:<12} {p.vendor:<10} {p.scan.pattern:<9} {p.n_rings:>4} rings  {p.model}")
    return 0


def _text(p: SensorPreset) -> str:
    s, r, o, pu = p.scan, p.range, p.optics, p.pulse
    el = p.elevations_deg
    scan = f"{s.pattern}, {1e9 / scan_period_ns(p):g} Hz, {firings_per_scan(p)} firings a scan"
    if s.pattern == "rotating":
        lo, hi = s.rotation_hz_range
        scan += f", {s.rotation_direction}, rotation {lo:g}..{hi:g} Hz"
    lines = [
        f"{p.name}: {p.vendor} {p.model} ({p.packet_format})",
        f"  source:   {p.source}",
        f"  scan:     {scan}",
        f"  beams:    {p.n_rings}, elevation {el.min():.3f} .. {el.max():.3f} deg",
        f"  range:    {r.min_m:g} .. {r.max_m:g} m, sigma {r.accuracy_m:g} m, "
        f"10 % target at {r.range_10pct_m} m"
        + (f", 80 % at {r.range_80pct_m} m" if r.range_80pct_m is not None else ""),
        f"  optics:   {o.wavelength_nm:g} nm, divergence {o.beam_divergence_h_mrad:g} x "
        f"{o.beam_divergence_v_mrad:g} mrad, aperture {o.receiver_aperture_m:g} m, "
        f"efficiency {o.system_efficiency:g}",
        f"  pulse:    {pu.width_ns:g} ns, {pu.peak_power_w:g} W peak, "
        f"threshold {pu.detection_threshold_w:.4g} W",
        f"  output:   {p.output.intensity} 0..{p.output.intensity_max}",
        f"  returns:  {', '.join(p.returns.modes)} (default {p.returns.default})",
    ]
    if p.provenance:
        lines.append("  provenance:")
        lines += [f"    {k}: {v}" for k, v in p.provenance.items()]
    return "\n".join(lines)


def _cmd_show(args: argparse.Namespace) -> int:
    p = _load(args.name, args)
    if p is None:
        return 2
    print(json.dumps(preset_to_dict(p), indent=2) if args.format == "json" else _text(p))
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    p = _load(args.file, args)
    if p is None:
        return 2
    if args.out.suffix.lower() != ".toml":
        print(f"error: --out {args.out}: a preset file ends in .toml", file=sys.stderr)
        return 2
    header = (
        f"Written by rt-lidar presets import from {args.file}\n[provenance] says where each value came from."
    )
    args.out.write_text(preset_toml_text(p, header), encoding="utf-8")
    if load_preset(args.out) != p:  # what we wrote must read back as the same preset
        raise AssertionError(f"{args.out} does not load back as the imported preset")
    print(f"wrote {args.out}: {p.name}, {p.vendor} {p.model}, {p.n_rings} beams", file=sys.stderr)
    return 0


def _cmd_airsim(args: argparse.Namespace) -> int:
    if (args.name is None) == (args.rig is None):
        print("error: give a preset name or --rig RIG.toml (one of them)", file=sys.stderr)
        return 2
    if args.rig is not None:
        from rt_lidar.rig import load_rig
        from rt_lidar.rig.airsim import rig_airsim_settings

        settings = rig_airsim_settings(load_rig(args.rig))
    else:
        p = _load(args.name)
        if p is None:
            return 2
        settings = airsim_settings_json(p)
    text = json.dumps(settings, indent=2) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
