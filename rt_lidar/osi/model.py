"""rt-lidar as an OSI lidar sensor model: ``SensorView`` -> our physics -> ``SensorData``.

:class:`OsiLidarModel` takes each ``SensorView``'s first ``LidarSensorView`` (its reflections with the
view configuration's directions and timings, :mod:`rt_lidar.osi.reflections`), turns them into
:class:`~rt_lidar.pipeline.sources.Hits`, runs them through :class:`~rt_lidar.physics.model.SensorPhysics`
(detection from the SNR of the preset's receiver, range noise and walk, weather from the ground truth's
``environmental_conditions``, sub-ray waveforms and dual returns, the sensor's intensity scale) and writes
the returns as ``feature_data.lidar_sensor`` (:mod:`rt_lidar.osi.detections`).

Rays whose directions and timings are those of the preset's own firing schedule from the view's
timestamp (a view rt-lidar's ``osi-sensorview`` sink wrote, or one cast on our schedule) take that
schedule's exact firings (ring, time, direction, sub-ray bundle); any other raster is read as it is:
one pulse per ray, its ring the preset's beam nearest in elevation, its time the view's timing.
Frame ``k`` (the k-th view since the model started) draws from the random stream ``(seed, k)``, as the
frame loop's frame ``k`` does.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.osi.detections import fill_detections
from rt_lidar.osi.frames import interface_version, require_osi, timestamp_ns
from rt_lidar.osi.reflections import OSI_MATERIAL, ViewRays, read_view
from rt_lidar.osi.weather import conditions_to_weather
from rt_lidar.physics.model import PhysicsConfig, PhysicsResult, SensorPhysics
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.beam import BeamConfig, subray_directions
from rt_lidar.sensor.materials import MaterialArrays
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sensor.scan_pattern import Firings, firings_between

__all__ = ["OsiLidarModel", "StepResult", "osi_materials"]

_MATCH_TOL = 1e-6
"""Largest difference of a unit direction from our schedule's for a view to count as cast on it."""


def osi_materials() -> MaterialArrays:
    """The one material of reflections read from OSI: white and Lambertian, nothing else."""
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    return MaterialArrays((OSI_MATERIAL,), one, zero, one.copy(), zero.copy(), one.copy(), zero.copy())


@dataclasses.dataclass
class StepResult:
    """One frame of the model: the hits it read, what the physics made of them."""

    frame: int
    t0_ns: int
    hits: Hits
    result: PhysicsResult
    rays: ViewRays
    own_schedule: bool
    object_ids: np.ndarray
    """uint64 OSI object id of each compact segment number (index 0 = none)."""


class OsiLidarModel:
    """The sensor model of ``preset`` with the physics settings ``config`` (its weather, when set, wins
    over the views' environmental conditions) and the random seed ``seed``."""

    def __init__(
        self, preset: SensorPreset | str, config: PhysicsConfig | None = None, seed: int = 0
    ) -> None:
        require_osi()
        self.notes: list[str] = []
        """Everything taken on the user's behalf so far (each also said once as a warning)."""
        self.preset = preset if isinstance(preset, SensorPreset) else load_preset(preset)
        cfg = config or PhysicsConfig()
        if cfg.beam is None or not cfg.beam.epw:
            beam = cfg.beam or BeamConfig()
            cfg = dataclasses.replace(cfg, beam=dataclasses.replace(beam, epw=True))
        if cfg.sun_illuminance_lux > 0:
            self._warn("sunlight is not modelled from OSI views (no per-ray sun angles): sun_lux 0")
            cfg = dataclasses.replace(cfg, sun_illuminance_lux=0.0)
        self.fixed_weather = cfg.weather is not None
        self.physics = SensorPhysics(self.preset, osi_materials(), cfg)
        self.seed = int(seed)
        self.frame = 0
        self._weather: dict[str, float] | None = None
        self._caster: Any = None
        self.step_ns = 50_000_000
        """The frame a view without reflections covers (the FMU's communication step sets it)."""

    def _warn(self, text: str) -> None:
        """Say ``text`` once (a warning) and keep it in :attr:`notes`."""
        if text not in self.notes:
            self.notes.append(text)
            warnings.warn(text, stacklevel=3)

    def reset(self) -> None:
        """Start again at frame 0."""
        self.frame = 0

    def step_bytes(self, sensor_view: bytes) -> bytes:
        """One ``SensorView`` (serialized) in, one ``SensorData`` (serialized) out."""
        from osi3.osi_sensorview_pb2 import SensorView

        view = SensorView()
        try:
            view.ParseFromString(sensor_view)
        except Exception as exc:
            raise ConfigError(f"SensorView: not a valid osi3.SensorView message ({exc})") from None
        return self.step(view).SerializeToString()

    def step(self, sensor_view: Any) -> Any:
        """One ``osi3.SensorView`` in, one ``osi3.SensorData`` out."""
        from osi3.osi_sensordata_pb2 import SensorData

        out = SensorData()
        interface_version(out)
        out.timestamp.CopyFrom(sensor_view.timestamp)
        out.last_measurement_time.CopyFrom(sensor_view.timestamp)
        out.sensor_id.CopyFrom(sensor_view.sensor_id)
        if sensor_view.HasField("mounting_position"):
            out.mounting_position.CopyFrom(sensor_view.mounting_position)
        interface_version(out.feature_data)
        lidar = out.feature_data.lidar_sensor.add()
        if not sensor_view.lidar_sensor_view:
            if not sensor_view.global_ground_truth.moving_object:
                self._warn("a SensorView without lidar_sensor_view or ground truth: no detections")
                self.frame += 1
                return out
            sensor_view = self.cast_ground_truth(sensor_view)
        if len(sensor_view.lidar_sensor_view) > 1:
            self._warn("a SensorView with several lidar_sensor_view: the first is used")
        done = self.sense(sensor_view)
        fill_detections(lidar, done, self.physics, sensor_view)
        return out

    def cast_ground_truth(self, sensor_view: Any, step_ns: int | None = None) -> Any:
        """A copy of ``sensor_view`` with the ``LidarSensorView`` rt-lidar casts into its ground truth
        (:mod:`rt_lidar.osi.gt_cast`) over ``[timestamp, timestamp + step_ns)`` (default :attr:`step_ns`)."""
        from rt_lidar.osi.gt_cast import GroundTruthCaster

        if self._caster is None:
            self._caster = GroundTruthCaster(self.preset, self.physics.sub_rays)
            self._warn(
                "a SensorView without lidar_sensor_view: rt-lidar casts its rays into the ground truth's "
                "bounding boxes on a flat ground (docs/osi.md)"
            )
        view = type(sensor_view)()
        view.CopyFrom(sensor_view)
        t0 = timestamp_ns(view.timestamp)
        self._caster.fill(view.lidar_sensor_view.add(), view, t0 + int(step_ns or self.step_ns))
        return view

    def sense(self, sensor_view: Any) -> StepResult:
        """The hits of a view's first ``LidarSensorView`` and their physics (frame :attr:`frame`)."""
        t0 = timestamp_ns(sensor_view.timestamp)
        self._follow_weather(sensor_view)
        rays = read_view(sensor_view.lidar_sensor_view[0])
        hits, own, ids = self._hits(rays, t0)
        k = self.frame
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, k])))
        result = self.physics.apply(hits, rng)
        self.frame += 1
        return StepResult(k, t0, hits, result, rays, own, ids)

    def _follow_weather(self, sensor_view: Any) -> None:
        if self.fixed_weather:
            return
        gt = sensor_view.global_ground_truth
        weather: dict[str, float] | None = None
        if sensor_view.HasField("global_ground_truth") and gt.HasField("environmental_conditions"):
            weather, notes = conditions_to_weather(gt.environmental_conditions)
            for note in notes:
                self._warn(f"environmental_conditions: {note}")
        if weather != self._weather:
            self.physics.set_weather(weather)
            self._weather = weather

    def _own_firings(self, rays: ViewRays, t0: int) -> Firings | None:
        """Our schedule's firings of the view's rays, when the view was cast on it (else None)."""
        n_sub = self.physics.sub_rays
        n = rays.direction.shape[0]
        if n == 0 or n % n_sub:
            return None
        pulses = n // n_sub
        t_end = t0 + int(rays.timing_us.max()) * 1000 + 1000
        got = firings_between(self.preset, t0, t_end)
        if len(got) < pulses:
            return None
        f = Firings(
            got.ring[:pulses],
            got.t_ns[:pulses],
            got.azimuth_deg[:pulses],
            got.elevation_deg[:pulses],
            got.column[:pulses],
            None if got.unit is None else got.unit[:pulses],
        )
        d = f.directions() if n_sub == 1 else subray_directions(f.directions(), self.physics.pattern)
        t_ray = np.repeat(f.t_ns, n_sub)
        if not np.array_equal(np.round((t_ray - t0) / 1000.0).astype(np.int64), rays.timing_us):
            return None
        if float(np.abs(d.astype(np.float64) - rays.direction).max()) > _MATCH_TOL:
            return None
        return f

    def _view_firings(self, rays: ViewRays, t0: int) -> Firings:
        """One pulse per ray of a raster that is not our schedule."""
        d = rays.direction
        n = d.shape[0]
        el = np.degrees(np.arcsin(np.clip(d[:, 2], -1.0, 1.0)))
        az = np.degrees(np.arctan2(d[:, 1], d[:, 0]))
        rings = np.argmin(np.abs(el[:, None] - self.preset.elevations_deg[None, :]), axis=1)
        t = t0 + rays.timing_us * 1000
        order = np.argsort(t, kind="stable")
        # rays of one timing are spaced 1 ns apart (within OSI's microseconds), so each has its own time
        rank = np.empty(n, np.int64)
        if n:
            ts = t[order]
            start = np.r_[0, np.flatnonzero(np.diff(ts)) + 1]
            rank[order] = np.arange(n) - np.repeat(start, np.diff(np.r_[start, n]))
        return Firings(
            rings.astype(np.uint16),
            (t + rank).astype(np.int64),
            az,
            el,
            np.arange(n, dtype=np.int64),
            d.astype(np.float32),
        )

    def _hits(self, rays: ViewRays, t0: int) -> tuple[Hits, bool, np.ndarray]:
        firings = self._own_firings(rays, t0)
        own = firings is not None
        n_sub = self.physics.sub_rays if own else 1
        if firings is None:
            if self.physics.sub_rays > 1:
                self._warn(
                    f"the view's rays are not {self.preset.name}'s schedule: one ray a pulse "
                    f"(not {self.physics.sub_rays} sub-rays)"
                )
            firings = self._view_firings(rays, t0)
            direction = firings.directions()
        else:
            direction = firings.directions()
            if n_sub > 1:
                direction = subray_directions(direction, self.physics.pattern)
        n = rays.direction.shape[0]
        hit = rays.hit
        range_m = np.where(hit, rays.range_m, np.inf).astype(np.float32)
        unit = self.physics.unit_power(np.where(hit, range_m, np.float32(1.0))).astype(np.float64)
        scale = np.where(
            hit, rays.power_ratio * self.preset.pulse.peak_power_w / np.maximum(unit, 1e-300), 1.0
        )
        ids, compact = np.unique(rays.object_id, return_inverse=True)
        # compact segment numbers: 0 = no object, 1.. = the view's object ids in order
        ids_no = ids != np.uint64(2**64 - 1)
        seg_of = np.zeros(ids.size, np.uint32)
        seg_of[ids_no] = np.arange(1, int(ids_no.sum()) + 1, dtype=np.uint32)
        segment = np.where(hit, seg_of[compact.reshape(n)], 0).astype(np.uint32)
        object_ids = np.concatenate([[np.uint64(2**64 - 1)], ids[ids_no]]).astype(np.uint64)
        zeros = np.zeros(n, np.float32)
        t1 = int(firings.t_ns.max()) + 1 if len(firings) else t0
        hits = Hits(
            firings=firings,
            direction=direction,
            range_m=range_m,
            cos_incidence=np.where(hit, np.float32(1), np.float32(0)).astype(np.float32),
            material=np.where(hit, 0, -1).astype(np.int16),
            segment=segment,
            glass_range_m=np.full(n, np.inf, np.float32),
            glass_cos=zeros,
            glass_material=np.full(n, -1, np.int16),
            glass_segment=np.zeros(n, np.uint32),
            glass_transmission=scale.astype(np.float32),
            interval=(t0, t1),
            subrays=n_sub,
            subray_weight=self.physics.pattern.weights if n_sub > 1 else None,
        )
        return hits, own, object_ids
