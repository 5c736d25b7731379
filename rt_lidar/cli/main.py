"""``rt-lidar``: the command line (one sub-command a job)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import rt_lidar
from rt_lidar.cli.beam import add_beam_arguments, beam_from_args, sun_from_args
from rt_lidar.cli.messages import one_line_warnings
from rt_lidar.cli.replay import add_replay_parser, add_sink_argument, add_stamp_argument
from rt_lidar.cli.rinet import add_rinet_argument, add_rinet_parser, resolve_rinet_model
from rt_lidar.cli.validate import add_weather_arguments, weather_from_args
from rt_lidar.cli.vendor_options import PRESET_HELP, add_vendor_arguments, preset_ref
from rt_lidar.config import (
    CASTERS,
    DEFAULT_CASTER,
    DEFAULT_SCENE,
    OUT_DIRS,
    RUN_CONFIG_LABEL,
    BridgeConfig,
    RunConfig,
)
from rt_lidar.errors import ConfigError, FieldError, RtLidarError
from rt_lidar.extras import missing_extra
from rt_lidar.physics.device import KERNEL_DEVICES
from rt_lidar.pipeline.device_world import FRAME_DEVICES
from rt_lidar.rig.cli import (
    add_rig_arguments,
    add_rig_run_arguments,
    run_rig_bridge_from_args,
    run_rig_demo_from_config,
)
from rt_lidar.session.outdir import output_folder
from rt_lidar.session.realtime import tune_allocator
from rt_lidar.session.report import print_report

__all__ = ["build_parser", "main"]


def _run_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> RunConfig:
    """The :class:`RunConfig` of a ``demo`` / ``run`` command line; with ``--config`` the recorded one,
    with every option given here (one that differs from its default) put over it."""
    from rt_lidar.config import load_run_config

    given = config_from_args(args)
    if args.config is None:
        return given
    recorded = load_run_config(args.config)
    if recorded.command != args.command:
        recorded = dataclasses.replace(recorded, command=args.command)
    defaults = parser.parse_args([])
    defaults.command = args.command
    default = config_from_args(defaults)
    over = {f: getattr(given, f) for f in _fields(given) if getattr(given, f) != getattr(default, f)}
    bridge = {
        f: getattr(given.bridge, f)
        for f in _fields(given.bridge)
        if getattr(given.bridge, f) != getattr(default.bridge, f)
    }
    over.pop("bridge", None)
    over.pop("command", None)
    return dataclasses.replace(recorded, **over, bridge=dataclasses.replace(recorded.bridge, **bridge))


def _fields(obj: object) -> list[str]:
    return [f.name for f in dataclasses.fields(obj)]  # type: ignore[arg-type]


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The :class:`RunConfig` of parsed ``demo`` / ``run`` options (argparse takes its defaults from it);
    a value the configuration refuses is a :class:`ConfigError` naming the option (``--frames: ...``)."""
    with _named_as_options():
        return _config_from_args(args)


@contextlib.contextmanager
def _named_as_options() -> Iterator[None]:
    """A :class:`RunConfig` built from options here refusing a value names the option it came from."""
    try:
        yield
    except FieldError as exc:
        if exc.source != RUN_CONFIG_LABEL:
            raise
        raise ConfigError(f"--{exc.field.replace('_', '-')}: {exc.problem}") from None


def _config_from_args(args: argparse.Namespace) -> RunConfig:
    bridge = BridgeConfig()
    if args.command == "run":
        bridge = BridgeConfig(
            airsim=args.airsim,
            lockstep=args.lockstep,
            ask_ahead=args.ask_ahead,
            lidar_name=args.lidar,
            vehicle_name=args.vehicle,
            material_map=args.material_map,
            material_rules=args.material_rules,
            flavor=args.flavor,
            use_extension=False if args.no_extension else None,
            reconnect=args.reconnect,
            realtime=args.realtime,
        )
    return RunConfig(
        command=args.command,
        preset=preset_ref(args.preset, args.model, args.lidar_mode),
        scene=getattr(args, "scene", DEFAULT_SCENE),
        caster=getattr(args, "caster", DEFAULT_CASTER),
        seed=args.seed,
        sim_hz=args.sim_hz,
        frames=args.frames,
        out=args.out,
        sinks=tuple(args.sinks),
        write_scans=not args.no_scans,
        progress=not args.quiet,
        in_process=getattr(args, "in_process", False),
        shared_memory=args.shm,
        weather=weather_from_args(args),
        beam=beam_from_args(args),
        kernels_device=args.kernels_device,
        device=getattr(args, "device", "cpu"),
        sun=sun_from_args(args),
        rinet=resolve_rinet_model(args.rinet),
        bridge=bridge,
        stamp=args.stamp,
        faults=_faults_from_args(args),
    )


def _faults_from_args(args: argparse.Namespace) -> tuple[Any, ...]:
    from rt_lidar.faults.spec import load_faults

    return load_faults(args.faults) if getattr(args, "faults", None) else ()


def _cmd_demo(args: argparse.Namespace) -> int:
    from rt_lidar.session.demo import run_demo

    config = _run_config(args, args.parser)
    if args.rig:  # a sensor rig (rt_lidar.rig), in-process
        out = config.out if config.out != OUT_DIRS["demo"] else "out/rig"
        config = dataclasses.replace(config, rig=args.rig, crosstalk=args.crosstalk, in_process=True, out=out)
    with output_folder(config.out, args.overwrite):
        if config.rig is not None:  # a rig: from the command line or recorded (demo --rig, a rig sweep)
            return run_rig_demo_from_config(config, args)
        summary = run_demo(config)
    print_report("demo", summary, config.out)
    return 0


def add_caster_argument(p: argparse.ArgumentParser) -> None:
    """``--caster``: the embedded world's ray caster (:data:`rt_lidar.config.CASTERS`)."""
    p.add_argument(
        "--caster",
        choices=CASTERS,
        default=DEFAULT_CASTER,
        help=f"the embedded world's ray caster (default {DEFAULT_CASTER}; embree-fast: Embree's non-robust "
        "mode, a quarter cheaper, 15-18 %% of distances differ in their last bits, docs/performance.md)",
    )


def port_number(text: str) -> int:
    """An argparse type: a TCP port 0..65535 (0 lets the system choose)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number (0..65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be in 0..65535, got {port}")
    return port


def ray_budget(text: str) -> int:
    """An argparse type: a ray budget, 1..100,000,000 rays a call."""
    try:
        rays = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of rays") from None
    if not 1 <= rays <= 100_000_000:
        raise argparse.ArgumentTypeError(f"must be in 1..100000000 rays, got {rays}")
    return rays


def _cmd_serve(args: argparse.Namespace) -> int:
    import threading

    from rt_lidar.server.serve import ServeOptions, start_embedded_server
    from rt_lidar.session.realtime import limit_malloc_arenas

    limit_malloc_arenas(2)  # a thread per connection: freed buffers stay in few arenas (docs/reliability.md)

    with _named_as_options():
        run = RunConfig(
            command="serve",
            preset=preset_ref(args.preset, args.model, args.lidar_mode),
            scene=args.scene,
            caster=args.caster,
            seed=args.seed,
        )
    opts = ServeOptions.of_run(
        run,
        host=args.host,
        port=args.port,
        settings=args.settings,
        paused=args.paused,
        camera=args.camera,
        rig=args.rig,
        cast_threads=args.cast_threads,
        flavor=args.flavor,
        device=args.device,
        **({"max_rays": args.max_rays} if args.max_rays is not None else {}),
    )
    served = start_embedded_server(opts)
    print(
        f"rt-lidar serve: embedded world '{opts.scene}' with {served.sim.preset.name} on "
        f"{opts.host}:{served.port} (AirSim API{'; Cosys-AirSim lidars' if opts.flavor == 'cosys' else ''}; "
        "Ctrl-C stops)",
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
    d = RunConfig()
    p.add_argument("--scene", default=d.scene, help=f"embedded scene (default {d.scene})")
    add_caster_argument(p)
    p.add_argument("--preset", default=d.preset, help=f"{PRESET_HELP} (default {d.preset})")
    add_vendor_arguments(p)
    p.add_argument("--settings", default=None, help="AirSim settings.json whose lidar block sets the sensor")
    p.add_argument("--seed", type=int, default=d.seed, help="scene seed")
    p.add_argument("--paused", action="store_true", help="start with the sim clock paused")
    p.add_argument(
        "--camera", default="640x360", metavar="WxH", help="embedded camera size (default 640x360)"
    )
    p.add_argument(
        "--max-rays",
        type=ray_budget,
        default=None,
        metavar="N",
        help="rays (firings x sub-rays) one lidar call may cast, default 500000: bounds one call's time, "
        "and the rays of the large casts run at once (their memory)",
    )
    p.add_argument("--rig", default=None, metavar="RIG.toml", help="serve every lidar of a rig file")
    p.add_argument(
        "--flavor",
        choices=("airsim", "cosys"),
        default="airsim",
        help="answer getLidarData as stock AirSim (default) or as Cosys-AirSim (organised, groundtruth "
        "names; also getGPULidarData): docs/simulators.md",
    )
    p.add_argument(
        "--cast-threads",
        type=int,
        default=0,
        metavar="N",
        help="threads one lidar cast is split over, 0..64 (default 0: two for a large cast; 1: each cast "
        "on one thread, for a server sharing its cores with a client that asks frames ahead)",
    )
    p.add_argument(
        "--device",
        choices=FRAME_DEVICES,
        default="cpu",
        help="where the served world's rays are cast (docs/gpu.md): cpu (default), cuda (the scene's BVH on "
        "a GPU), cuda-source-on-cpu (that kernel on the CPU)",
    )
    p.add_argument("--exit-with-stdin", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=_cmd_serve)


def _cmd_run(args: argparse.Namespace) -> int:
    from rt_lidar.session.live import run_controller

    config = _run_config(args, args.parser)
    with output_folder(args.out if args.rig else config.out, args.overwrite):
        if args.rig:  # a sensor rig over the bridge (rt_lidar.rig)
            return run_rig_bridge_from_args(args)
        if args.carla:  # a live CARLA server's semantic lidar (rt_lidar.session.carla_live)
            from rt_lidar.session.carla_live import run_carla

            summary = run_carla(config, args.carla, args.carla_role, args.carla_sensor)
        else:
            summary = run_controller(config)
    print_report("run", summary, config.out)
    return 0


def _add_run_arguments(p: argparse.ArgumentParser, command: str) -> None:
    """The options ``demo`` and ``run`` share (defaults: :class:`RunConfig`'s)."""
    d = RunConfig()
    add_stamp_argument(p)
    p.add_argument(
        "--shm", action="store_true", help="offer the server shared memory for the per-ray fields (same host)"
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="RUN/config.json",
        help="re-run a recorded run (its config.json); options given here override it",
    )
    p.add_argument("--preset", default=d.preset, help=f"{PRESET_HELP} (default {d.preset})")
    add_vendor_arguments(p)
    p.add_argument(
        "--frames", type=int, default=d.frames, help=f"number of scans to write (default {d.frames})"
    )
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the scene and of every random draw")
    p.add_argument(
        "--sim-hz", type=float, default=d.sim_hz, help=f"simulation frame rate f_sim (default {d.sim_hz:g})"
    )
    rig_note = "; out/rig with --rig" if command == "demo" else ""
    p.add_argument(
        "--out", default=OUT_DIRS[command], help=f"output folder (default {OUT_DIRS[command]}{rig_note})"
    )
    p.add_argument(
        "--overwrite", action="store_true", help="clear an existing non-empty --out first (else refused)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--no-scans",
        action="store_true",
        help="do not write OUT/scans (PCD + KITTI): only the --sink outputs (a live drive, a HIL run)",
    )
    p.add_argument(
        "--kernels-device",
        choices=KERNEL_DEVICES,
        default=d.kernels_device,
        help="where the weather and echo-waveform kernels run: cpu (NumPy, default) or cuda (CuPy on a GPU)",
    )
    if command == "demo":
        p.add_argument(
            "--device",
            choices=FRAME_DEVICES,
            default=d.device,
            help="where the frame runs, in-process (docs/gpu.md): cpu (Embree, default), cuda (the scene's "
            "BVH cast on a GPU, the physics kernels there too), cuda-source-on-cpu (that kernel on the CPU)",
        )
    add_weather_arguments(p)
    add_beam_arguments(p)
    add_sink_argument(p)
    add_rinet_argument(p)
    p.add_argument(
        "--faults",
        default=None,
        metavar="FILE.toml",
        help="inject sensor faults: [[fault]] tables (docs/faults.md)",
    )


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the sensor model on a live AirSim / Cosys-AirSim / rt-lidar server")
    b = BridgeConfig()
    p.add_argument("--airsim", default=b.airsim, help="HOST:PORT of the AirSim RPC server")
    p.add_argument("--lockstep", action="store_true", help="pause the sim and advance it frame by frame")
    p.add_argument(
        "--realtime",
        nargs="?",
        type=float,
        const=1.0,
        default=0.0,
        metavar="X",
        help="lockstep: hold sim time to the wall clock (X times real time, default 1): never ahead of "
        "it; the progress line and summary.json's realtime say by how much it falls behind",
    )
    p.add_argument(
        "--ask-ahead",
        type=int,
        default=b.ask_ahead,
        metavar="N",
        help="lockstep: frames asked for ahead, 1..8 (default 1; each delays a driver's controls by a "
        "frame; 2 lets rt-lidar's own server cast two frames at once)",
    )
    p.add_argument("--lidar", default=b.lidar_name, help="AirSim lidar name (default: the first)")
    p.add_argument("--vehicle", default=b.vehicle_name, help="AirSim vehicle name (default: the first)")
    p.add_argument("--material-map", default=None, help="TOML [segments] ID = material (stock AirSim)")
    p.add_argument(
        "--material-rules",
        default=None,
        metavar="FILE",
        help="TOML [[rules]] pattern = REGEX, material = NAME: actor names -> materials, before the "
        "shipped rules (stock AirSim / Cosys-AirSim without --material-map; docs/simulators.md)",
    )
    p.add_argument(
        "--flavor",
        choices=("auto", "airsim", "cosys", "cosys-gpu"),
        default=b.flavor,
        help="a server without the extension: stock AirSim, Cosys-AirSim's CPU lidar or its GPU lidar "
        "(default auto: Cosys when getLidarData carries groundtruth)",
    )
    p.add_argument(
        "--no-extension", action="store_true", help="use stock getLidarData even if rtLidarGetHits exists"
    )
    p.add_argument("--reconnect", action="store_true", help="wait for a lost server to come back")
    p.add_argument(
        "--carla",
        default=None,
        metavar="HOST:PORT",
        help="a CARLA server instead of AirSim: its semantic lidar, in synchronous mode (needs the carla "
        "extra; docs/simulators.md)",
    )
    p.add_argument("--carla-role", default="hero", help="--carla: role_name of the ego (default hero)")
    p.add_argument(
        "--carla-sensor",
        default=None,
        metavar="ROLE",
        help="--carla: attach to the semantic lidar with this role_name instead of spawning one",
    )
    _add_run_arguments(p, "run")
    add_rig_run_arguments(p)
    p.set_defaults(func=_cmd_run, parser=p)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run a sensor through the embedded street and write its scans")
    p.add_argument("--scene", default=DEFAULT_SCENE, help=f"embedded scene (default {DEFAULT_SCENE})")
    p.add_argument(
        "--in-process", action="store_true", help="cast into the world directly, without the bridge"
    )
    add_caster_argument(p)
    _add_run_arguments(p, "demo")
    add_rig_arguments(p)
    p.set_defaults(func=_cmd_demo, parser=p)


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of every sub-command."""
    from rt_lidar.cli.generate import add_generate_parser
    from rt_lidar.cli.osi import add_osi_parser
    from rt_lidar.cli.presets import add_presets_parser
    from rt_lidar.cli.validate import add_validate_parser
    from rt_lidar.cli.view import add_view_parser

    parser = argparse.ArgumentParser(prog="rt-lidar", description="Real-time realistic LiDAR simulator")
    parser.add_argument("--version", action="version", version=f"rt-lidar {rt_lidar.__version__}")
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
    add_osi_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (errors of ours print one clear line, exit 2)."""
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    args = build_parser().parse_args(argv)
    one_line_warnings(f"rt-lidar {args.command}")
    tune_allocator()
    from rt_lidar.unreal_bridge.errors import ConnectionLost  # a server lost outside the scan loop

    try:
        return int(args.func(args))
    except (RtLidarError, FileNotFoundError, ConnectionLost) as exc:  # user input, a lost server; else: a bug
        print(f"rt-lidar {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an optional package of ours (rt_lidar.extras): name its extra
        missing = missing_extra(exc)
        if missing is None:
            raise
        print(f"rt-lidar {args.command}: error: {missing}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rt-lidar {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
