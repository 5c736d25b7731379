"""``rt-lidar run``: the controller against an AirSim-compatible server, scans into files and sinks."""

from __future__ import annotations

import sys
import time
import tomllib
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rt_lidar.bridge.material_rules import load_material_rules
from rt_lidar.bridge.server_lidar import ADOPT, resolve_server_preset
from rt_lidar.bridge.source import BridgeSource, airsim_mount, bridge_pipeline, parse_address
from rt_lidar.config import RunConfig, plain, write_run_config, write_summary
from rt_lidar.errors import ConfigError, RtLidarError
from rt_lidar.faults.wiring import fault_plan
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.scan_loop import drive_scans
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.session.run_summary import combine_parts
from rt_lidar.unreal_bridge import AirSimClient, RpcError
from rt_lidar.unreal_bridge.errors import ConnectionLost

__all__ = ["load_material_map", "run_controller"]


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
    from rt_lidar.sensor.materials import load_material_table

    valid = load_material_table().names
    for key, value in out.items():
        if value not in valid:
            raise ConfigError(
                f"{p}: field 'segments.{key}': unknown material '{value}' (valid: {', '.join(valid)})"
            )
    return out


def _rinet_post(opts: RunConfig, client: AirSimClient, intensity_max: float) -> Callable[[Scan], Scan] | None:
    """The RINet stage over the bridge: camera "0" of the sim, at the embedded world's camera and lidar
    mounts (an Unreal scene must mount its camera the same way, or train a model for its own)."""
    if opts.rinet is None:
        return None
    from rt_lidar.rinet.stage import RinetStage, airsim_camera_post
    from rt_lidar.session.demo import RINET_CAMERA
    from rt_lidar.unreal_bridge.world import Scene

    stage = RinetStage(opts.rinet, RINET_CAMERA, Scene(objects=[]).sensor_mount, intensity_max=intensity_max)
    return airsim_camera_post(stage, client, opts.bridge.vehicle_name)


def _mount(client: AirSimClient, opts: RunConfig) -> tuple[float, ...] | None:
    """The lidar's mount on the vehicle from the server's poses; None (identity) where it cannot say."""
    try:
        return airsim_mount(client, opts.bridge.lidar_name, opts.bridge.vehicle_name)
    except RpcError as exc:
        warnings.warn(f"the server does not say the lidar's mount ({exc}): taken as identity", stacklevel=2)
        return None


def _connect(host: str, port: int, opts: RunConfig) -> AirSimClient:
    """A client connected to the server; with ``--reconnect`` it waits for one (and says so on stderr:
    the address and how long), else the first refusal is an error."""
    b = opts.bridge
    waited = b.reconnect_timeout_s if b.reconnect else 0.0
    deadline = time.monotonic() + waited
    told = False
    while True:
        client = AirSimClient(host, port, timeout=b.timeout_s, shared_memory=opts.shared_memory)
        try:
            client.confirm_connection()
            if told:
                print(
                    f"rt-lidar run: the AirSim server at {host}:{port} answers", file=sys.stderr, flush=True
                )
            return client
        except ConnectionLost as exc:
            client.close()
            if time.monotonic() >= deadline:
                within = f" within --reconnect's {waited:g} s" if b.reconnect else ""
                raise RtLidarError(f"no AirSim server answers at {host}:{port}{within}: {exc}") from exc
            if not told:
                print(
                    f"rt-lidar run: waiting up to {waited:g} s for an AirSim server at {host}:{port} "
                    f"(--reconnect; {exc.reason})",
                    file=sys.stderr,
                    flush=True,
                )
                told = True
            time.sleep(0.5)


def run_controller(opts: RunConfig) -> dict[str, Any]:
    """Run the controller until ``opts.frames`` scans are written (or the server goes away).

    Without ``bridge.reconnect`` a lost server ends the run with a clear message in the summary; every
    scan written before is complete. With it the controller waits for the server to come back, up to
    ``bridge.reconnect_timeout_s``, and goes on writing after the scans it has. ``config.json`` (what
    ran, as the first connection granted it) and ``summary.json`` are written once.
    """
    b = opts.bridge
    host, port = parse_address(b.airsim)
    preset: SensorPreset | None = None if opts.preset == ADOPT else load_preset(opts.preset)
    material_map = load_material_map(b.material_map) if b.material_map else None
    if b.realtime and not b.lockstep:
        raise ConfigError("--realtime needs --lockstep (free run follows the server's own clock)")
    from rt_lidar.bridge.pacing import RealtimePacer, warn_if_behind

    pacer = RealtimePacer(b.realtime, opts.sim_hz) if b.realtime else None
    from rt_lidar.sensor.materials import load_material_table

    rules = load_material_rules(b.material_rules, load_material_table().names)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    parts: list[dict[str, Any]] = []
    dirs: list[str] = []
    t_start = time.perf_counter()

    def finish(stopped_early: str | None = None) -> dict[str, Any]:
        summary = combine_parts(parts, dirs, time.perf_counter() - t_start, stopped_early)
        if pacer is not None:
            summary["realtime"] = pacer.summary()
            warn_if_behind(pacer)
        write_summary(out, summary)
        return summary

    while written < opts.frames:
        client = _connect(host, port, opts)
        try:
            preset = resolve_server_preset(client, preset or opts.preset, b.lidar_name)
        except BaseException:
            client.close()
            raise
        source = BridgeSource(
            client,
            preset,
            lockstep=b.lockstep,
            sim_hz=opts.sim_hz,
            lidar_name=b.lidar_name,
            vehicle_name=b.vehicle_name,
            material_map=material_map,
            use_extension=b.use_extension,
            material_rules=rules,
            flavor=b.flavor,
        )
        if pacer is not None:
            pacer.restart()  # anchored at this connection's first frame
            source.pacer = pacer
        if source.material_assignment is not None:  # one line: what the name rules did
            print(f"rt-lidar run: {source.material_assignment.summary_line()}", file=sys.stderr, flush=True)
        pipe = bridge_pipeline(
            source, opts.sim_hz, opts.seed, opts.weather, opts.beam, opts.sun, ask_depth=b.ask_ahead
        )
        ran = opts.resolved(pipe.physics.config)
        if not parts:
            write_run_config(out, ran, preset)
        part_dir = "." if not parts else f"part{len(parts):02d}"
        part_out = out / part_dir
        try:
            result = drive_scans(
                pipe,
                preset,
                opts.frames - written,
                part_out,
                opts.sinks,
                {"run": plain(ran)},
                opts.progress,
                b.lockstep,
                stop_on=(ConnectionLost,),
                post=_rinet_post(opts, client, preset.output.intensity_max),
                stamp=opts.stamp,
                write_scans=opts.write_scans,
                mount=_mount(client, opts),
                live_figures=None if pacer is None else (lambda: {"realtime": pacer.live_text()}),
                faults=fault_plan(opts.faults, preset, opts.seed),
            )
        finally:
            pipe.close()
            client.close()
        st = source.stats
        result.summary["bridge"] = st.as_dict(f"{host}:{port}")
        parts.append(result.summary)
        dirs.append(part_dir)
        if part_dir != ".":  # a later part keeps its own summary in its folder; the run's is at the top
            write_summary(part_out, result.summary)
        written += int(result.summary["frames"])
        if result.error is not None:
            msg = (
                f"the AirSim server at {host}:{port} went away after {written} scans "
                f"({result.error}); every scan written is complete"
            )
            if not b.reconnect:
                finish(msg)
                raise RtLidarError(msg) from result.error
    return finish()
