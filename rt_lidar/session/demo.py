"""``rt-lidar demo``: the embedded street seen by one sensor, written as PCD + KITTI + a range image.

By default the demo goes the way a live session does: it starts the embedded AirSim-compatible server
on loopback in its own process (``rt-lidar serve``) and runs the controller against it in lockstep
(``rt-lidar run --lockstep``). ``in_process=True`` casts straight into the world instead, without the bridge.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rt_lidar.api import in_process_pipeline
from rt_lidar.bridge.source import BridgeSource, airsim_mount, bridge_pipeline
from rt_lidar.config import BridgeConfig, RunConfig, plain, write_run_config, write_summary
from rt_lidar.errors import ConfigError
from rt_lidar.faults.wiring import fault_plan
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import build_world
from rt_lidar.pipeline.device_frame import device_summary
from rt_lidar.pipeline.scan_loop import drive_scans
from rt_lidar.rinet.stage import airsim_camera_post
from rt_lidar.sensor.presets import load_preset
from rt_lidar.server.serve import ServeOptions, start_server_process
from rt_lidar.unreal_bridge import AirSimClient
from rt_lidar.unreal_bridge.world import CameraSpec, Pose

if TYPE_CHECKING:
    from rt_lidar.rinet.stage import RinetStage

__all__ = ["RINET_CAMERA", "run_demo"]


RINET_CAMERA = CameraSpec(width=512, height=288, fov_deg=90.0)
"""The camera the bundled RINet model was trained with (the embedded camera's default mount)."""
DEMO_ASK_AHEAD = 2
"""Frames the bridged demo asks ahead: its server casts two at once while the controller works on a
third (no driver's controls to wait for; docs/performance.md)."""
DEMO_CAST_THREADS = 1
"""The demo's server casts each frame on one thread: it shares the two cores with the controller and
casts two frames at once."""


def _rinet_stage(opts: RunConfig, sensor_mount: Pose, intensity_max: float) -> RinetStage | None:
    if opts.rinet is None:
        return None
    from rt_lidar.rinet.stage import RinetStage

    return RinetStage(opts.rinet, RINET_CAMERA, sensor_mount, intensity_max=intensity_max)


def _rinet_summary(opts: RunConfig, stage: RinetStage | None) -> dict[str, Any] | None:
    if stage is None or stage.last is None:
        return None
    return {"model": opts.rinet, **asdict(stage.last)}


def _mount_tuple(pose: Pose) -> tuple[float, ...]:
    return (*(float(v) for v in pose.position), *(float(v) for v in pose.rotation))


def _stop(server: subprocess.Popen[str]) -> None:
    """End the server process (closing its stdin is enough; terminate it if it lingers)."""
    if server.stdin is not None:
        server.stdin.close()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def run_demo(opts: RunConfig) -> dict[str, Any]:
    """Run the demo; writes ``out/scans/*.pcd|*.bin``, ``range_image.png``, ``config.json`` (the
    resolved configuration, as soon as the pipeline is built) and ``summary.json``; returns the summary.
    """
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    preset = load_preset(opts.preset)
    t_build = time.perf_counter()
    imax = preset.output.intensity_max
    if opts.scene_setup is not None and not opts.in_process:
        raise ConfigError(
            "a run configuration with a scene_setup (a dataset run's) runs in-process only: add --in-process"
        )
    if opts.device != "cpu" and not opts.in_process:
        raise ConfigError(
            f"--device {opts.device} casts the embedded world in this process: add --in-process"
        )
    if opts.in_process:
        built = in_process_pipeline(opts, preset)  # what rt_lidar.simulate() runs
        world = built.world
        stage = _rinet_stage(opts, world.scene.sensor_mount, imax)

        def render_post(scan: Scan) -> Scan:
            assert stage is not None
            t_ns = stage.camera_time_ns(scan)
            return stage.apply(scan, world.render_camera(RINET_CAMERA, t_ns * 1e-9).rgb, t_ns)

        try:
            ran = opts.resolved(built.pipeline.physics.config)
            write_run_config(out, ran, preset)
            result = drive_scans(
                built.pipeline,
                preset,
                opts.frames,
                out,
                opts.sinks,
                {"demo": {**plain(ran), "bridge": None}},  # in-process: no server
                opts.progress,
                post=render_post if stage is not None else None,
                stamp=opts.stamp,
                write_scans=opts.write_scans,
                mount=_mount_tuple(world.scene.sensor_mount),
                faults=fault_plan(opts.faults, preset, opts.seed),
            )
        finally:
            built.pipeline.close()
        result.summary["bridge"] = None
        result.summary["device"] = device_summary(built.pipeline.source, built.pipeline.physics)
    else:
        camera = f"{RINET_CAMERA.width}x{RINET_CAMERA.height}"
        server, port = start_server_process(
            ServeOptions.of_run(
                opts, port=0, preset=opts.preset, camera=camera, paused=True, cast_threads=DEMO_CAST_THREADS
            )
        )
        mount = build_world(opts.scene, seed=opts.seed).scene.sensor_mount if opts.rinet else Pose.identity()
        stage = _rinet_stage(opts, mount, imax)
        try:
            with AirSimClient("127.0.0.1", port, timeout=60.0, shared_memory=opts.shared_memory) as client:
                client.confirm_connection()
                client.reset()
                source = BridgeSource(client, preset, lockstep=True, sim_hz=opts.sim_hz)
                pipe = bridge_pipeline(
                    source,
                    opts.sim_hz,
                    opts.seed,
                    opts.weather,
                    opts.beam,
                    opts.sun,
                    ask_depth=DEMO_ASK_AHEAD,
                )
                try:
                    ran = opts.resolved(pipe.physics.config)
                    # the server this demo started and how it drove it (config.json's bridge is what ran)
                    bridge = BridgeConfig(airsim=f"127.0.0.1:{port}", lockstep=True, ask_ahead=DEMO_ASK_AHEAD)
                    ran = dataclasses.replace(ran, bridge=bridge)
                    write_run_config(out, ran, preset)
                    result = drive_scans(
                        pipe,
                        preset,
                        opts.frames,
                        out,
                        opts.sinks,
                        {"demo": plain(ran)},
                        opts.progress,
                        True,
                        post=airsim_camera_post(stage, client) if stage is not None else None,
                        stamp=opts.stamp,
                        write_scans=opts.write_scans,
                        mount=airsim_mount(client),
                        faults=fault_plan(opts.faults, preset, opts.seed),
                    )
                finally:
                    pipe.close()
                result.summary["bridge"] = source.stats.as_dict(f"127.0.0.1:{port}")
        finally:
            _stop(server)
    result.summary["rinet"] = _rinet_summary(opts, stage)
    result.summary["build_time_s"] = time.perf_counter() - t_build - result.summary["wall_time_s"]
    write_summary(out, result.summary)
    return result.summary
