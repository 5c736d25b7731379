"""The controller: pull each frame's hits from an AirSim-compatible server and run the pipeline on them.

``rt-lidar run --airsim HOST:PORT`` drives a real AirSim / Cosys-AirSim in Unreal or our embedded
server (``rt-lidar serve``) through the same calls. With the extension ``rtLidarGetHits`` (our server)
every ray arrives with ring, firing time, incidence, material and glass; against stock AirSim the
controller recovers them from ``getLidarData`` (:mod:`rt_lidar.bridge.recover`). A beam of several sub-rays
(``--sub-rays N``) is asked for with ``rtLidarGetBeamHits``: the server casts every firing as the
bundle and the physics sums its echoes as in-process; a server without that call gets one ray a pulse.
Sunlight (``--sun-lux``) goes the same way: the call names the sun (the scenario's direction, or the
server's scene sun) and the server adds every ray's sun cosines, so the ambient light acts as
in-process; against a server without it sunlight is not applied (a warning says so).

Lockstep (``--lockstep``): the sim is paused and advanced by ``simContinueForTime`` one sim frame at a
time, and each answer's firings are checked against the local schedule, so a skipped or repeated
sector is detected and counted. Free run: the controller follows the sim's clock and takes whatever
the sim swept since the previous read.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from rt_lidar.bridge.hits import hits_from_wire
from rt_lidar.bridge.recover import recover_hits
from rt_lidar.cli.beam import SunConfig
from rt_lidar.errors import RtLidarError
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.pipeline.sources import Hits, sun_unit
from rt_lidar.sensor.beam import BeamConfig, SubRayPattern
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import Firings, firings_between
from unreal_bridge import AirSimClient, RpcError
from unreal_bridge.beam_call import SCENE_SUN, SunArg

__all__ = ["BridgeSource", "BridgeStats", "bridge_pipeline", "parse_address"]


def parse_address(addr: str, default_port: int = 41451) -> tuple[str, int]:
    """``"HOST:PORT"`` (or ``"HOST"``) -> ``(host, port)``."""
    host, sep, port = addr.rpartition(":")
    if not sep:
        return addr, default_port
    try:
        p = int(port)
    except ValueError:
        raise RtLidarError(f"--airsim '{addr}': port '{port}' is not a number") from None
    if not 0 < p < 65536:
        raise RtLidarError(f"--airsim '{addr}': port must be in 1..65535")
    return host or "127.0.0.1", p


@dataclass
class BridgeStats:
    """What the controller saw of the server."""

    frames: int = 0
    sector_mismatches: int = 0
    """Lockstep answers whose firings differ from the local schedule (skipped or repeated rays)."""
    extension: bool = False
    sub_rays: int = 1
    """Rays the server casts per pulse (> 1 once :meth:`BridgeSource.use_beam` was granted)."""
    sun: bool = False
    """The server reports every ray's sun cosines (a sun granted by :meth:`BridgeSource.use_beam`)."""
    sun_direction: tuple[float, float, float] | None = None
    """The world direction towards the sun the server casts with (its ``info.sun_direction``)."""
    server_skipped_ns: int = 0
    last_weather: dict[str, float] | None = None
    fetch_s: float = 0.0
    mismatch_detail: list[str] = field(default_factory=list)

    def as_dict(self, server: str) -> dict[str, object]:
        """The figures for a run's summary.json."""
        return {
            "server": server,
            "extension": self.extension,
            "sub_rays": self.sub_rays,
            "sun": self.sun,
            "sun_direction": self.sun_direction,
            "frames": self.frames,
            "sector_mismatches": self.sector_mismatches,
            "mismatch_detail": self.mismatch_detail,
            "fetch_time_s": self.fetch_s,
        }


class BridgeSource:
    """A :class:`~rt_lidar.pipeline.sources.HitSource` pulling each sim frame's hits over the bridge."""

    def __init__(
        self,
        client: AirSimClient,
        preset: SensorPreset,
        *,
        lockstep: bool = True,
        sim_hz: float = 20.0,
        lidar_name: str = "",
        vehicle_name: str = "",
        material_map: Mapping[int, str] | None = None,
        use_extension: bool | None = None,
        advance_clock: bool = True,
    ) -> None:
        self.client = client
        self.advance_clock = advance_clock
        """Lockstep: this source advances the sim each frame (a rig's other lidars read the same frame)."""
        self.preset = preset
        self.lockstep = lockstep
        self.sim_hz = sim_hz
        self.lidar_name = lidar_name
        self.vehicle_name = vehicle_name
        self.stats = BridgeStats()
        self._origin_ns: int | None = None
        self._last_ns: int | None = None
        self._last_wall = time.perf_counter()
        self._pose: tuple[np.ndarray, np.ndarray] = (np.zeros(3), np.array([1.0, 0, 0, 0]))
        self._material_names: list[str] = []
        self._beam: SubRayPattern | None = None
        self._sun: SunArg = None
        self.on_weather: Callable[[dict[str, float] | None], None] | None = None
        """Called with the server's weather (``info.weather``) whenever it changes."""
        if not lockstep:
            client.sim_pause(False)  # free run follows a running sim (a previous lockstep run left it paused)
        self.stats.extension = self._probe_extension() if use_extension is None else use_extension
        if not self.stats.extension:
            if lockstep:
                self.client.sim_pause(True)
            first = self.client.get_lidar_data(lidar_name, vehicle_name)  # starts the time origin
            self._origin_ns = self._last_ns = int(first.time_stamp)
        if not self._material_names:
            self._material_names = load_material_table().names
        names = self._material_names
        default = names.index("concrete") if "concrete" in names else 0
        self._default_material = default
        self._segment_material = {
            int(k): names.index(v) for k, v in (material_map or {}).items() if v in names
        }
        unknown = sorted({v for v in (material_map or {}).values() if v not in names})
        if unknown:
            raise RtLidarError(f"material map names unknown materials: {', '.join(unknown)}")

    def _probe_extension(self) -> bool:
        """Ask for the extension once; also starts the time origin (an empty or tiny first sweep)."""
        if self.lockstep:
            self.client.sim_pause(True)
        try:
            answer = self.client.rt_lidar_get_hits(self.lidar_name, self.vehicle_name)
        except RpcError:
            return False
        self._material_names = list(answer.info.get("materials", []))
        self._origin_ns = int(answer.info.get("t1_ns", answer.time_stamp))
        self._last_ns = self._origin_ns
        return "direction" in answer.extras

    def use_beam(self, pattern: SubRayPattern, sun: SunArg = None) -> bool:
        """Ask the server to cast every firing as ``pattern``'s sub-ray bundle (``rtLidarGetBeamHits``)
        from the next frame on, with every ray's sun cosines when ``sun`` names the sun (a world-frame
        unit vector towards it, or ``"scene"`` for the server's scene sun); call it before the first
        frame. Returns False, and the source stays at one ray a pulse, when a bundle of several rays is
        asked for and the server does not offer the call (stock AirSim, an older server). Whether the
        sun was granted is :attr:`BridgeStats.sun` (False without the call, or from a server that
        predates the sun entry and answers without the cosines).

        The first call is the probe: in lockstep it sweeps nothing (the sim is paused); in free run it
        restarts the time origin after the rays it swept.
        """
        self._beam, self._sun, self.stats.sub_rays, self.stats.sun = None, None, 1, False
        self.stats.sun_direction = None
        if len(pattern) == 1 and sun is None:
            return True
        if not self.stats.extension:
            return len(pattern) == 1
        try:  # always with the sub-ray entry: a server older than the sun entry needs it (and ignores sun)
            answer = self.client.rt_lidar_get_beam_hits(
                self.lidar_name, self.vehicle_name, pattern.offsets_rad, pattern.weights, sun
            )
        except RpcError as exc:
            if exc.unbound:
                return len(pattern) == 1
            what = f"{len(pattern)} sub-rays a pulse" + (" with a sun" if sun is not None else "")
            raise RtLidarError(f"the server refused {what}: {exc.error}") from exc
        self._origin_ns = self._last_ns = int(answer.info.get("t1_ns", answer.time_stamp))
        granted = sun is not None and "sun_cos" in answer.extras and "beam_sun_cos" in answer.extras
        if granted or len(pattern) > 1:  # else nothing rtLidarGetHits does not give: stay with it
            self._beam, self.stats.sub_rays = pattern, len(pattern)
        if granted:
            self._sun, self.stats.sun = sun, True
            if "sun_direction" in answer.info:
                x, y, z = answer.info["sun_direction"]
                self.stats.sun_direction = (float(x), float(y), float(z))
        return True

    @property
    def start_ns(self) -> int:
        """Sim time at which the controller took over: frame 0 of its pipeline starts here."""
        return int(self._origin_ns or 0)

    @property
    def material_names(self) -> list[str]:
        """Material names the hits' material numbers index (the server's, or the packaged table's)."""
        return self._material_names

    def sensor_pose(self, t_s: float) -> tuple[np.ndarray, np.ndarray]:
        """The sensor pose of the latest answer (the bridge reports one pose per answer)."""
        return self._pose

    def _fetch_extension(self) -> tuple[Hits, int, int]:
        if self._beam is None:
            ans = self.client.rt_lidar_get_hits(self.lidar_name, self.vehicle_name)
        else:
            b = self._beam
            ans = self.client.rt_lidar_get_beam_hits(
                self.lidar_name, self.vehicle_name, b.offsets_rad, b.weights, self._sun
            )
        t0 = int(ans.info.get("t0_ns", self._last_ns or 0))
        t1 = int(ans.info.get("t1_ns", ans.time_stamp))
        if self._origin_ns is None:
            self._origin_ns = t0
        weather = ans.info.get("weather")
        if weather != self.stats.last_weather and self.on_weather is not None:
            self.on_weather(weather)
        self.stats.last_weather = weather
        self._pose = (np.asarray(ans.pose.position, float), np.asarray(ans.pose.orientation, float))
        return hits_from_wire(ans), t0, t1

    def _fetch_stock(self, local: Firings | None) -> tuple[Hits, int, int]:
        frame = self.client.get_lidar_data(self.lidar_name, self.vehicle_name)
        t1 = int(frame.time_stamp)
        if self._origin_ns is None:
            self._origin_ns = t1
        t0 = self._last_ns if self._last_ns is not None else t1
        self._pose = (np.asarray(frame.pose.position, float), np.asarray(frame.pose.orientation, float))
        if local is None:
            local = firings_between(self.preset, t0, t1)
        hits = recover_hits(
            frame.points,
            frame.segmentation,
            local,
            self.preset,
            self._segment_material,
            self._default_material,
        )
        return hits, t0, t1

    def hits(self, firings: Firings, t0_ns: int, t1_ns: int) -> Hits:
        """The hits of sim frame ``[t0_ns, t1_ns)``: lockstep advances the sim by exactly that frame and
        checks the answer against ``firings``; free run waits one frame of wall time and takes what the
        sim swept. (The pipeline's ``prefetch`` overlaps this call with the previous frame's physics.)
        """
        t_wall = time.perf_counter()
        if self.lockstep and self.advance_clock:
            self.client.sim_continue_for_time((t1_ns - t0_ns) * 1e-9)
        else:
            wait = 1.0 / self.sim_hz - (t_wall - self._last_wall)
            if wait > 0:
                time.sleep(wait)
            self._last_wall = time.perf_counter()
        if self.stats.extension:
            hits, s0, s1 = self._fetch_extension()
        else:
            hits, s0, s1 = self._fetch_stock(firings if self.lockstep else None)
        self._last_ns = s1
        self.stats.frames += 1
        self.stats.fetch_s += time.perf_counter() - t_wall
        if self.lockstep:
            self._check_sector(firings, hits, t0_ns, t1_ns, s0, s1)
            return hits
        hits.interval = (s0, s1)
        return hits

    def _check_sector(self, local: Firings, got: Hits, t0: int, t1: int, s0: int, s1: int) -> None:
        same = (s0, s1) == (t0, t1) and len(local) == len(got.firings)
        if same and self.stats.extension:
            same = bool(
                np.array_equal(local.t_ns, got.firings.t_ns) and np.array_equal(local.ring, got.firings.ring)
            )
        if not same:
            self.stats.sector_mismatches += 1
            if len(self.stats.mismatch_detail) < 5:
                self.stats.mismatch_detail.append(
                    f"frame [{t0}, {t1}) ns: server swept [{s0}, {s1}) with {len(got.firings)} rays, "
                    f"expected {len(local)}"
                )


def bridge_pipeline(
    source: BridgeSource,
    sim_hz: float,
    seed: int = 0,
    weather: WeatherConfig | None = None,
    beam: BeamConfig | None = None,
    sun: SunConfig | None = None,
) -> Pipeline:
    """The pipeline over ``source``, starting at the sim time the controller took over, with prefetch.

    With no ``weather`` given the physics follows the server's (``simSetWeatherParameter``). A beam of
    several sub-rays (``beam`` or the preset's) is cast by the server as bundles when it offers
    ``rtLidarGetBeamHits``; otherwise as its central ray, with a warning. Sunlight (``sun``) is cast
    the same way, for the direction the in-process pipeline takes (the scenario's, else the scene's:
    then the server's own); a server without the sun entry gets no sunlight, with a warning.
    """
    config = PhysicsConfig(
        weather=weather,
        beam=beam,
        sun_illuminance_lux=sun.lux if sun is not None else 0.0,
        sun_direction=sun.direction if sun is not None else None,
    )
    physics = SensorPhysics.from_preset(source.preset, source.material_names, config=config)
    want_sun: SunArg = None
    if physics.needs_sun:
        want_sun = SCENE_SUN if config.sun_direction is None else sun_unit(config.sun_direction)
    if (physics.sub_rays > 1 or want_sun is not None) and not source.use_beam(physics.pattern, want_sun):
        warnings.warn(
            f"the AirSim server offers no rtLidarGetBeamHits (stock AirSim, an older server, or "
            f"--no-extension), so it sends one ray per pulse: {physics.sub_rays} sub-rays (--sub-rays / "
            "the preset's) are not applied (return modes and echo pulse width are)",
            stacklevel=2,
        )
    if want_sun is not None and not source.stats.sun:
        warnings.warn(
            "sunlight needs every ray's sun cosines, which this AirSim server does not send (stock "
            "AirSim, an older server, or --no-extension: our rt-lidar serve answers rtLidarGetBeamHits "
            "with a sun): --sun-lux is not applied over this bridge (or use rt-lidar demo --in-process)",
            stacklevel=2,
        )
        physics.config = dataclasses.replace(physics.config, sun_illuminance_lux=0.0)
    if weather is None:
        source.on_weather = physics.set_weather
    return Pipeline(
        source.preset, source, physics, sim_hz=sim_hz, seed=seed, start_ns=source.start_ns, prefetch=True
    )
