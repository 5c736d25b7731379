"""One frame loop for a whole rig: every sensor advanced each sim frame from the same world state.

Each sensor keeps its own :class:`~rt_lidar.pipeline.frame_loop.Pipeline` (its schedule, physics and
scan assembler, so sensors at different rates stitch their own scans) over one shared
:class:`~rt_lidar.unreal_bridge.world.World` seen from its mount. A frame first senses every sensor (firings,
hits, physics, with moving objects posed at the same frame start), then, with interference on, adds
each sensor's false points from the others' pulses (:mod:`rt_lidar.rig.crosstalk`), then stitches.
Without interference a sensor's scans are byte for byte those of the sensor run alone at its mount.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rt_lidar.backend.schedule import RIG_FRAMES_AHEAD, RIG_PHYSICS_AHEAD
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import negotiate
from rt_lidar.pipeline.device_frame import device_frame_parts, warn_host_physics
from rt_lidar.pipeline.device_world import BvhWorld
from rt_lidar.pipeline.frame_loop import Pipeline, frame_time_ns
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.rig.crosstalk import CrosstalkSensor, false_points
from rt_lidar.rig.model import Rig
from rt_lidar.sensor.beam import exit_m_per_rad
from rt_lidar.sensor.materials import MaterialTable, load_material_table
from rt_lidar.unreal_bridge.world import World

__all__ = ["RigLoop", "RigUnit"]


@dataclass
class RigUnit:
    """One sensor of a running rig."""

    sensor: CrosstalkSensor
    """What the interference model needs of this sensor."""
    pipeline: Pipeline
    false_points: int = 0
    """False (crosstalk) points added to this sensor's frames so far."""


class RigLoop:
    """Steps every sensor of ``rig`` in ``world`` one sim frame at a time."""

    def __init__(
        self,
        rig: Rig,
        world: World,
        *,
        sim_hz: float = 20.0,
        seed: int = 0,
        physics: PhysicsConfig | None = None,
        materials: MaterialTable | None = None,
        prefetch: bool | int = False,
        crosstalk: bool = False,
    ) -> None:
        self.rig = rig
        self.world: World | None = world
        self.sim_hz = float(sim_hz)
        self.crosstalk = crosstalk
        table = materials or load_material_table()
        ahead = RIG_FRAMES_AHEAD if prefetch is True else int(prefetch)
        self.units: dict[str, RigUnit] = {}
        for s in rig.sensors:
            arrays = table.arrays(world.material_names, s.preset.optics.wavelength_nm)
            if isinstance(world, BvhWorld):  # --device: the frame on the device where it can run there
                source, phys, why = device_frame_parts(
                    world, s.preset, arrays, physics or PhysicsConfig(), s.mount, crosstalk
                )
                if why is not None and s is rig.sensors[0]:
                    warn_host_physics(why)
            else:
                source = WorldSource(
                    world, s.preset.range.max_m, arrays.transmission, exit_m_per_rad(s.preset), mount=s.mount
                )
                source.retro_gain, source.volume = arrays.retro_gain, arrays.volume
                # each sensor's beam (sub-rays, return mode, --beam full), as one sensor's pipeline asks it
                phys = SensorPhysics(
                    s.preset, arrays, negotiate(source, s.preset, physics or PhysicsConfig())
                )
            weather = phys.config.weather
            source.use_wet_road(weather.road_wetness if weather is not None else 0.0)  # mirror rays, spray
            pipe = Pipeline(s.preset, source, phys, sim_hz=sim_hz, seed=seed, prefetch=ahead)
            pipe.physics_ahead = RIG_PHYSICS_AHEAD
            self.units[s.name] = RigUnit(CrosstalkSensor(s.name, s.preset, phys), pipe)
        self.frame = 0
        self.before_step: Callable[[int], None] | None = None
        """Called with the frame number at the start of each :meth:`step` (a rig over the bridge asks
        the server for every lidar's frames ahead there)."""

    @classmethod
    def over(
        cls, rig: Rig, pipelines: dict[str, Pipeline], sim_hz: float, *, crosstalk: bool = False
    ) -> RigLoop:
        """A loop over ready pipelines, one per sensor of ``rig`` (over the bridge: each pulse's world
        pose for the interference comes with the server's answer, ``info.pose_samples``)."""
        loop = cls.__new__(cls)
        loop.rig, loop.world, loop.sim_hz, loop.crosstalk = rig, None, float(sim_hz), crosstalk
        loop.units = {
            s.name: RigUnit(CrosstalkSensor(s.name, s.preset, pipelines[s.name].physics), pipelines[s.name])
            for s in rig.sensors
        }
        loop.frame = 0
        loop.before_step = None
        return loop

    def step(self) -> dict[str, list[Scan]]:
        """Advance every sensor one sim frame; returns each sensor's completed scans."""
        units = self.units
        if self.before_step is not None:
            self.before_step(self.frame)
        # 1-3. every sensor senses the same frame of the same world (firings, hits, physics)
        sensed = {name: u.pipeline.sense() for name, u in units.items()}
        # 4. mutual interference: each sensor's false points from the others' pulses of this frame
        extra: dict[str, np.ndarray] = {}
        if self.crosstalk and len(units) > 1:
            extra = false_points([u.sensor for u in units.values()], sensed)
            for name, pts in extra.items():
                units[name].false_points += int(pts.size)
        # 5. each sensor stitches its own scans
        out = {name: u.pipeline.commit(sensed[name], extra.get(name)) for name, u in units.items()}
        self.frame += 1
        return out

    def fetch_until(self, scans: dict[str, int]) -> None:
        """The rig stops when each sensor named in ``scans`` handed out that many more scans: no
        sensor fetches a frame ahead past the last one the rig will step
        (:meth:`Pipeline.last_frame_for`, the latest of the sensors'; the scans are the same)."""
        last = max(self.units[n].pipeline.last_frame_for(k) for n, k in scans.items())
        for u in self.units.values():
            u.pipeline.fetch_until = last

    def start(self) -> None:
        """Start every pipeline's threads and touch their memory (:meth:`Pipeline.start`)."""
        for u in self.units.values():
            u.pipeline.start()

    def close(self) -> None:
        """Stop every pipeline's prefetch thread."""
        for u in self.units.values():
            u.pipeline.close()

    @property
    def sim_time_s(self) -> float:
        """Simulated time reached so far."""
        return frame_time_ns(self.frame, self.sim_hz) * 1e-9
