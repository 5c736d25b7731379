"""A rig over the AirSim bridge (``rt-lidar run --rig RIG.toml --airsim HOST:PORT --lockstep``).

Each sensor is read as the server's lidar of the same name (``rt-lidar serve --rig`` serves them; a
real AirSim needs a settings.json from ``rt-lidar presets airsim-settings --rig``). In lockstep the
first sensor's request advances the sim by one frame and every sensor then reads that same frame, one
extension call each. On a server that answers in order (ours), the requests of every sensor's next
frames go out ahead in frame order (``--ask-ahead`` frames, :class:`RigFramesAhead`): the calls and
their order are those of one frame at a time, so the scans are the same, and the server casts frame
k+1 while this side runs frame k's physics. With ``--crosstalk`` the sensors interfere exactly as
in-process: our server sends each answer's sensor poses on the 1 ms grid (``info.pose_samples``, asked
for with every frame's call), from which each pulse's world pose is interpolated as the cast did.
"""

from __future__ import annotations

from rt_lidar.backend.schedule import BRIDGED_RIG_PREFETCH
from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.config import SunConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.model import Rig
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.unreal_bridge import AirSimClient

__all__ = ["RigFramesAhead", "bridge_rig_loop"]


class RigFramesAhead:
    """Before the rig steps frame k, the requests of frames k .. k + ``depth`` not yet sent go out for
    every sensor, frame by frame in the rig's order (the first sensor's advancing the sim): the same
    calls, in the same order, as one frame at a time."""

    def __init__(self, sources: list[BridgeSource], pipelines: list[Pipeline], depth: int) -> None:
        if depth < 1:
            raise ValueError(f"frames asked ahead must be >= 1, got {depth}")
        self.units = list(zip(sources, pipelines, strict=True))
        self.depth = depth
        self.asked = -1
        """The last frame whose requests went out."""

    def __call__(self, frame: int) -> None:
        while self.asked < frame + self.depth:
            k = self.asked + 1
            for source, pipeline in self.units:
                source.ask_frame(*pipeline.frame_interval(k))
            self.asked = k


def bridge_rig_loop(
    client: AirSimClient,
    rig: Rig,
    *,
    sim_hz: float = 20.0,
    seed: int = 0,
    weather: WeatherConfig | None = None,
    vehicle_name: str = "",
    crosstalk: bool = False,
    ask_ahead: int = 1,
    beam: BeamConfig | None = None,
    sun: SunConfig | None = None,
) -> tuple[RigLoop, dict[str, BridgeSource]]:
    """The rig's frame loop over ``client`` (lockstep) and each sensor's bridge source; with
    ``crosstalk`` the sensors interfere as in-process (each pulse's world pose from the server's answer).
    ``ask_ahead``: frames whose requests go out ahead of the one being worked on (0: none), where every
    sensor's source allows it (:meth:`BridgeSource.can_be_asked_ahead`). ``beam``: every sensor's beam
    (sub-rays, return mode, ``--beam full``: our server chooses the bundled pulses), resolved against
    each sensor's preset (None: each preset's); ``sun``: sunlight on every sensor (None: night)."""
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
        pipe = bridge_pipeline(source, sim_hz, seed, weather, beam=beam, sun=sun)
        pipe.prefetch = BRIDGED_RIG_PREFETCH
        source.ask_ahead = None  # no source asks on its own: the rig asks for all, in frame order
        sources[s.name], pipelines[s.name] = source, pipe
    loop = RigLoop.over(rig, pipelines, sim_hz, crosstalk=crosstalk)
    if ask_ahead > 0 and all(src.can_be_asked_ahead() for src in sources.values()):
        loop.before_step = RigFramesAhead(list(sources.values()), list(pipelines.values()), ask_ahead)
    return loop, sources
