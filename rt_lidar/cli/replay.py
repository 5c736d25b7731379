"""CLI pieces for outputs: the repeatable ``--sink`` option and the ``replay`` command."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["add_replay_parser", "add_sink_argument", "add_stamp_argument", "run_replay"]


def sink_help() -> str:
    """``--sink``'s help: every kind the registry has (:data:`rt_lidar.sinks.registry.SINK_FACTORIES`)."""
    from rt_lidar.sinks.registry import SINK_FACTORIES

    return (
        f"an output KIND:TARGET[,key=value...], repeatable; kinds: {', '.join(SINK_FACTORIES)} "
        "(docs/sinks.md); e.g. velodyne-udp:127.0.0.1:2368, rosbag2:out/bag, zmq:tcp://127.0.0.1:5555"
    )


REPLAY_PCAP_KINDS = ("udp",)
"""What a packet capture replays to: its datagrams resent as they are."""


def add_sink_argument(parser: argparse.ArgumentParser, help_text: str | None = None) -> None:
    """Add ``--sink KIND:TARGET[,key=value...]`` (repeatable; collected in ``args.sinks``)."""
    parser.add_argument(
        "--sink",
        dest="sinks",
        action="append",
        default=[],
        metavar="KIND:TARGET",
        help=help_text or sink_help(),
    )


def add_stamp_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--stamp sim|wall``: the clock of every sink's packet and message stamps."""
    parser.add_argument(
        "--stamp",
        choices=("sim", "wall"),
        default="sim",
        help="clock of packet and message stamps in every sink: sim (default; packets at "
        "2024-01-01 + sim time, ROS messages at sim time as /clock says) or wall (time.time(), as a "
        "PTP-synchronised sensor stamps)",
    )


def run_replay(args: argparse.Namespace) -> int:
    """``rt-lidar replay``: a pcap to ``udp:HOST[:PORT]`` sinks, or a cloud recording (PCD folder,
    rosbag2) to any sinks, each on its recorded schedule."""
    from pathlib import Path

    from rt_lidar.errors import ConfigError
    from rt_lidar.sensor.presets import load_preset
    from rt_lidar.sinks.base import parse_sink_spec
    from rt_lidar.sinks.replay import replay_clouds, replay_pcap

    if not args.sinks:
        raise ConfigError(
            "replay: give at least one --sink (udp:HOST[:PORT] for a pcap, any sink for clouds)"
        )
    if Path(args.recording).is_dir():
        preset = load_preset(args.preset) if args.preset else None
        result = replay_clouds(args.recording, list(args.sinks), preset, args.rate, args.max_gap)
        print(json.dumps(result, indent=2))
        return 0
    out: dict[str, Any] = {}
    for spec in args.sinks:
        kind, target, _ = parse_sink_spec(spec)
        if kind not in REPLAY_PCAP_KINDS:
            raise ConfigError(
                f"replay: a packet capture is resent as it is: --sink udp:HOST[:PORT], not '{kind}' "
                "(to turn packets into clouds, decode them with the vendor's decoder)"
            )
        host, _, port = target.partition(":")
        port_no = int(port) if port else None
        out[spec] = replay_pcap(args.recording, host or "127.0.0.1", port_no, args.max_gap).summary()
    print(json.dumps(out, indent=2))
    return 0


def add_replay_parser(subparsers: Any) -> argparse.ArgumentParser:
    """``rt-lidar replay RECORDING --sink udp:HOST[:PORT]``; sets ``func=run_replay``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "replay", help="resend a recording at its recorded rate"
    )
    p.add_argument(
        "recording",
        help="a .pcap or .pcapng (Velodyne or Ouster), a folder of PCD or KITTI .bin scans, or a bag",
    )
    p.add_argument(
        "--preset", default=None, help="sensor of a cloud recording that does not name one (KITTI: HDL-64E)"
    )
    p.add_argument("--rate", type=float, default=1.0, help="replay speed for clouds (1 = recorded rate)")
    p.add_argument(
        "--max-gap",
        type=float,
        default=1.0,
        metavar="S",
        help="longest wait between two recorded items, s (a longer pause in the recording is cut to it)",
    )
    from rt_lidar.sinks.registry import SINK_FACTORIES

    add_sink_argument(
        p,
        "where to replay, repeatable: a .pcap to udp:HOST[:PORT] (its datagrams as recorded); a cloud "
        f"recording to any of: {', '.join(SINK_FACTORIES)}",
    )
    p.set_defaults(func=run_replay)
    return p
