"""The rig options of ``rt-lidar demo`` (``--rig RIG.toml``, ``--crosstalk``, ``--no-rosbag``)."""

from __future__ import annotations

import argparse
import json

from rt_lidar.errors import ConfigError

__all__ = ["add_rig_arguments", "rig_stream_address", "run_rig_demo_from_args"]


def rig_stream_address(sinks: list[str] | None, command: str) -> str | None:
    """The one ``--sink zmq:ADDRESS`` a rig run takes (every sensor on one stream), or None."""
    sinks = sinks or []
    streams = [spec.partition(":")[2].split(",")[0] for spec in sinks if spec.startswith("zmq:")]
    if len(streams) != len(sinks) or len(streams) > 1:
        raise ConfigError(
            f"{command} --rig: --sink takes one zmq:ADDRESS (every sensor on one stream); give each "
            "sensor's other sinks in the rig file (sinks = [...])"
        )
    return streams[0] if streams else None


def add_rig_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the rig options to a sub-command."""
    g = parser.add_argument_group("sensor rig")
    g.add_argument(
        "--rig", default=None, metavar="RIG.toml", help="run every lidar of a rig file (in-process)"
    )
    g.add_argument("--crosstalk", action="store_true", help="with --rig: mutual interference between sensors")
    g.add_argument("--no-rosbag", action="store_true", help="with --rig: no OUT/rosbag of every sensor")


def run_rig_demo_from_args(args: argparse.Namespace) -> int:
    """``rt-lidar demo --rig``: frames are scans per sensor; sinks come from the rig file."""
    from rt_lidar.cli.validate import weather_from_args
    from rt_lidar.rig.run import RigRunOptions, run_rig_demo

    stream = rig_stream_address(args.sinks, "demo")
    out = args.out if args.out != "out/demo" else "out/rig"
    opts = RigRunOptions(
        rig=args.rig, frames=args.frames, seed=args.seed, sim_hz=args.sim_hz, out=out, scene=args.scene,
        progress=not args.quiet, rosbag=not args.no_rosbag, crosstalk=args.crosstalk,
        weather=weather_from_args(args), stream=stream, write_scans=not args.no_scans,
    )  # fmt: skip
    print(json.dumps(run_rig_demo(opts), indent=2, default=str))
    return 0


def add_rig_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--rig`` and ``--no-rosbag`` to ``rt-lidar run``."""
    g = parser.add_argument_group("sensor rig")
    g.add_argument(
        "--rig", default=None, metavar="RIG.toml", help="every lidar of a rig file (needs --lockstep)"
    )
    g.add_argument(
        "--crosstalk",
        action="store_true",
        help="with --rig: mutual interference between sensors (needs our server)",
    )
    g.add_argument("--no-rosbag", action="store_true", help="with --rig: no OUT/rosbag of every sensor")


def run_rig_bridge_from_args(args: argparse.Namespace) -> int:
    """``rt-lidar run --rig RIG.toml --airsim HOST:PORT --lockstep``."""
    from pathlib import Path

    from rt_lidar.bridge.source import parse_address
    from rt_lidar.cli.validate import weather_from_args
    from rt_lidar.rig import load_rig
    from rt_lidar.rig.bag import RigBag
    from rt_lidar.rig.bridge import bridge_rig_loop
    from rt_lidar.rig.run import drive_rig
    from rt_lidar.rig.stream import RigStream
    from unreal_bridge import AirSimClient

    if not args.lockstep:
        raise ConfigError("run --rig: needs --lockstep (every sensor reads the frame the sim advanced to)")
    address = rig_stream_address(args.sinks, "run")
    rig = load_rig(args.rig)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rig.json").write_text(json.dumps({"rig": rig.to_plain()}, indent=2))
    host, port = parse_address(args.airsim)
    with AirSimClient(host, port, timeout=60.0, shared_memory=bool(getattr(args, "shm", False))) as client:
        client.confirm_connection()
        loop, sources = bridge_rig_loop(
            client, rig, sim_hz=args.sim_hz, seed=args.seed, weather=weather_from_args(args),
            vehicle_name=args.vehicle, crosstalk=args.crosstalk,
        )  # fmt: skip
        bag = None if args.no_rosbag else RigBag(out / "rosbag", rig)
        stream = RigStream(address, rig) if address else None
        try:
            summary = drive_rig(
                loop, args.frames, out, bag=bag, stream=stream,
                scenario={"run": {"airsim": args.airsim, "rig": args.rig}}, progress=not args.quiet,
                write_scans=not args.no_scans,
            )  # fmt: skip
        finally:
            loop.close()
        summary["bridge"] = {name: s.stats.as_dict(args.airsim) for name, s in sources.items()}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(json.dumps(summary, indent=2, default=str))
    return 0
