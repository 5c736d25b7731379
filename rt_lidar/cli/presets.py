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
from rt_lidar.errors import PresetError
from rt_lidar.sensor.presets import SensorPreset, list_presets, load_preset, preset_to_dict
from rt_lidar.sensor.scan_pattern import firings_per_scan, scan_period_ns

__all__ = ["add_presets_parser"]


def add_presets_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``presets list | show NAME | airsim-settings NAME`` on an argparse subparsers object."""
    presets = subparsers.add_parser("presets", help="list, show and export sensor presets")
    sub = presets.add_subparsers(dest="presets_command", required=True)

    p_list = sub.add_parser("list", help="names of the shipped presets")
    p_list.set_defaults(func=_cmd_list)

    p_show = sub.add_parser("show", help="a preset, resolved (name or path to a .toml)")
    p_show.add_argument("name")
    p_show.add_argument("--format", choices=("json", "text"), default="text")
    p_show.set_defaults(func=_cmd_show)

    p_air = sub.add_parser(
        "airsim-settings", help="a minimal AirSim settings.json carrying the preset's lidar"
    )
    p_air.add_argument("name", nargs="?", help="a preset (or give --rig)")
    p_air.add_argument("--rig", default=None, metavar="RIG.toml", help="every lidar of a rig file")
    p_air.add_argument("--out", type=Path, default=None, help="write here instead of stdout")
    p_air.set_defaults(func=_cmd_airsim)
    return presets


def _load(name: str) -> SensorPreset | None:
    try:
        return load_preset(name)
    except PresetError as exc:
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
        f"10 % target at {r.range_10pct_m} m",
        f"  optics:   {o.wavelength_nm:g} nm, divergence {o.beam_divergence_h_mrad:g} x "
        f"{o.beam_divergence_v_mrad:g} mrad, aperture {o.receiver_aperture_m:g} m, "
        f"efficiency {o.system_efficiency:g}",
        f"  pulse:    {pu.width_ns:g} ns, {pu.peak_power_w:g} W peak, "
        f"threshold {pu.detection_threshold_w:.4g} W",
        f"  output:   {p.output.intensity} 0..{p.output.intensity_max}",
        f"  returns:  {', '.join(p.returns.modes)} (default {p.returns.default})",
    ]
    return "\n".join(lines)


def _cmd_show(args: argparse.Namespace) -> int:
    p = _load(args.name)
    if p is None:
        return 2
    print(json.dumps(preset_to_dict(p), indent=2) if args.format == "json" else _text(p))
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
