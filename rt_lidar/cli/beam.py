"""CLI pieces of the beam model: ``--sub-rays N``, ``--beam fixed|full|full-dense``, ``--return-mode
MODE`` and ``--epw`` on demo / run."""

from __future__ import annotations

import argparse
import math

from rt_lidar.config import SunConfig
from rt_lidar.errors import ConfigError
from rt_lidar.sensor.beam import MAX_SUB_RAYS, BeamConfig

__all__ = ["SunConfig", "add_beam_arguments", "beam_from_args", "sun_from_args"]

CLI_RETURN_MODES = ("strongest", "last", "dual")


def _sub_rays(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if not 1 <= n <= MAX_SUB_RAYS:
        raise argparse.ArgumentTypeError(f"must be in [1, {MAX_SUB_RAYS}], got {n}")
    return n


def add_beam_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--sub-rays N``, ``--return-mode strongest|last|dual`` and ``--epw`` to a sub-command."""
    g = parser.add_argument_group("beam")
    g.add_argument(
        "--sub-rays",
        type=_sub_rays,
        default=None,
        metavar="N",
        help="rays per pulse over the beam divergence (default: the preset's, 1)",
    )
    g.add_argument(
        "--beam",
        choices=("fixed", "full", "full-dense"),
        default="fixed",
        help="fixed: every pulse as --sub-rays N; full: the 19-sub-ray bundle (or --sub-rays N) only "
        "where the footprint meets a depth edge, glass or a retro-reflector, one exact ray elsewhere, "
        "sampled sparse (the rim thinned to every other sub-ray: 13 of 19); full-dense: all of them",
    )
    g.add_argument(
        "--return-mode",
        choices=CLI_RETURN_MODES,
        default=None,
        help="returns each pulse reports (default: the preset's)",
    )
    g.add_argument("--epw", action="store_true", help="add the echo pulse width (epw_ns) to recordings")
    s = parser.add_argument_group("sunlight")
    s.add_argument(
        "--sun-lux",
        type=float,
        default=0.0,
        metavar="LUX",
        help="illuminance of the sun on the scene (0 night .. ~100000 full sun)",
    )
    s.add_argument(
        "--sun-elevation",
        type=float,
        default=None,
        metavar="DEG",
        help="sun elevation above the horizon (default: the scene's sun)",
    )
    s.add_argument(
        "--sun-azimuth",
        type=float,
        default=0.0,
        metavar="DEG",
        help="sun azimuth, CCW from the world x axis (with --sun-elevation)",
    )


def beam_from_args(args: argparse.Namespace) -> BeamConfig | None:
    """The :class:`BeamConfig` of parsed beam options; None when none was given (the preset decides)."""
    mode = getattr(args, "beam", "fixed")
    full = mode in ("full", "full-dense")
    if args.sub_rays is None and args.return_mode is None and not args.epw and not full:
        return None
    bundle = "dense" if mode == "full-dense" else "sparse"
    return BeamConfig(
        sub_rays=args.sub_rays, return_mode=args.return_mode, epw=bool(args.epw), full=full, bundle=bundle
    )


def sun_from_args(args: argparse.Namespace) -> SunConfig:
    """The :class:`SunConfig` of ``--sun-lux`` / ``--sun-elevation`` / ``--sun-azimuth``."""
    if args.sun_elevation is None:
        return SunConfig(float(args.sun_lux))
    if not -90.0 <= args.sun_elevation <= 90.0:
        raise ConfigError(f"--sun-elevation must be in [-90, 90] deg, got {args.sun_elevation}")
    el, az = math.radians(args.sun_elevation), math.radians(args.sun_azimuth)
    direction = (math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el))
    return SunConfig(float(args.sun_lux), direction)
