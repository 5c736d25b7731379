"""``rt-lidar run``: the controller against an AirSim-compatible server, scans into files and sinks."""

from __future__ import annotations

import json
import time
import tomllib
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rt_lidar.bridge.source import BridgeSource, airsim_mount, bridge_pipeline, parse_address
from rt_lidar.cli.beam import SunConfig
from rt_lidar.errors import ConfigError, RtLidarError
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.scan_loop import drive_scans
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import load_preset, preset_to_dict
from unreal_bridge import AirSimClient, RpcError
from unreal_bridge.errors import ConnectionLost

__all__ = ["RunOptions", "load_material_map", "run_controller"]


@dataclass(frozen=True)
class RunOptions:
    """What ``rt-lidar run`` does."""

    airsim: str = "127.0.0.1:41451"
    preset: str = "HDL-64E"
    lockstep: bool = False
    sim_hz: float = 20.0
    frames: int = 50
    out: str = "out/run"
    seed: int = 0
    lidar_name: str = ""
    vehicle_name: str = ""
    material_map: str | None = None
    use_extension: bool | None = None
    reconnect: bool = False
    reconnect_timeout_s: float = 30.0
    timeout_s: float = 30.0
    sinks: tuple[str, ...] = ()
    progress: bool = True
    beam: BeamConfig | None = None
    """Sub-rays, return mode, echo pulse width; None = what the preset says."""
    sun: SunConfig = field(default_factory=SunConfig)
    """Sunlight: cast by our server (``rtLidarGetBeamHits`` with a sun); not applied, with a warning,
    against a server without it."""
    rinet: str | None = None
    """An ONNX RINet model applied to camera "0" of the sim (see ``_rinet_post``)."""
    weather: WeatherConfig | None = None
    """Rain, fog, snow for the lidar; None = follow the server's simSetWeatherParameter (ours reports it)."""
    stamp: str = "sim"
    """The clock of every packet and message stamp: ``sim`` or ``wall`` (as a PTP-synchronised sensor)."""


def load_material_map(path: str | Path) -> dict[int, str]:
    """A TOML material map: ``[segments]`` table of ``"ID" = "material"`` (AirSim segmentation ids)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read the material map: {exc}") from exc
    table = data.get("segments")
    if not isinstance(table, dict):
        raise ConfigError(f'{p}: needs a [segments] table of "ID" = "material" entries')
    out: dict[int, str] = {}
    for key, value in table.items():
        if not str(key).isdigit() or not 0 <= int(key) <= 255 or not isinstance(value, str):
            raise ConfigError(
                f"{p}: field 'segments.{key}': key must be an id 0..255 and value a material name"
            )
        out[int(key)] = value
    return out


def _rinet_post(
    opts: RunOptions, client: AirSimClient, intensity_max: float
) -> Callable[[Scan], Scan] | None:
    """The RINet stage over the bridge: camera "0" of the sim, at the embedded world's camera and lidar
    mounts (an Unreal scene must mount its camera the same way, or train a model for its own)."""
    if opts.rinet is None:
        return None
    from rt_lidar.rinet.stage import RinetStage, airsim_camera_post
    from rt_lidar.session.demo import RINET_CAMERA
    from unreal_bridge.world import Scene

    stage = RinetStage(opts.rinet, RINET_CAMERA, Scene(objects=[]).sensor_mount, intensity_max=intensity_max)
    return airsim_camera_post(stage, client, opts.vehicle_name)


def _mount(client: AirSimClient, opts: RunOptions) -> tuple[float, ...] | None:
    """The lidar's mount on the vehicle from the server's poses; None (identity) where it cannot say."""
    try:
        return airsim_mount(client, opts.lidar_name, opts.vehicle_name)
    except RpcError as exc:
        warnings.warn(f"the server does not say the lidar's mount ({exc}): taken as identity", stacklevel=2)
        return None


def _connect(host: str, port: int, opts: RunOptions) -> AirSimClient:
    deadline = time.monotonic() + (opts.reconnect_timeout_s if opts.reconnect else 0.0)
    while True:
        client = AirSimClient(host, port, timeout=opts.timeout_s)
        try:
            client.confirm_connection()
            return client
        except ConnectionLost as exc:
            client.close()
            if time.monotonic() >= deadline:
                raise RtLidarError(f"no AirSim server answers at {host}:{port}: {exc}") from exc
            time.sleep(0.5)


def run_controller(opts: RunOptions) -> dict[str, Any]:
    """Run the controller until ``opts.frames`` scans are written (or the server goes away).

    Without ``reconnect`` a lost server ends the run with a clear message in the summary; every scan
    written before is complete. With it the controller waits for the server to come back, up to
    ``reconnect_timeout_s``, and goes on writing after the scans it has.
    """
    host, port = parse_address(opts.airsim)
    preset = load_preset(opts.preset)
    material_map = load_material_map(opts.material_map) if opts.material_map else None
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(
        json.dumps({"options": asdict(opts), "preset": preset_to_dict(preset)}, indent=2)
    )
    written = 0
    parts: list[dict[str, Any]] = []
    while written < opts.frames:
        client = _connect(host, port, opts)
        source = BridgeSource(
            client,
            preset,
            lockstep=opts.lockstep,
            sim_hz=opts.sim_hz,
            lidar_name=opts.lidar_name,
            vehicle_name=opts.vehicle_name,
            material_map=material_map,
            use_extension=opts.use_extension,
        )
        pipe = bridge_pipeline(source, opts.sim_hz, opts.seed, opts.weather, opts.beam, opts.sun)
        part_out = out if not parts else out / f"part{len(parts):02d}"
        try:
            result = drive_scans(
                pipe,
                preset,
                opts.frames - written,
                part_out,
                opts.sinks,
                {"run": asdict(opts)},
                opts.progress,
                opts.lockstep,
                stop_on=(ConnectionLost,),
                post=_rinet_post(opts, client, preset.output.intensity_max),
                stamp=opts.stamp,
                mount=_mount(client, opts),
            )
        finally:
            pipe.close()
            client.close()
        st = source.stats
        result.summary["bridge"] = st.as_dict(f"{host}:{port}")
        parts.append(result.summary)
        written += int(result.summary["frames"])
        if result.error is not None:
            msg = (
                f"the AirSim server at {host}:{port} went away after {written} scans "
                f"({result.error}); every scan written is complete"
            )
            if not opts.reconnect:
                summary = {**parts[0], "frames": written, "stopped_early": msg, "parts": len(parts)}
                (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
                raise RtLidarError(msg) from result.error
    summary = {**parts[0], "frames": written, "parts": len(parts)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary
