"""``rt-lidar rinet ...``: build masks, generate pairs, train, export; and the ``--rinet`` option."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["BUNDLED", "add_rinet_argument", "add_rinet_parser", "resolve_rinet_model"]

BUNDLED = "bundled"
"""The value ``--rinet`` takes when given without a path: the model shipped with the package."""


def add_rinet_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--rinet [MODEL.onnx]`` (no path: the bundled model) to a ``demo`` / ``run`` parser."""
    parser.add_argument(
        "--rinet",
        nargs="?",
        const=BUNDLED,
        default=None,
        metavar="MODEL.onnx",
        help="learned raydrop + intensity from the camera (no path: the bundled small model)",
    )


def resolve_rinet_model(value: str | None) -> str | None:
    """The ONNX path ``--rinet`` names (None: RINet off)."""
    if value is None:
        return None
    if value == BUNDLED:
        from rt_lidar.rinet.runtime import bundled_model_path

        return str(bundled_model_path())
    return value


def _print(obj: Any) -> int:
    print(json.dumps(obj, indent=2, default=str))
    return 0


def _cmd_build_mask(args: argparse.Namespace) -> int:
    from rt_lidar.rinet.maskdir import build_mask_dir

    idx = build_mask_dir(
        args.layout,
        args.root,
        args.out,
        sequence=args.sequence,
        radius=args.radius,
        limit=args.limit,
        progress=not args.quiet,
    )
    frames = idx["frames"]
    return _print(
        {
            "out": args.out,
            "frames": len(frames),
            "points_in_image": sum(f["points_in_image"] for f in frames),
            "drop_pixels": sum(f["drop_pixels"] for f in frames),
            "per_frame": frames if len(frames) <= 10 else f"{len(frames)} frames, see masks.json",
        }
    )


def _cmd_generate_pairs(args: argparse.Namespace) -> int:
    from rt_lidar.rinet.pairs import PairsConfig, generate_pairs

    cfg = PairsConfig(
        preset=args.preset,
        scene=args.scene,
        seeds=tuple(args.seeds),
        scans_per_seed=args.scans,
        every=args.every,
        width=args.width,
        height=args.height,
    )
    idx = generate_pairs(args.out, cfg, progress=not args.quiet)
    return _print({"out": args.out, "frames": len(idx["frames"])})


def _require_torch() -> None:
    from rt_lidar.extras import require

    require("torch", "", "train")
    require("onnx", "", "train")


def _cmd_train(args: argparse.Namespace) -> int:
    _require_torch()
    from rt_lidar.rinet.model import ModelConfig
    from rt_lidar.rinet.train import TrainConfig, train

    cfg = TrainConfig(
        model=ModelConfig(width=args.width, height=args.height, base=args.base, depth=args.depth),
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        seed=args.seed,
        threads=args.threads,
        checkpoint_every=args.checkpoint_every,
        val_every=args.val_every,
        progress=not args.quiet,
    )
    metrics = train(args.data, args.out, cfg, resume=not args.no_resume)
    if args.export:
        from rt_lidar.rinet.export import compare_onnx, export_onnx

        small = {k: metrics[k] for k in ("model", "baseline_keep_all", "steps", "generator_params")}
        path = export_onnx(f"{args.out}/checkpoint.pt", args.export, metrics=small)
        metrics["onnx"] = {"path": str(path), "max_abs_diff": compare_onnx(f"{args.out}/checkpoint.pt", path)}
    return _print(metrics)


def _cmd_export(args: argparse.Namespace) -> int:
    _require_torch()
    from rt_lidar.rinet.export import compare_onnx, export_onnx

    path = export_onnx(args.checkpoint, args.out, opset=args.opset)
    return _print({"onnx": str(path), "max_abs_diff_vs_pytorch": compare_onnx(args.checkpoint, path)})


def add_rinet_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``rinet build-mask | generate-pairs | train | export``."""
    p = sub.add_parser("rinet", help="RINet: learned raydrop and intensity from the camera")
    rs = p.add_subparsers(dest="rinet_command", required=True)

    b = rs.add_parser("build-mask", help="intensity masks of a KITTI dataset (real camera + lidar)")
    b.add_argument("--layout", required=True, choices=["kitti-object", "kitti-odometry"])
    b.add_argument(
        "root", help="dataset root (kitti-object: holds [training/]velodyne; odometry: sequences/)"
    )
    b.add_argument("--out", required=True, help="output mask directory")
    b.add_argument("--sequence", default="00", help="odometry sequence (default 00)")
    b.add_argument("--radius", type=int, default=3, help="densification radius in pixels (default 3)")
    b.add_argument("--limit", type=int, default=0, help="only the first N frames (0 = all)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.set_defaults(func=_cmd_build_mask)

    g = rs.add_parser("generate-pairs", help="training pairs from the embedded world (camera + physics)")
    g.add_argument("--out", required=True, help="output mask directory")
    g.add_argument("--preset", default="HDL-64E")
    g.add_argument("--scene", default="street")
    g.add_argument("--seeds", type=int, nargs="+", default=[0], help="scene seeds (default 0)")
    g.add_argument("--scans", type=int, default=10, help="pairs per seed (default 10)")
    g.add_argument("--every", type=int, default=3, help="keep every k-th scan (default 3)")
    g.add_argument("--width", type=int, default=512, help="camera width (default 512)")
    g.add_argument("--height", type=int, default=288, help="camera height (default 288)")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    g.set_defaults(func=_cmd_generate_pairs)

    t = rs.add_parser("train", help="train on a mask directory (build-mask or generate-pairs output)")
    t.add_argument("data", help="mask directory")
    t.add_argument("--out", required=True, help="run directory (checkpoint.pt, metrics.json; resumed)")
    t.add_argument("--width", type=int, default=256, help="model input width (default 256)")
    t.add_argument("--height", type=int, default=144, help="model input height (default 144)")
    t.add_argument("--base", type=int, default=8, help="U-Net base channels (default 8)")
    t.add_argument("--depth", type=int, default=4, help="U-Net stride-2 stages (default 4)")
    t.add_argument("--steps", type=int, default=2000)
    t.add_argument("--batch", type=int, default=8)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--checkpoint-every", type=int, default=200)
    t.add_argument("--val-every", type=int, default=5, help="hold out every k-th frame (default 5)")
    t.add_argument("--no-resume", action="store_true", help="start over even if OUT has a checkpoint")
    t.add_argument("--export", default=None, metavar="MODEL.onnx", help="also export the result to ONNX")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=_cmd_train)

    e = rs.add_parser("export", help="export a training checkpoint to ONNX (checked against PyTorch)")
    e.add_argument("checkpoint", help="checkpoint.pt of a training run")
    e.add_argument("--out", required=True, help="output .onnx")
    e.add_argument("--opset", type=int, default=17)
    e.set_defaults(func=_cmd_export)
