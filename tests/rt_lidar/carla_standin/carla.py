"""A stand-in for CARLA's ``carla`` module over a CARLA *server* that cannot run here.

It answers the calls ``rt_lidar.session.carla_live`` makes (client, world settings, actors, blueprint,
spawn, listen, tick, weather) from the embedded street: each tick sweeps the spawned semantic lidar as
CARLA's does (``rt_lidar.bridge.carla_world.semantic_lidar_tick``, from the blueprint attributes the
controller set) and hands the listener a measurement with CARLA's fields. Only the tests import it.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rt_lidar.bridge.carla import CarlaLidarSetup
from rt_lidar.bridge.carla_world import semantic_lidar_tick
from rt_lidar.unreal_bridge.world import Pose, World, street_scene

START_ANGLE_DEG = 37.0  # where CARLA's sweep happens to stand when the sensor is spawned


@dataclass
class Location:
    x: float = 0.0
    y: float = 0.0
    z: float = 0.0


@dataclass
class Rotation:
    pitch: float = 0.0
    yaw: float = 0.0
    roll: float = 0.0


@dataclass
class Transform:
    location: Location = field(default_factory=Location)
    rotation: Rotation = field(default_factory=Rotation)


@dataclass
class WeatherParameters:
    precipitation: float = 0.0
    fog_density: float = 0.0
    wetness: float = 0.0
    precipitation_deposits: float = 0.0


@dataclass
class WorldSettings:
    synchronous_mode: bool = False
    fixed_delta_seconds: float | None = None


class Blueprint:
    def __init__(self, type_id: str) -> None:
        self.id, self.attributes = type_id, {}

    def set_attribute(self, key: str, value: str) -> None:
        self.attributes[key] = value


class Actor:
    def __init__(self, type_id: str, attributes: dict[str, str]) -> None:
        self.type_id, self.attributes = type_id, attributes


class Measurement:
    def __init__(self, raw: bytes, counts: list[int], t: float, transform: Transform) -> None:
        self.raw_data, self._counts, self.timestamp, self.transform = raw, counts, t, transform
        self.channels = len(counts)

    def get_point_count(self, channel: int) -> int:
        return self._counts[channel]


class Sensor(Actor):
    def __init__(self, bp: Blueprint, mount: Transform, world: StandInWorld) -> None:
        super().__init__(bp.id, dict(bp.attributes))
        self.mount, self.world, self.callback, self.destroyed = mount, world, None, False
        a = {k: float(v) for k, v in bp.attributes.items()}
        self.setup = CarlaLidarSetup(
            int(a["channels"]),
            a["upper_fov"],
            a["lower_fov"],
            int(a["points_per_second"]),
            a["rotation_frequency"],
            a["range"],
            a.get("horizontal_fov", 360.0),
        )
        self.angle = START_ANGLE_DEG

    def listen(self, callback: Any) -> None:
        self.callback = callback

    def stop(self) -> None:
        self.callback = None

    def destroy(self) -> None:
        self.destroyed = True

    def sweep(self, t: float, dt: float) -> None:
        mount = Pose.from_xyz_rpy(self.mount.location.x, -self.mount.location.y, self.mount.location.z)
        tick = semantic_lidar_tick(self.world.embedded, self.setup, t, dt, self.angle, mount)
        self.angle = tick.horizontal_angle_deg
        pos, quat = self.world.embedded.sensor_poses(np.array([t]), mount)
        w, x, y, z = quat[0]
        yaw = math.degrees(math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))
        where = Transform(Location(pos[0][0], -pos[0][1], pos[0][2]), Rotation(yaw=-yaw))
        if self.callback is not None:
            self.callback(Measurement(tick.raw_data, tick.channel_counts, t, where))


class ActorList(list):
    def filter(self, pattern: str) -> list[Actor]:
        return [a for a in self if fnmatch.fnmatch(a.type_id, pattern)]


class BlueprintLibrary:
    def find(self, type_id: str) -> Blueprint:
        return Blueprint(type_id)


class StandInWorld:
    def __init__(self) -> None:
        self.embedded = World(street_scene(seed=4))
        self.settings = WorldSettings()
        self.weather = WeatherParameters(precipitation=40.0)
        self.actors = ActorList([Actor("vehicle.tesla.model3", {"role_name": "hero"})])
        self.t = 0.0

    def get_settings(self) -> WorldSettings:
        return WorldSettings(self.settings.synchronous_mode, self.settings.fixed_delta_seconds)

    def apply_settings(self, settings: WorldSettings) -> None:
        self.settings = WorldSettings(settings.synchronous_mode, settings.fixed_delta_seconds)

    def get_actors(self) -> ActorList:
        return self.actors

    def get_blueprint_library(self) -> BlueprintLibrary:
        return BlueprintLibrary()

    def spawn_actor(self, bp: Blueprint, transform: Transform, attach_to: Actor | None = None) -> Sensor:
        sensor = Sensor(bp, transform, self)
        self.actors.append(sensor)
        return sensor

    def get_weather(self) -> WeatherParameters:
        return self.weather

    def tick(self) -> int:
        assert self.settings.synchronous_mode and self.settings.fixed_delta_seconds
        dt = float(self.settings.fixed_delta_seconds)
        self.t += dt
        for actor in self.actors:
            if isinstance(actor, Sensor):
                actor.sweep(self.t, dt)
        return round(self.t / dt)


WORLDS: list[StandInWorld] = []


class Client:
    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)

    def set_timeout(self, seconds: float) -> None:
        self.timeout = seconds

    def get_world(self) -> StandInWorld:
        if not WORLDS:
            WORLDS.append(StandInWorld())
        return WORLDS[0]
