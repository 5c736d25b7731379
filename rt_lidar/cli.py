"""``rt-lidar``: the command line (one sub-command a job)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from rt_lidar.errors import RtLidarError

__all__ = ["build_parser", "main"]


def _cmd_demo(args: argparse.Namespace) -> int:
    from rt_lidar.demo import DemoOptions, run_demo

    opts = DemoOptions(
        preset=args.preset,
        frames=args.frames,
        seed=args.seed,
        sim_hz=args.sim_hz,
        out=args.out,
        scene=args.scene,
        progress=not args.quiet,
    )
    summary = run_demo(opts)
    print(json.dumps(summary, indent=2))
    return 0


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run a sensor through the embedded street and write its scans")
    p.add_argument("--preset", default="HDL-64E", help="sensor preset name (see 'presets list')")
    p.add_argument("--frames", type=int, default=50, help="number of scans to produce (default 50)")
    p.add_argument("--seed", type=int, default=0, help="seed of the scene and of every random draw")
    p.add_argument("--sim-hz", type=float, default=20.0, help="simulation frame rate f_sim (default 20)")
    p.add_argument("--scene", default="street", help="embedded scene (default street)")
    p.add_argument("--out", default="out/demo", help="output folder (default out/demo)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of every sub-command."""
    from rt_lidar.cli_presets import add_presets_parser

    parser = argparse.ArgumentParser(prog="rt-lidar", description="Real-time realistic LiDAR simulator")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    add_presets_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (errors of ours print one clear line, exit 2)."""
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (RtLidarError, ValueError, FileNotFoundError) as exc:
        print(f"rt-lidar {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rt-lidar {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
