"""``rt-lidar osi ...``: rt-lidar as an ASAM OSI sensor model (docs/osi.md).

- ``osi fmu --preset P --out model.fmu``: build the OSMP co-simulation FMU;
- ``osi run --preset P --in sensorview.osi --out sensordata.osi``: run the model over a ``SensorView``
  trace (``.osi``) and write its ``SensorData`` trace.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from rt_lidar.cli.validate import add_weather_arguments, weather_from_args

__all__ = ["add_osi_parser"]


def _add_model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", required=True, help="sensor preset name or .toml file")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    p.add_argument(
        "--sub-rays", type=int, default=None, metavar="N", help="rays per pulse (default: the preset's)"
    )
    p.add_argument(
        "--return-mode",
        default=None,
        choices=("strongest", "last", "first", "dual", "multi"),
        help="returns each pulse reports (default: the preset's)",
    )
    add_weather_arguments(p)


def _beam(args: argparse.Namespace) -> Any:
    from rt_lidar.sensor.beam import BeamConfig

    if args.sub_rays is None and args.return_mode is None:
        return None
    return BeamConfig(sub_rays=args.sub_rays, return_mode=args.return_mode)


def add_osi_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``osi fmu`` and ``osi run`` on an argparse subparsers object."""
    osi = subparsers.add_parser("osi", help="ASAM OSI: the sensor model as an OSMP FMU, or over a trace")
    sub = osi.add_subparsers(dest="osi_command", required=True)
    p_fmu = sub.add_parser("fmu", help="build an FMI 2.0 co-simulation FMU following OSMP")
    _add_model_arguments(p_fmu)
    p_fmu.add_argument("--out", required=True, help="the .fmu file to write")
    p_fmu.add_argument("--step", type=float, default=0.05, metavar="S", help="default step in s (0.05)")
    p_fmu.set_defaults(func=_cmd_fmu)
    p_run = sub.add_parser("run", help="the model over a SensorView trace: a SensorData trace")
    _add_model_arguments(p_run)
    p_run.add_argument("--in", dest="input", required=True, help="SensorView trace (.osi or .mcap)")
    p_run.add_argument("--out", required=True, help="SensorData trace to write (.osi or .mcap)")
    p_run.set_defaults(func=_cmd_run)
    return osi


def _cmd_fmu(args: argparse.Namespace) -> int:
    from rt_lidar.osi.fmu import build_fmu

    t0 = time.perf_counter()
    path = build_fmu(
        args.preset,
        args.out,
        beam=_beam(args),
        weather=weather_from_args(args),
        seed=args.seed,
        step_s=args.step,
    )
    print(f"rt-lidar osi fmu: wrote {path} ({path.stat().st_size} bytes, {time.perf_counter() - t0:.1f} s)")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from rt_lidar.osi.frames import require_osi
    from rt_lidar.osi.model import OsiLidarModel
    from rt_lidar.osi.trace import open_trace_writer, trace_messages
    from rt_lidar.physics.model import PhysicsConfig

    require_osi()
    from osi3.osi_sensordata_pb2 import SensorData

    model = OsiLidarModel(
        args.preset, PhysicsConfig(weather=weather_from_args(args), beam=_beam(args)), seed=args.seed
    )
    writer = open_trace_writer(args.out, SensorData, "rt-lidar.OSMPSensorDataOut", "rt-lidar osi run")
    frames = detections = 0
    try:
        for data in trace_messages(args.input):
            out = SensorData.FromString(model.step_bytes(data))
            writer.write(out)
            frames += 1
            detections += sum(len(ld.detection) for ld in out.feature_data.lidar_sensor)
    finally:
        writer.close()
    print(f"rt-lidar osi run: {frames} SensorView -> {args.out}: {detections} detections", file=sys.stdout)
    return 0
