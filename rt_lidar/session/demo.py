"""``rt-lidar demo``: the embedded street seen by one sensor, written as PCD + KITTI + a range image.

By default the demo goes the way a live session does: it starts the embedded AirSim-compatible server
on loopback in its own process (``rt-lidar serve``) and runs the controller against it in lockstep
(``rt-lidar run --lockstep``). ``in_process=True`` casts straight into the world instead, without the bridge.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rt_lidar.bridge.source import BridgeSource, airsim_mount, bridge_pipeline
from rt_lidar.cli.beam import SunConfig
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.scan_loop import drive_scans
from rt_lidar.rinet.stage import airsim_camera_post
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import load_preset, preset_to_dict
from rt_lidar.server.serve import ServeOptions, start_server_process
from unreal_bridge import AirSimClient
from unreal_bridge.world import CameraSpec, Pose

if TYPE_CHECKING:
    from rt_lidar.rinet.stage import RinetStage

__all__ = ["RINET_CAMERA", "DemoOptions", "run_demo"]


@dataclass(frozen=True)
class DemoOptions:
    """What ``rt-lidar demo`` runs."""

    preset: str = "HDL-64E"
    frames: int = 50
    seed: int = 0
    sim_hz: float = 20.0
    out: str = "out/demo"
    scene: str = "street"
    progress: bool = True
    sinks: tuple[str, ...] = ()
    """Extra ``--sink KIND:TARGET`` outputs besides the demo's own PCD + KITTI files."""
    in_process: bool = False
    weather: WeatherConfig | None = None
    """Rain, fog, snow; None = clear air (the embedded server's simSetWeatherParameter applies then)."""
    beam: BeamConfig | None = None
    """Sub-rays, return mode, echo pulse width; None = what the preset says."""
    sun: SunConfig = field(default_factory=SunConfig)
    """Sunlight (illuminance, direction); none by default."""
    rinet: str | None = None
    """An ONNX RINet model: learned raydrop and intensity for the points the camera sees."""
    stamp: str = "sim"
    """The clock of every packet and message stamp: ``sim`` or ``wall`` (as a PTP-synchronised sensor)."""


RINET_CAMERA = CameraSpec(width=512, height=288, fov_deg=90.0)
"""The camera the bundled RINet model was trained with (the embedded camera's default mount)."""


def _rinet_stage(opts: DemoOptions, sensor_mount: Pose, intensity_max: float) -> RinetStage | None:
    if opts.rinet is None:
        return None
    from rt_lidar.rinet.stage import RinetStage

    return RinetStage(opts.rinet, RINET_CAMERA, sensor_mount, intensity_max=intensity_max)


def _rinet_summary(opts: DemoOptions, stage: RinetStage | None) -> dict[str, Any] | None:
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


def run_demo(opts: DemoOptions) -> dict[str, Any]:
    """Run the demo; writes ``out/scans/*.pcd|*.bin``, ``range_image.png``, ``config.json`` and
    ``summary.json``; returns the summary.
    """
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    preset = load_preset(opts.preset)
    (out / "config.json").write_text(
        json.dumps({"options": asdict(opts), "preset": preset_to_dict(preset)}, indent=2)
    )
    scenario = {"demo": asdict(opts)}
    t_build = time.perf_counter()
    imax = preset.output.intensity_max
    if opts.in_process:
        built = build_pipeline(
            preset,
            opts.scene,
            seed=opts.seed,
            sim_hz=opts.sim_hz,
            prefetch=True,
            physics=PhysicsConfig(
                weather=opts.weather,
                beam=opts.beam,
                sun_illuminance_lux=opts.sun.lux,
                sun_direction=opts.sun.direction,
            ),
        )
        world = built.world
        stage = _rinet_stage(opts, world.scene.sensor_mount, imax)

        def render_post(scan: Scan) -> Scan:
            assert stage is not None
            t_ns = stage.camera_time_ns(scan)
            return stage.apply(scan, world.render_camera(RINET_CAMERA, t_ns * 1e-9).rgb, t_ns)

        try:
            result = drive_scans(
                built.pipeline, preset, opts.frames, out, opts.sinks, scenario, opts.progress,
                post=render_post if stage is not None else None, stamp=opts.stamp,
                mount=_mount_tuple(world.scene.sensor_mount),
            )  # fmt: skip
        finally:
            built.pipeline.close()
        result.summary["bridge"] = None
    else:
        camera = f"{RINET_CAMERA.width}x{RINET_CAMERA.height}"
        server, port = start_server_process(
            ServeOptions(
                port=0, scene=opts.scene, preset=preset.name, seed=opts.seed, camera=camera, paused=True
            )
        )
        mount = build_world(opts.scene, seed=opts.seed).scene.sensor_mount if opts.rinet else Pose.identity()
        stage = _rinet_stage(opts, mount, imax)
        try:
            with AirSimClient("127.0.0.1", port, timeout=60.0) as client:
                client.confirm_connection()
                client.reset()
                source = BridgeSource(client, preset, lockstep=True, sim_hz=opts.sim_hz)
                pipe = bridge_pipeline(source, opts.sim_hz, opts.seed, opts.weather, opts.beam, opts.sun)

                try:
                    result = drive_scans(
                        pipe, preset, opts.frames, out, opts.sinks, scenario, opts.progress, True,
                        post=airsim_camera_post(stage, client) if stage is not None else None,
                        stamp=opts.stamp, mount=airsim_mount(client),
                    )  # fmt: skip
                finally:
                    pipe.close()
                result.summary["bridge"] = source.stats.as_dict(f"127.0.0.1:{port}")
        finally:
            _stop(server)
    result.summary["rinet"] = _rinet_summary(opts, stage)
    result.summary["build_time_s"] = time.perf_counter() - t_build - result.summary["wall_time_s"]
    (out / "summary.json").write_text(json.dumps(result.summary, indent=2, default=str))
    return result.summary
