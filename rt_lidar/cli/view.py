"""``rt-lidar view``: the viewer's sub-command (wired into :mod:`rt_lidar.cli.main`)."""

from __future__ import annotations

import argparse

from rt_lidar.errors import ConfigError
from rt_lidar.sinks.stream import DEFAULT_ADDRESS
from rt_lidar.viewer.app import PRIORITIES, VIEWER_NICE

__all__ = ["add_view_parser"]

_COLOR_MODES = ("intensity", "reflectivity", "ring", "range", "return_id", "flags", "sensor")
"""rt_lidar.viewer.colors.COLOR_MODES, written out: parsing the command line imports no Qt."""


def _cmd_view(args: argparse.Namespace) -> int:
    from rt_lidar.extras import require

    for package in ("PySide6", "pyqtgraph", "OpenGL"):  # pyqtgraph without a Qt binding is no ImportError
        require(package, "", "viewer")
    from rt_lidar.viewer.app import ViewerOptions, run_viewer

    if args.drive and args.recording:
        raise ConfigError("--drive needs a live session, not a recording")
    opts = ViewerOptions(
        connect=args.connect,
        recording=args.recording,
        screenshot=args.screenshot,
        frames=args.frames,
        drive=args.drive,
        airsim=args.airsim,
        demo=args.demo,
        preset=args.preset,
        color_mode=args.color,
        point_size=args.point_size,
        max_fps=args.max_fps,
        rate_hz=args.rate,
        speed=args.speed,
        size=(args.width, args.height),
        timeout_s=args.timeout,
        priority=args.priority,
        nice=args.nice,
    )
    return run_viewer(opts)


def add_view_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``view`` to the sub-command parser ``sub``."""
    p = sub.add_parser(
        "view",
        help="watch the live stream (or play a recording) in the Qt viewer",
        description="pyqtgraph viewer of the live point stream, or player of a recording (a folder of "
        "PCDs, a KITTI sequence's velodyne/ folder, or a rosbag2 bag). Press H for keys.",
    )
    p.add_argument(
        "recording", nargs="?", default=None, help="a recording: a folder of .pcd or KITTI .bin scans, a bag"
    )
    p.add_argument(
        "--connect", default=DEFAULT_ADDRESS, metavar="ADDR", help=f"stream (default {DEFAULT_ADDRESS})"
    )
    p.add_argument("--demo", action="store_true", help="also start the embedded demo publisher on ADDR")
    p.add_argument("--preset", default="HDL-64E", help="sensor preset of --demo (default HDL-64E)")
    p.add_argument("--screenshot", metavar="PATH", help="render --frames scans, save the window as PNG, quit")
    p.add_argument("--frames", type=int, default=5, help="scans to show before --screenshot (default 5)")
    p.add_argument("--drive", action="store_true", help="drive the ego car with WASD / arrows")
    p.add_argument("--airsim", default="127.0.0.1:41451", metavar="HOST:PORT", help="bridge server to drive")
    p.add_argument("--color", default="intensity", choices=_COLOR_MODES, help="initial colour mode")
    p.add_argument("--point-size", type=float, default=2.0, help="point size in pixels (default 2)")
    p.add_argument("--max-fps", type=float, default=0.0, help="cap the viewer's frame rate (0 = none)")
    pace = p.add_mutually_exclusive_group()
    pace.add_argument("--rate", type=float, default=None, help="recording: scans/s (default: as recorded)")
    pace.add_argument("--speed", type=float, default=1.0, help="recording: x real time (default 1)")
    p.add_argument("--width", type=int, default=1280, help="window width")
    p.add_argument("--height", type=int, default=800, help="window height")
    p.add_argument("--timeout", type=float, default=90.0, help="--screenshot gives up after this long, s")
    p.add_argument(
        "--priority",
        default="idle",
        choices=PRIORITIES,
        help="how the viewer yields the CPU to the simulation: idle (Linux SCHED_IDLE: only CPU time "
        "nothing else wants; the default), nice (niceness + --nice) or normal",
    )
    p.add_argument(
        "--nice",
        type=int,
        default=VIEWER_NICE,
        help=f"niceness added with --priority nice, or where there is no idle class (default {VIEWER_NICE})",
    )
    p.set_defaults(func=_cmd_view)
