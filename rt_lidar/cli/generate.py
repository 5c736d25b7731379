"""CLI of the dataset generator: ``rt-lidar generate SWEEP.toml --out DIR [--workers N]``."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_generate_parser"]


def _cmd_generate(args: argparse.Namespace) -> int:
    from rt_lidar.dataset.generate import generate
    from rt_lidar.extras import require

    require("ray", "", "dataset")

    summary = generate(
        args.sweep,
        args.out,
        workers=args.workers,
        ray_address=args.ray_address,
        retries=args.retries,
        progress=not args.quiet,
    )
    print(json.dumps(summary.to_dict(), indent=2))
    for f in summary.failures:
        print(
            f"rt-lidar generate: run {f.run_id} (sequences/{f.sequence:02d}) failed: {f.error}",
            file=sys.stderr,
        )
    return 0 if summary.ok else 1


def add_generate_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``generate SWEEP --out DIR [--ray-address auto|ADDR] [--workers N] [--retries N] [--quiet]``."""
    p = subparsers.add_parser(
        "generate", help="generate a labelled dataset (SemanticKITTI layout) from a sweep file on Ray"
    )
    p.add_argument("sweep", help="sweep TOML file (see tools/sweeps/small.toml)")
    p.add_argument("--out", required=True, help="dataset folder; a rerun resumes it")
    p.add_argument(
        "--ray-address",
        default=None,
        metavar="auto|ADDR",
        help="join this Ray cluster (default: start a local Ray)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="runs at a time (default: all CPUs of the local Ray or the cluster)",
    )
    p.add_argument("--retries", type=int, default=1, metavar="N", help="attempts after a failure (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_generate)
