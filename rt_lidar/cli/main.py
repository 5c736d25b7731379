"""``rt-lidar``: the command line (one sub-command a job)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from rt_lidar.cli.beam import add_beam_arguments, beam_from_args, sun_from_args
from rt_lidar.cli.replay import add_replay_parser, add_sink_argument
from rt_lidar.cli.rinet import add_rinet_argument, add_rinet_parser, resolve_rinet_model
from rt_lidar.cli.validate import add_weather_arguments, weather_from_args
from rt_lidar.errors import RtLidarError
from rt_lidar.rig.cli import (
    add_rig_arguments,
    add_rig_run_arguments,
    run_rig_bridge_from_args,
    run_rig_demo_from_args,
)
from rt_lidar.session.realtime import tune_allocator

__all__ = ["build_parser", "main"]


def _cmd_demo(args: argparse.Namespace) -> int:
    from rt_lidar.session.demo import DemoOptions, run_demo

    if args.rig:  # a sensor rig (rt_lidar.rig)
        return run_rig_demo_from_args(args)

    opts = DemoOptions(
        preset=args.preset,
        frames=args.frames,
        seed=args.seed,
        sim_hz=args.sim_hz,
        out=args.out,
        scene=args.scene,
        progress=not args.quiet,
        in_process=args.in_process,
        weather=weather_from_args(args),
        beam=beam_from_args(args),
        sun=sun_from_args(args),
        sinks=tuple(args.sinks),
        rinet=resolve_rinet_model(args.rinet),
    )
    summary = run_demo(opts)
    print(json.dumps(summary, indent=2, default=str))
    return 0


def port_number(text: str) -> int:
    """An argparse type: a TCP port 0..65535 (0 lets the system choose)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number (0..65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be in 0..65535, got {port}")
    return port


def _cmd_serve(args: argparse.Namespace) -> int:
    import threading

    from rt_lidar.server.serve import ServeOptions, start_embedded_server

    opts = ServeOptions(
        host=args.host, port=args.port, scene=args.scene, preset=args.preset, settings=args.settings,
        seed=args.seed, paused=args.paused, camera=args.camera, rig=args.rig,
    )  # fmt: skip
    served = start_embedded_server(opts)
    print(
        f"rt-lidar serve: embedded world '{opts.scene}' with {served.sim.preset.name} on "
        f"{opts.host}:{served.port} (AirSim API; Ctrl-C stops)",
        flush=True,
    )
    stop = threading.Event()
    if args.exit_with_stdin:
        # a parent that started us (the demo) holds our stdin: when it goes, so do we
        def watch_stdin() -> None:
            sys.stdin.read()
            stop.set()

        threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        stop.wait()
    finally:
        served.close()
    return 0


def _add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the embedded world through AirSim's RPC API")
    p.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    p.add_argument(
        "--port",
        type=port_number,
        default=41451,
        help="TCP port 0..65535 (default 41451, AirSim's; 0: any free)",
    )
    p.add_argument("--scene", default="street", help="embedded scene (default street)")
    p.add_argument("--preset", default="HDL-64E", help="lidar preset (default HDL-64E)")
    p.add_argument("--settings", default=None, help="AirSim settings.json whose lidar block sets the sensor")
    p.add_argument("--seed", type=int, default=0, help="scene seed")
    p.add_argument("--paused", action="store_true", help="start with the sim clock paused")
    p.add_argument(
        "--camera", default="640x360", metavar="WxH", help="embedded camera size (default 640x360)"
    )
    p.add_argument("--rig", default=None, metavar="RIG.toml", help="serve every lidar of a rig file")
    p.add_argument("--exit-with-stdin", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=_cmd_serve)


def _cmd_run(args: argparse.Namespace) -> int:
    from rt_lidar.session.live import RunOptions, run_controller

    if args.rig:  # a sensor rig over the bridge (rt_lidar.rig)
        return run_rig_bridge_from_args(args)

    opts = RunOptions(
        airsim=args.airsim, preset=args.preset, lockstep=args.lockstep, sim_hz=args.sim_hz,
        frames=args.frames, out=args.out, seed=args.seed, lidar_name=args.lidar, vehicle_name=args.vehicle,
        material_map=args.material_map, use_extension=False if args.no_extension else None,
        reconnect=args.reconnect, sinks=tuple(args.sinks), progress=not args.quiet,
        weather=weather_from_args(args),
        beam=beam_from_args(args),
        sun=sun_from_args(args),
        rinet=resolve_rinet_model(args.rinet),
    )  # fmt: skip
    summary = run_controller(opts)
    print(json.dumps(summary, indent=2, default=str))
    return 0


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the sensor model on a live AirSim / Cosys-AirSim / rt-lidar server")
    p.add_argument("--airsim", default="127.0.0.1:41451", help="HOST:PORT of the AirSim RPC server")
    p.add_argument("--preset", default="HDL-64E", help="sensor preset (must match the sim's lidar)")
    p.add_argument("--lockstep", action="store_true", help="pause the sim and advance it frame by frame")
    p.add_argument("--sim-hz", type=float, default=20.0, help="controller frame rate f_sim (default 20)")
    p.add_argument("--frames", type=int, default=50, help="number of scans to write (default 50)")
    p.add_argument("--out", default="out/run", help="output folder (default out/run)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw")
    p.add_argument("--lidar", default="", help="AirSim lidar name (default: the first)")
    p.add_argument("--vehicle", default="", help="AirSim vehicle name (default: the first)")
    p.add_argument("--material-map", default=None, help="TOML [segments] ID = material (stock AirSim)")
    p.add_argument(
        "--no-extension", action="store_true", help="use stock getLidarData even if rtLidarGetHits exists"
    )
    p.add_argument("--reconnect", action="store_true", help="wait for a lost server to come back")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_weather_arguments(p)
    add_beam_arguments(p)
    add_sink_argument(p)
    add_rinet_argument(p)
    add_rig_run_arguments(p)
    p.set_defaults(func=_cmd_run)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run a sensor through the embedded street and write its scans")
    p.add_argument("--preset", default="HDL-64E", help="sensor preset name (see 'presets list')")
    p.add_argument("--frames", type=int, default=50, help="number of scans to produce (default 50)")
    p.add_argument("--seed", type=int, default=0, help="seed of the scene and of every random draw")
    p.add_argument("--sim-hz", type=float, default=20.0, help="simulation frame rate f_sim (default 20)")
    p.add_argument("--scene", default="street", help="embedded scene (default street)")
    p.add_argument("--out", default="out/demo", help="output folder (default out/demo)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--in-process", action="store_true", help="cast into the world directly, without the bridge"
    )
    add_weather_arguments(p)
    add_beam_arguments(p)
    add_sink_argument(p)
    add_rinet_argument(p)
    add_rig_arguments(p)
    p.set_defaults(func=_cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of every sub-command."""
    from rt_lidar.cli.generate import add_generate_parser
    from rt_lidar.cli.presets import add_presets_parser
    from rt_lidar.cli.validate import add_validate_parser
    from rt_lidar.cli.view import add_view_parser

    parser = argparse.ArgumentParser(prog="rt-lidar", description="Real-time realistic LiDAR simulator")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    _add_serve(sub)
    _add_run(sub)
    add_presets_parser(sub)
    add_view_parser(sub)
    add_validate_parser(sub)
    add_replay_parser(sub)
    add_rinet_parser(sub)
    add_generate_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (errors of ours print one clear line, exit 2)."""
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    args = build_parser().parse_args(argv)
    tune_allocator()
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
