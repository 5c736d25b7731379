"""CLI pieces of the weather work: ``rt-lidar validate`` and the ``--rain/--fog/--snow/--road-wetness``
options."""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any

from rt_lidar.errors import ConfigError, FieldError
from rt_lidar.physics.weather import WeatherConfig

__all__ = ["add_validate_parser", "add_weather_arguments", "weather_from_args"]


def _cmd_validate(args: argparse.Namespace) -> int:
    from rt_lidar.extras import require

    require("matplotlib", "", "validate")
    from rt_lidar.validation.report import run_validation, trend_checks

    with _realism_options(args):
        report = run_validation(args.out, args.only)
    checks = trend_checks(report)
    print(json.dumps({name: {d: ok for d, ok in c} for name, c in checks.items()}, indent=2))
    if "realism" in report:  # simulated beside real scans, each residual (docs/realism.md)
        from rt_lidar.validation.realism_experiment import realism_table

        print(realism_table(report["realism"]))
    print(f"report: {args.out}/report.json, {args.out}/report.md")
    return 0 if all(ok for c in checks.values() for _, ok in c) else 1


def _realism_options(args: argparse.Namespace) -> Any:
    """The realism experiment's ``--presets/--frames/--real`` (docs/realism.md), checked before anything
    runs: a bad preset, file or format is one line and exit 2."""
    given = [
        o for o, v in (("--presets", args.presets), ("--frames", args.frames), ("--real", args.real)) if v
    ]
    if args.only and "realism" not in args.only:
        if given:
            raise ConfigError(f"{', '.join(given)}: options of the realism experiment; add it to --only")
        return contextlib.nullcontext()
    from rt_lidar.sensor.presets import load_preset
    from rt_lidar.validation.real_frames import parse_real_option
    from rt_lidar.validation.realism_experiment import REALISM_PRESETS, RealismOptions, realism_options

    try:
        presets = tuple(load_preset(p).name for p in args.presets) if args.presets else REALISM_PRESETS
    except ConfigError as exc:
        raise ConfigError(f"--presets: {exc}") from None
    if args.frames is not None and not 1 <= args.frames <= 20:
        raise ConfigError(f"--frames: must be in [1, 20], got {args.frames}")
    real = tuple(parse_real_option(t) for t in args.real or ())
    return realism_options(RealismOptions(presets, args.frames or 3, real))


EXPERIMENT_NAMES = (
    "rain_max_range",
    "rain_range_bands",
    "rain_threshold_sweep",
    "fog_max_range",
    "snow_clutter",
    "dual_return_two_planes",
    "blooming_sign",
    "epw_vs_power",
    "crosstalk",
    "weather_dual_return",
    "detection_probability_vs_range",
    "range_walk_vs_strength",
    "clutter_calibration",
    "road_wetness",
    "spray",
    "dirt_detection_range",
    "realism",
)
"""The keys of :data:`rt_lidar.validation.experiments.EXPERIMENTS`, in order (a test holds them equal):
named here so that building the CLI's parser does not import the experiments and matplotlib (half a
second at every command's start, the server's included)."""


def add_validate_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``validate --out DIR [--only NAME ...]``."""
    p = subparsers.add_parser("validate", help="run validation experiments and write a report")
    p.add_argument("--out", default="out/validate", help="output folder (default out/validate)")
    p.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        choices=list(EXPERIMENT_NAMES),
        help=f"experiments to run (default all: {', '.join(EXPERIMENT_NAMES)})",
    )
    g = p.add_argument_group("realism (docs/realism.md)")
    g.add_argument(
        "--presets",
        nargs="+",
        metavar="PRESET",
        help="presets whose street scans the realism experiment simulates "
        "(default HDL-64E HDL-32E VLP-32C VLS-128 OS1-64)",
    )
    g.add_argument(
        "--frames", type=int, metavar="N", help="simulated scans a preset, averaged (realism; default 3)"
    )
    g.add_argument(
        "--real",
        action="append",
        metavar="PRESET=PATH",
        help="a real scan of your own beside PRESET's simulated ones (repeatable; Velodyne or Ouster "
        "pcap/pcapng, nuScenes .pcd.bin, KITTI .bin, PCD, ROS bag of PointCloud2: told from the file)",
    )
    p.set_defaults(func=_cmd_validate)


def add_weather_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--rain MM_H``, ``--fog VIS_M``, ``--snow MM_H`` and ``--road-wetness W`` to a sub-command."""
    g = parser.add_argument_group("weather")
    g.add_argument("--rain", type=float, default=0.0, metavar="MM_H", help="rain rate in mm/h (0..200)")
    g.add_argument(
        "--fog", type=float, default=None, metavar="VIS_M", help="fog visibility in m (10..100000)"
    )
    g.add_argument(
        "--snow", type=float, default=0.0, metavar="MM_H", help="snowfall, mm/h water equiv. (0..20)"
    )
    g.add_argument(
        "--road-wetness",
        type=float,
        default=0.0,
        metavar="W",
        help="road wetness 0..1 (AirSim's Roadwetness): a water film that darkens the road at range, "
        "mirror ghosts below it, tyre spray behind moving cars",
    )


def weather_from_args(args: argparse.Namespace) -> WeatherConfig | None:
    """The :class:`WeatherConfig` of parsed weather options; None for clear air. A value out of range
    is a :class:`ConfigError` naming the option (``--rain: must be in [0, 200] mm/h, got 500``)."""
    try:
        w = WeatherConfig(
            rain_mm_h=args.rain,
            fog_visibility_m=args.fog,
            snow_mm_h=args.snow,
            road_wetness=getattr(args, "road_wetness", 0.0),
        )
    except FieldError as exc:
        option = {
            "rain_mm_h": "--rain",
            "fog_visibility_m": "--fog",
            "snow_mm_h": "--snow",
            "road_wetness": "--road-wetness",
        }
        raise ConfigError(f"{option.get(exc.field, exc.field)}: {exc.problem}") from None
    return None if w.is_clear else w
