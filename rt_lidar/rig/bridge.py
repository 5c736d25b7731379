"""A rig over the AirSim bridge (``rt-lidar run --rig RIG.toml --airsim HOST:PORT --lockstep``).

Each sensor is read as the server's lidar of the same name (``rt-lidar serve --rig`` serves them; a
real AirSim needs a settings.json from ``rt-lidar presets airsim-settings --rig``). In lockstep the
first sensor's source advances the sim by one frame and every sensor then reads that same frame, one
extension call each; without prefetch, so that no sensor reads ahead of the clock. With ``--crosstalk``
the sensors interfere exactly as in-process: our server sends each answer's sensor poses on the 1 ms
grid (``info.pose_samples``), from which each pulse's world pose is interpolated as the cast did.
"""

from __future__ import annotations

from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.model import Rig
from unreal_bridge import AirSimClient

__all__ = ["bridge_rig_loop"]


def bridge_rig_loop(
    client: AirSimClient,
    rig: Rig,
    *,
    sim_hz: float = 20.0,
    seed: int = 0,
    weather: WeatherConfig | None = None,
    vehicle_name: str = "",
    crosstalk: bool = False,
) -> tuple[RigLoop, dict[str, BridgeSource]]:
    """The rig's frame loop over ``client`` (lockstep) and each sensor's bridge source; with
    ``crosstalk`` the sensors interfere as in-process (each pulse's world pose from the server's answer)."""
    sources: dict[str, BridgeSource] = {}
    pipelines: dict[str, Pipeline] = {}
    for i, s in enumerate(rig.sensors):
        source = BridgeSource(
            client,
            s.preset,
            lockstep=True,
            sim_hz=sim_hz,
            lidar_name=s.name,
            vehicle_name=vehicle_name,
            advance_clock=i == 0,
            poses=crosstalk,
        )
        pipe = bridge_pipeline(source, sim_hz, seed, weather)
        pipe.prefetch = 0  # every sensor reads the frame the first one advanced to, in order
        sources[s.name], pipelines[s.name] = source, pipe
    return RigLoop.over(rig, pipelines, sim_hz, crosstalk=crosstalk), sources
