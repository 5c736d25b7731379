"""CLI pieces of the beam model: ``--sub-rays N``, ``--return-mode MODE`` and ``--epw`` on demo / run."""

from __future__ import annotations

import argparse

from rt_lidar.beam import MAX_SUB_RAYS, BeamConfig

__all__ = ["add_beam_arguments", "beam_from_args"]

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
    g.add_argument("--sub-rays", type=_sub_rays, default=None, metavar="N",
                   help="rays per pulse over the beam divergence (default: the preset's, 1)")  # fmt: skip
    g.add_argument("--return-mode", choices=CLI_RETURN_MODES, default=None,
                   help="returns each pulse reports (default: the preset's)")  # fmt: skip
    g.add_argument("--epw", action="store_true", help="add the echo pulse width (epw_ns) to recordings")


def beam_from_args(args: argparse.Namespace) -> BeamConfig | None:
    """The :class:`BeamConfig` of parsed beam options; None when none was given (the preset decides)."""
    if args.sub_rays is None and args.return_mode is None and not args.epw:
        return None
    return BeamConfig(sub_rays=args.sub_rays, return_mode=args.return_mode, epw=bool(args.epw))
