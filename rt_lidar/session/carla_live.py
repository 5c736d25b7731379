"""``rt-lidar run --carla HOST:PORT``: the sensor model on a live CARLA server's semantic lidar.

Assumes (docs/simulators.md): a CARLA server (0.9.14 or later, or give the tag table's version) with an
ego vehicle whose ``role_name`` is ``--carla-role`` (default ``hero``); the run puts the world in
synchronous mode with ``fixed_delta_seconds`` = 1 / ``--sim-hz`` (and restores the settings at the
end), spawns a ``sensor.lidar.ray_cast_semantic`` set up from the preset
(:class:`~rt_lidar.bridge.carla.CarlaLidarSetup`) at the preset's mount height on the ego, or attaches
to a semantic lidar already there whose ``role_name`` is ``--carla-sensor``, and ticks the world once a
sim frame. Each tick's measurement becomes the frame's hits (:func:`~rt_lidar.bridge.carla.hits_from_carla`),
with CARLA's weather (precipitation, fog density, wetness) as the physics' weather and the sensor's
transforms as the frame's poses. Nothing here can run without a CARLA server; the conversion is tested
on buffers laid out as the ``carla`` package documents them.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.bridge.carla import (
    CarlaLidarSetup,
    carla_rotation_to_quaternion,
    carla_tag_materials,
    carla_weather_to_config,
    decode_semantic_lidar,
    hits_from_carla,
    next_sector_azimuth,
    phase_start_ns,
    weather_fields,
)
from rt_lidar.bridge.source import parse_address
from rt_lidar.config import RunConfig, plain, write_run_config, write_summary
from rt_lidar.errors import RtLidarError
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import negotiate
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.pipeline.scan_loop import drive_scans
from rt_lidar.pipeline.sources import BeamGrant, Capabilities, Hits, Pose
from rt_lidar.sensor.beam import SubRayPattern
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sensor.scan_pattern import Firings

__all__ = ["CARLA_EXTRA", "CarlaSource", "carla_pipeline", "carla_scans", "import_carla", "run_carla"]

CARLA_EXTRA = "pip install 'rt-lidar[carla]'"
SENSOR_HEIGHT_M = 1.8
"""Where a spawned lidar sits above the ego's origin (the embedded street's mount)."""


def import_carla() -> Any:
    """The ``carla`` module, or a one-line error naming the extra that installs it."""
    try:
        import carla
    except ImportError:
        raise RtLidarError(f"rt-lidar run --carla needs CARLA's Python client: {CARLA_EXTRA}") from None
    return carla


def _pose(transform: Any) -> Pose:
    loc, rot = transform.location, transform.rotation
    return (
        np.array([loc.x, -loc.y, loc.z], float),  # Unreal's left-handed axes to the project's
        carla_rotation_to_quaternion(rot.roll, rot.pitch, rot.yaw),
    )


class CarlaSource:
    """A :class:`~rt_lidar.pipeline.sources.HitSource` ticking a synchronous CARLA world."""

    capabilities = Capabilities(sub_rays=False, sun=False, weather=True, extension=False)

    def __init__(
        self,
        client: Any,
        preset: SensorPreset,
        sim_hz: float,
        role: str = "hero",
        sensor_role: str | None = None,
        tags_version: str = "0.9.14",
        timeout_s: float = 10.0,
    ) -> None:
        carla = import_carla()
        self.preset, self.sim_hz, self.timeout_s = preset, sim_hz, timeout_s
        self.world = client.get_world()
        self._settings = self.world.get_settings()
        settings = self.world.get_settings()
        settings.synchronous_mode = True
        settings.fixed_delta_seconds = 1.0 / sim_hz
        self.world.apply_settings(settings)
        self.setup = CarlaLidarSetup.of_preset(preset)
        self._names = load_material_table().names
        self._tags = carla_tag_materials(self._names, tags_version)
        actors = self.world.get_actors()
        self._spawned = False
        if sensor_role is not None:
            found = [
                a
                for a in actors.filter("sensor.lidar.ray_cast_semantic")
                if a.attributes.get("role_name") == sensor_role
            ]
            if not found:
                raise RtLidarError(
                    f"no sensor.lidar.ray_cast_semantic with role_name '{sensor_role}' in the world"
                )
            self.sensor = found[0]
        else:
            egos = [a for a in actors.filter("vehicle.*") if a.attributes.get("role_name") == role]
            if not egos:
                raise RtLidarError(f"no vehicle with role_name '{role}' in the CARLA world (--carla-role)")
            bp = self.world.get_blueprint_library().find("sensor.lidar.ray_cast_semantic")
            for key, value in self.setup.attributes().items():
                bp.set_attribute(key, value)
            mount = carla.Transform(carla.Location(z=SENSOR_HEIGHT_M))
            self.sensor = self.world.spawn_actor(bp, mount, attach_to=egos[0])
            self._spawned = True
        self._closed = False
        self._queue: queue.Queue[Any] = queue.Queue()
        self.sensor.listen(self._queue.put)
        self.world.tick()
        first = self._next()
        sweep = decode_semantic_lidar(
            first.raw_data, [first.get_point_count(c) for c in range(first.channels)]
        )
        where = next_sector_azimuth(sweep, self.setup, 1.0 / sim_hz)
        self.start_ns = 0 if where is None else phase_start_ns(preset, where)
        """The frame loop's time origin: the schedule's phase at which it fires where CARLA's next tick
        sweeps (the firing times are the preset's, not CARLA's clock)."""
        self._pose = _pose(first.transform)

    @property
    def material_names(self) -> list[str]:
        """The material table's names (the tags' materials index it)."""
        return list(self._names)

    def use_beam(self, pattern: SubRayPattern, sun: Any = None) -> BeamGrant:
        """One ray a pulse, no sun: a semantic lidar casts single rays."""
        return BeamGrant(1, False)

    def _next(self) -> Any:
        try:
            return self._queue.get(timeout=self.timeout_s)
        except queue.Empty:
            raise RtLidarError(f"no semantic lidar measurement within {self.timeout_s} s of a tick") from None

    def hits(self, firings: Firings, t0_ns: int, t1_ns: int) -> Hits:
        """Tick the world once and turn the measurement into the frame's hits."""
        self.world.tick()
        m = self._next()
        sweep = decode_semantic_lidar(m.raw_data, [m.get_point_count(c) for c in range(m.channels)])
        hits = hits_from_carla(sweep, firings, self.preset, self.setup, self._tags)
        w = self.world.get_weather()
        hits.weather = weather_fields(
            carla_weather_to_config(w.precipitation, w.fog_density, w.wetness, w.precipitation_deposits)
        )
        hits.pose_start, self._pose = self._pose, _pose(m.transform)
        hits.pose_end = self._pose
        return hits

    def close(self) -> None:
        """Stop listening, remove a spawned sensor, give the world its settings back (once)."""
        if self._closed:
            return
        self._closed = True
        self.sensor.stop()
        if self._spawned:
            self.sensor.destroy()
        self.world.apply_settings(self._settings)


def carla_pipeline(
    address: str,
    preset: SensorPreset,
    sim_hz: float,
    *,
    seed: int = 0,
    physics: PhysicsConfig | None = None,
    role: str = "hero",
    sensor_role: str | None = None,
    timeout_s: float = 30.0,
) -> tuple[Pipeline, CarlaSource]:
    """The pipeline over a live CARLA server's semantic lidar (closing the pipeline closes the source:
    the sensor stops, a spawned one goes, the world gets its settings back)."""
    carla = import_carla()
    host, port = parse_address(address, default_port=2000)
    client = carla.Client(host, port)
    client.set_timeout(timeout_s)
    source = CarlaSource(client, preset, sim_hz, role, sensor_role)
    try:
        config = negotiate(source, preset, physics or PhysicsConfig())
        sensor = SensorPhysics.from_preset(preset, source.material_names, config=config)
        return Pipeline(preset, source, sensor, sim_hz=sim_hz, seed=seed, start_ns=source.start_ns), source
    except BaseException:
        source.close()
        raise


def carla_scans(
    address: str = "127.0.0.1:2000",
    preset: str | SensorPreset = "VLP-16",
    *,
    scans: int = 10,
    sim_hz: float = 20.0,
    seed: int = 0,
    role: str = "hero",
    sensor_role: str | None = None,
) -> Iterator[Scan]:
    """Yield ``scans`` scans of ``preset`` from a live CARLA server (the Python side of
    ``rt-lidar run --carla``)."""
    sensor = load_preset(preset) if isinstance(preset, str) else preset
    pipe, _ = carla_pipeline(address, sensor, sim_hz, seed=seed, role=role, sensor_role=sensor_role)
    done = 0
    try:
        while done < scans:
            for scan in pipe.step():
                yield scan
                done += 1
                if done >= scans:
                    break
    finally:
        pipe.close()


def run_carla(
    opts: RunConfig, address: str, role: str = "hero", sensor_role: str | None = None
) -> dict[str, Any]:
    """Write ``opts.frames`` scans from a live CARLA server (see the module's docstring)."""
    preset = load_preset(opts.preset)
    t0 = time.perf_counter()
    pipe, source = carla_pipeline(
        address,
        preset,
        opts.sim_hz,
        seed=opts.seed,
        physics=PhysicsConfig(weather=opts.weather, beam=opts.beam),
        role=role,
        sensor_role=sensor_role,
        timeout_s=opts.bridge.timeout_s,
    )
    out = Path(opts.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        ran = opts.resolved(pipe.physics.config)
        write_run_config(out, ran, preset)
        result = drive_scans(
            pipe, preset, opts.frames, out, opts.sinks, {"run": plain(ran)}, opts.progress, True
        )
    finally:
        pipe.close()
    summary = dict(result.summary)
    summary["carla"] = {
        "server": address,
        "setup": source.setup.attributes(),
        "vertical_error_deg": source.setup.vertical_error_deg(preset),
        "horizontal_step_deg": source.setup.horizontal_step_deg(),
        "wall_time_s": time.perf_counter() - t0,
    }
    write_summary(out, summary)
    return summary
