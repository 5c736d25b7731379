"""The rig options of ``rt-lidar demo`` (``--rig RIG.toml``, ``--crosstalk``, ``--no-rosbag``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rt_lidar.errors import ConfigError

if TYPE_CHECKING:
    from rt_lidar.config import RunConfig

__all__ = ["add_rig_arguments", "rig_stream_address", "run_rig_demo_from_config"]


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


def run_rig_demo_from_config(config: RunConfig, args: argparse.Namespace) -> int:
    """``rt-lidar demo --rig RIG.toml`` (``config`` from the command line) or ``demo --config
    RUN/config.json`` of a rig run (a rig demo's or a rig sweep's run of ``rt-lidar generate``): the rig
    in-process, its scene set up as recorded. Writes ``OUT/config.json`` first, which re-runs it."""
    from rt_lidar.config import CONFIG_FILE, to_plain
    from rt_lidar.rig.model import load_rig
    from rt_lidar.rig.run import RigRunOptions, run_rig_demo

    assert config.rig is not None
    rig = load_rig(config.rig)
    stream = rig_stream_address(list(config.sinks), "demo")
    opts = RigRunOptions(
        rig=config.rig,
        frames=config.frames,
        seed=config.seed,
        sim_hz=config.sim_hz,
        out=config.out,
        scene=config.scene,
        caster=config.caster,
        progress=config.progress,
        rosbag=not args.no_rosbag,
        crosstalk=config.crosstalk,
        weather=config.weather,
        kernels_device=config.kernels_device,
        device=config.device,
        stream=stream,
        write_scans=config.write_scans,
        scene_setup=config.scene_setup,
        faults=config.faults,
        beam=config.beam,
        sun=config.sun,
    )
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).write_text(json.dumps({"config": to_plain(config), "rig": rig.source}, indent=2))
    summary = run_rig_demo(opts, rig)
    print(f"rt-lidar demo: rig {rig.source} in {out}/ (summary.json: {_rig_line(summary)})")
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

    from rt_lidar.bridge.pacing import RealtimePacer, warn_if_behind
    from rt_lidar.bridge.source import parse_address
    from rt_lidar.cli.beam import beam_from_args, sun_from_args
    from rt_lidar.cli.validate import weather_from_args
    from rt_lidar.faults.spec import load_faults
    from rt_lidar.rig import load_rig
    from rt_lidar.rig.bag import RigBag
    from rt_lidar.rig.bridge import bridge_rig_loop
    from rt_lidar.rig.run import drive_rig
    from rt_lidar.rig.stream import RigStream
    from rt_lidar.unreal_bridge import AirSimClient

    if not args.lockstep:
        raise ConfigError("run --rig: needs --lockstep (every sensor reads the frame the sim advanced to)")
    realtime = float(getattr(args, "realtime", 0.0) or 0.0)
    if not 0.0 <= realtime <= 100.0:
        raise ConfigError(f"--realtime: must be in [0, 100] times real time, got {realtime:g}")
    pacer = RealtimePacer(realtime, args.sim_hz) if realtime else None
    address = rig_stream_address(args.sinks, "run")
    rig = load_rig(args.rig)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rig.json").write_text(json.dumps({"rig": rig.to_plain()}, indent=2))
    host, port = parse_address(args.airsim)
    with AirSimClient(host, port, timeout=60.0, shared_memory=bool(getattr(args, "shm", False))) as client:
        client.confirm_connection()
        loop, sources = bridge_rig_loop(
            client,
            rig,
            sim_hz=args.sim_hz,
            seed=args.seed,
            weather=weather_from_args(args),
            vehicle_name=args.vehicle,
            crosstalk=args.crosstalk,
            ask_ahead=args.ask_ahead,
            beam=beam_from_args(args),
            sun=sun_from_args(args),
        )
        if pacer is not None:  # the first sensor's source advances the sim for all
            next(iter(sources.values())).pacer = pacer
        bag = None if args.no_rosbag else RigBag(out / "rosbag", rig)
        stream = RigStream(address, rig) if address else None
        try:
            summary = drive_rig(
                loop,
                args.frames,
                out,
                bag=bag,
                stream=stream,
                scenario={"run": {"airsim": args.airsim, "rig": args.rig}},
                progress=not args.quiet,
                write_scans=not args.no_scans,
                faults=load_faults(args.faults) if getattr(args, "faults", None) else (),
                seed=args.seed,
            )
        finally:
            loop.close()
        summary["bridge"] = {name: s.stats.as_dict(args.airsim) for name, s in sources.items()}
        if pacer is not None:
            summary["realtime"] = pacer.summary()
            warn_if_behind(pacer)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(f"rt-lidar run: rig {args.rig} in {out}/ (summary.json: {_rig_line(summary)})")
    return 0


def _rig_line(summary: dict[str, Any]) -> str:
    """The rig summary's headline: scans and the real-time factor."""
    rtf = float(summary.get("realtime_factor", 0.0))
    sensors = len(summary.get("sensors") or {})
    return f"{sensors} sensors, {summary.get('sim_time_s', 0):.2f} s simulated, real time {rtf:.2f}x"
