"""The embedded world as an AirSim simulation: the backend ``rt-lidar serve`` puts behind the RPC server.

:class:`EmbeddedSim` implements :class:`rt_lidar.unreal_bridge.SimBackend`. It keeps a sim clock (paused, free
running at wall-clock speed, or advanced in lockstep by ``simContinueForTime``), sweeps the lidar's
firing schedule over the time that passed since the previous read, casts those rays into the world and
answers ``getLidarData`` (AirSim's xyz + segmentation of the hits, sensor frame) and the extension
``rtLidarGetHits`` (every ray, hits and misses, with the fields the physics needs; with
``rtLidarGetBeamHits`` every firing as the sub-ray bundle the caller sends, and the per-ray sun cosines
for the sun it names or the scene's). Consecutive answers tile the time line: no firing is skipped or
sent twice, as long as the reader keeps up (a backlog longer than ``max_backlog_s`` is cut, and counted
in :attr:`EmbeddedSim.skipped_ns`). Each lidar read comes in two steps (``prepare_lidar_*``): the
interval and a frozen view of the world (vehicle, segment ids, weather) are taken at once, under the
server's call lock; the cast then runs outside it and answers as the world was at the call.
"""

from __future__ import annotations

import io
import json
import math
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from rt_lidar.bridge.airsim_settings import airsim_lidar_settings, airsim_settings_json
from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.sources import WorldSource, sun_unit
from rt_lidar.sensor.beam import SubRayPattern, exit_m_per_rad, pattern_from_offsets
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import Firings, firings_between, prepare_schedule, schedule_digest
from rt_lidar.server.lidar_reads import DataRead, FullBeamRead, HitsRead, SimLidar
from rt_lidar.server.unreal_names import unreal_actor_names
from rt_lidar.server.vehicle import BicycleModel
from rt_lidar.unreal_bridge import (
    CarControls,
    FluCarState,
    FluImage,
    FluPose,
    ImageRequest,
    LidarFrame,
    LidarHits,
)
from rt_lidar.unreal_bridge.beam_call import FullBeamRequest, SunRequest
from rt_lidar.unreal_bridge.errors import BackendError
from rt_lidar.unreal_bridge.wire import FluKinematics
from rt_lidar.unreal_bridge.world import CameraSpec, Pose, World

__all__ = ["IMAGE_TYPES", "MAX_RAYS_PER_CALL", "EmbeddedSim"]

IMAGE_TYPES = {0: "Scene", 1: "DepthPlanar", 2: "DepthPerspective", 3: "DepthVis", 5: "Segmentation"}
"""AirSim ``ImageType`` values the embedded camera renders."""

MAX_RAYS_PER_CALL = 500_000
"""Rays one lidar answer may cast by default (firings x sub-rays); an older backlog is cut, as
``max_backlog_s``. The cast runs outside the server's call lock (``prepare_*``: the lock is held
only to take the interval and a frozen view of the world), heavy casts one at a time: on two shared
cores 500 k rays take 0.6-2 s, 1 M sub-rays 4-5 s and ~350 MB, 4 M 12 s and 1.4 GB. A frame of an
HDL-64E at 20 Hz with 7 sub-rays is ~470 k; heavier sub-ray bundles want ``serve --max-rays``."""
_FRAME_NS = 10_000_000  # one "frame" of simContinueForFrames: 100 Hz physics, as AirSim's default


def _flu(pose: Pose) -> FluPose:
    p, q = pose.position, pose.rotation
    return FluPose(
        (float(p[0]), float(p[1]), float(p[2])), (float(q[0]), float(q[1]), float(q[2]), float(q[3]))
    )


class EmbeddedSim:
    """One vehicle with one lidar (or a rig's lidars, ``more_lidars``) and one camera in an embedded
    :class:`World`."""

    def __init__(
        self,
        world: World,
        preset: SensorPreset,
        *,
        lidar_name: str = "Lidar1",
        vehicle_name: str = "Car1",
        camera: CameraSpec | None = None,
        paused: bool = False,
        max_backlog_s: float = 1.0,
        max_rays_per_call: int = MAX_RAYS_PER_CALL,
        mount: Pose | None = None,
        more_lidars: Sequence[tuple[str, SensorPreset, Pose]] = (),
        cast_threads: int | None = None,
    ) -> None:
        self.world = world
        self.preset = preset
        self.lidar_name = lidar_name
        self.vehicle_name = vehicle_name
        self.camera = camera or CameraSpec()
        self.max_backlog_ns = int(max_backlog_s * 1e9)
        if max_rays_per_call < 1:
            raise ValueError(f"max_rays_per_call must be >= 1, got {max_rays_per_call}")
        self.max_rays_per_call = max_rays_per_call
        table = load_material_table()
        self._transmission = table.arrays(world.material_names, preset.optics.wavelength_nm).transmission
        self.source = WorldSource(
            world, preset.range.max_m, self._transmission, exit_m_per_rad(preset), mount=mount
        )
        self._lock = threading.RLock()
        self._retro_gain: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}  # and volume flags
        self._t_ns = 0
        self._paused = paused
        self._wall_ref = time.perf_counter_ns()
        first = SimLidar(lidar_name, preset, self.source)
        self._lidars: dict[str, SimLidar] = {lidar_name: first}
        """Every lidar by name (a rig's: ``rt-lidar serve --rig``), each with its own cursors."""
        for name, p, m in more_lidars:
            if name in self._lidars:
                raise ConfigError(f"EmbeddedSim: duplicate lidar name {name!r}")
            trans = table.arrays(world.material_names, p.optics.wavelength_nm).transmission
            self._lidars[name] = SimLidar(
                name, p, WorldSource(world, p.range.max_m, trans, exit_m_per_rad(p), mount=m)
            )
        for lidar in self._lidars.values():
            # None: a large cast split over two threads; 1: each cast on one thread (a server sharing
            # its cores with its client, that casts two frames asked ahead at once)
            lidar.source.cast_threads = cast_threads
            prepare_schedule(lidar.preset)  # the scan's firing table now, not in the first answer
        self._cursors = first.cursors
        self._frames = first.frames
        self.skipped_ns = 0
        self.controls = CarControls()
        self._scripted_ego = world.scene.ego
        self.vehicle: BicycleModel | None = None
        """The driven ego, once ``setCarControls`` or ``simSetVehiclePose`` took it off its script."""
        self.weather: dict[int, float] = {}
        self.weather_enabled = False
        self.actor_names = unreal_actor_names(world.objects)
        """Each object's name as an Unreal level would give it (what ``simListSceneObjects`` lists)."""
        self._by_actor = {actor: name for name, actor in self.actor_names.items()}

    def world_name(self, name: str) -> str | None:
        """The world's object of an actor name (or of the world's own name), None when unknown."""
        if name in self._by_actor:
            return self._by_actor[name]
        return name if name in self.actor_names else None

    # -- clock -----------------------------------------------------------------------------------
    def now_ns(self) -> int:
        """Current sim time in ns."""
        with self._lock:
            if self._paused:
                return self._t_ns
            return self._t_ns + (time.perf_counter_ns() - self._wall_ref)

    def _sync(self) -> None:
        self._t_ns = self.now_ns()
        self._wall_ref = time.perf_counter_ns()

    def pause(self, paused: bool) -> None:
        """Pause or resume the clock."""
        with self._lock:
            self._sync()
            self._paused = bool(paused)

    def is_paused(self) -> bool:
        """Whether the clock is paused."""
        return self._paused

    def continue_for_time(self, seconds: float) -> None:
        """Advance the sim by ``seconds`` (as fast as it can compute), then stay paused."""
        if not 0 <= seconds <= 3600:
            raise BackendError(f"simContinueForTime: seconds must be in [0, 3600], got {seconds}")
        with self._lock:
            self._sync()
            self._t_ns += round(seconds * 1e9)
            self._paused = True

    def continue_for_frames(self, frames: int) -> None:
        """Advance ``frames`` physics frames of 10 ms, then stay paused."""
        if not 0 <= frames <= 360_000:
            raise BackendError(f"simContinueForFrames: frames must be in [0, 360000], got {frames}")
        with self._lock:
            self._sync()
            self._t_ns += int(frames) * _FRAME_NS
            self._paused = True

    def reset(self) -> None:
        """Back to t = 0, paused state kept, lidar cursors rewound."""
        with self._lock:
            self._t_ns = 0
            self._wall_ref = time.perf_counter_ns()
            for lidar in self._lidars.values():
                lidar.cursors.update(dict.fromkeys(lidar.cursors, 0))
            self.controls = CarControls()
            self.vehicle = None
            self.world.scene.ego = self._scripted_ego

    # -- lidar -----------------------------------------------------------------------------------
    def firing_digests(self) -> dict[str, str]:
        """Each lidar's firing-schedule digest (:func:`~rt_lidar.sensor.scan_pattern.schedule_digest`),
        by name, the default lidar also under ``""`` (``rtLidarServerInfo``'s ``firings``): a lockstep
        controller whose own digest matches may ask the answers to leave the rings, times and
        directions out. A lidar whose pattern has no digest (the rosette) is not listed."""
        out: dict[str, str] = {}
        for name, lidar in self._lidars.items():
            digest = schedule_digest(lidar.preset)
            if digest is not None:
                out[name] = digest
                if name == self.lidar_name:
                    out[""] = digest
        return out

    def _check(self, lidar_name: str, vehicle_name: str) -> SimLidar:
        lidar = self._lidars.get(lidar_name or self.lidar_name)
        if lidar is None:
            raise BackendError(f"no lidar '{lidar_name}' (this sim has '{', '.join(self._lidars)}')")
        if vehicle_name not in ("", self.vehicle_name):
            raise BackendError(f"no vehicle '{vehicle_name}' (this sim has '{self.vehicle_name}')")
        return lidar

    def check_lidar(self, lidar_name: str, vehicle_name: str) -> SimLidar:
        """The named lidar (``""``: the default one) of the named vehicle; a ``BackendError`` naming what
        there is otherwise."""
        return self._check(lidar_name, vehicle_name)

    def frozen_world(self) -> World:
        """A view of the world as it is now (the driven ego frozen, the segment ids copied): a cast into
        it outside the call lock answers as the world was at the call."""
        with self._lock:
            ego = self.vehicle.frozen() if self.vehicle is not None else self.world.scene.ego
            return self.world.with_ego(ego)

    def take_interval(self, reader: str, lidar: SimLidar) -> tuple[WorldSource, int, int, int]:
        """The interval of ``reader``'s read (its backlog cut to ``max_backlog_s``), the cursor moved on,
        the vehicle advanced to its end, and the lidar's source on a frozen view of the world (the
        vehicle and segment ids as they are now): what a cast outside the call lock needs. Returns the
        source, t0, t1 and the read's frame number."""
        with self._lock:
            t1 = self.now_ns()
            t0 = lidar.cursors[reader]
            if t1 - t0 > self.max_backlog_ns:
                self.skipped_ns += t1 - self.max_backlog_ns - t0
                t0 = t1 - self.max_backlog_ns
            lidar.cursors[reader] = t1
            lidar.frames[reader] += 1
            self._advance_vehicle(t1)
            ego = self.vehicle.frozen() if self.vehicle is not None else self.world.scene.ego
            source = lidar.source.on_world(self.world.with_ego(ego))
            # a scripted ego's pose is a function of time alone: each pose is computed once (a frame's
            # end is the next one's start and the answer's pose; the memo is shared by the copies); a
            # driven one's afresh each time
            source.pose_memo = self.vehicle is None
            return source, t0, t1, lidar.frames[reader]

    def skip_ns(self, ns: int) -> None:
        """Count ``ns`` of sweep left out of an answer to keep its ray budget (:attr:`skipped_ns`)."""
        with self._lock:
            self.skipped_ns += int(ns)

    def plan_firings(self, preset: SensorPreset, t0: int, t1: int, sub_rays: int) -> tuple[Firings, int]:
        """The firings of [t0, t1) within the ray budget (the newest ones; the cut is counted in
        :attr:`skipped_ns`) and the interval's start after the cut."""
        firings = firings_between(preset, t0, t1)
        if len(firings.t_ns) * sub_rays > self.max_rays_per_call:  # the ray budget: the newest firings
            keep = max(1, self.max_rays_per_call // sub_rays)
            cut = int(firings.t_ns[-keep])
            with self._lock:
                self.skipped_ns += cut - t0
            t0 = cut
            firings = firings_between(preset, t0, t1)
        return firings, t0

    def lidar_hits(self, lidar_name: str, vehicle_name: str) -> LidarHits:
        """Every ray fired since the previous ``rtLidarGetHits`` / ``rtLidarGetBeamHits``, with the
        optional fields."""
        return self.prepare_lidar_hits(lidar_name, vehicle_name).run()

    def prepare_lidar_hits(
        self, lidar_name: str, vehicle_name: str, omit: frozenset[str] = frozenset()
    ) -> HitsRead:
        """:meth:`lidar_hits` prepared (:class:`unreal_bridge.casts.PreparedCast`): the interval and the
        state taken now, the cast by its ``run()``, which needs no lock. ``omit``: the core fields the
        answer will leave out, not computed (they read as zeros)."""
        return HitsRead(self, self._check(lidar_name, vehicle_name), None, None, omit)

    def lidar_beam_hits(
        self,
        lidar_name: str,
        vehicle_name: str,
        offsets_rad: np.ndarray,
        weights: np.ndarray,
        sun: SunRequest | None = None,
    ) -> LidarHits:
        """Like :meth:`lidar_hits` (the same time line: the two calls share one cursor), every firing
        cast as the sub-ray bundle ``offsets_rad`` (N, 2) rad / ``weights`` (N,) by
        :meth:`WorldSource.beam_hits`: N consecutive rows a firing. With ``sun`` the cast also gives
        every ray's sun cosines, for the direction sent (used as it is) or, when it names none, for the
        scene's sun normalised as in-process (:func:`~rt_lidar.pipeline.sources.sun_unit`)."""
        return self.prepare_lidar_beam_hits(lidar_name, vehicle_name, offsets_rad, weights, sun).run()

    def prepare_lidar_beam_hits(
        self,
        lidar_name: str,
        vehicle_name: str,
        offsets_rad: np.ndarray,
        weights: np.ndarray,
        sun: SunRequest | None = None,
    ) -> HitsRead:
        """:meth:`lidar_beam_hits` prepared, as :meth:`prepare_lidar_hits`."""
        return HitsRead(self, *self._beam_request(lidar_name, vehicle_name, offsets_rad, weights, sun))

    def _beam_request(
        self,
        lidar_name: str,
        vehicle_name: str,
        offsets_rad: np.ndarray,
        weights: np.ndarray,
        sun: SunRequest | None,
    ) -> tuple[SimLidar, SubRayPattern, np.ndarray | None]:
        """(the lidar, the sub-ray pattern, the sun direction or None) of a ``rtLidarGetBeamHits``
        request: the sun's as sent, or the scene's (:func:`~rt_lidar.pipeline.sources.sun_unit`) when it
        names none."""
        lidar = self._check(lidar_name, vehicle_name)
        try:
            pattern = pattern_from_offsets(offsets_rad, weights)
        except ConfigError as exc:
            raise BackendError(f"rtLidarGetBeamHits: {exc}") from None
        if sun is None:
            return lidar, pattern, None
        if sun.direction is None:
            return lidar, pattern, sun_unit(self.source.sun_direction)
        return lidar, pattern, np.array(sun.direction, np.float64)

    def lidar_full_beam_hits(
        self,
        lidar_name: str,
        vehicle_name: str,
        offsets_rad: np.ndarray,
        weights: np.ndarray,
        sun: SunRequest | None,
        full: FullBeamRequest,
    ) -> LidarHits:
        """``--beam full`` (``rtLidarGetBeamHits`` with a ``full`` entry): every firing's central ray, and
        the sub-ray bundle ``offsets_rad`` / ``weights`` for the pulses whose footprint needs it, chosen
        here from the central rays (:mod:`rt_lidar.pipeline.beam_full`); the answer of
        :func:`~rt_lidar.bridge.full_beam_wire.full_beam_to_wire`."""
        return self.prepare_lidar_full_beam_hits(
            lidar_name, vehicle_name, offsets_rad, weights, sun, full
        ).run()

    def prepare_lidar_full_beam_hits(
        self,
        lidar_name: str,
        vehicle_name: str,
        offsets_rad: np.ndarray,
        weights: np.ndarray,
        sun: SunRequest | None,
        full: FullBeamRequest,
    ) -> FullBeamRead:
        """:meth:`lidar_full_beam_hits` prepared, as :meth:`prepare_lidar_hits`."""
        lidar, pattern, direction = self._beam_request(lidar_name, vehicle_name, offsets_rad, weights, sun)
        flags = self._retro_gain.get(lidar.name)
        if flags is None:
            arrays = load_material_table().arrays(
                self.world.material_names, lidar.preset.optics.wavelength_nm
            )
            flags = self._retro_gain[lidar.name] = (arrays.retro_gain, arrays.volume)
        return FullBeamRead(self, lidar, pattern, direction, full, *flags)

    def lidar_data(self, lidar_name: str, vehicle_name: str) -> LidarFrame:
        """AirSim's ``getLidarData``: the hit points (sensor frame) since the previous read."""
        return self.prepare_lidar_data(lidar_name, vehicle_name).run()

    def prepare_lidar_data(self, lidar_name: str, vehicle_name: str) -> DataRead:
        """:meth:`lidar_data` prepared, as :meth:`prepare_lidar_hits`."""
        return DataRead(self, self._check(lidar_name, vehicle_name))

    # -- camera ----------------------------------------------------------------------------------
    def images(self, requests: Sequence[ImageRequest], vehicle_name: str) -> list[FluImage]:
        """Render the embedded camera for each request (Scene, depth, segmentation)."""
        self._check("", vehicle_name)
        t_ns = self.now_ns()
        rendered = self.world.render_camera(self.camera, t_ns * 1e-9)
        cam_pose = _flu(self.world.ego_pose(t_ns * 1e-9).compose(self.camera.mount))
        out = []
        for req in requests:
            if req.image_type not in IMAGE_TYPES:
                out.append(
                    FluImage(
                        req.camera_name, req.image_type, message=f"image type {req.image_type} unsupported"
                    )
                )
                continue
            h, w = rendered.depth.shape
            if req.image_type in (1, 2, 3):
                depth = rendered.depth if req.image_type == 1 else self._perspective(rendered.depth)
                depth = np.where(np.isfinite(depth), depth, np.float32(65504.0)).astype(np.float32)
                if req.pixels_as_float:
                    out.append(
                        FluImage(
                            req.camera_name,
                            req.image_type,
                            w,
                            h,
                            data_float=depth.ravel(),
                            pixels_as_float=True,
                            compress=False,
                            camera_pose=cam_pose,
                            time_stamp=t_ns,
                        )
                    )
                    continue
                vis = np.clip(depth / 100.0 * 255.0, 0, 255).astype(np.uint8)
                pixels = np.repeat(vis[:, :, None], 3, axis=2)
            elif req.image_type == 5:
                seg = rendered.segmentation.astype(np.uint32)
                pixels = _segment_colours(seg)
            else:
                pixels = rendered.rgb
            bgr = np.ascontiguousarray(pixels[:, :, ::-1])
            data = _png(pixels) if req.compress else bgr.tobytes()
            out.append(
                FluImage(
                    req.camera_name,
                    req.image_type,
                    w,
                    h,
                    data_uint8=data,
                    compress=req.compress,
                    camera_pose=cam_pose,
                    time_stamp=t_ns,
                )
            )
        return out

    def _perspective(self, planar: np.ndarray) -> np.ndarray:
        h, w = planar.shape
        f = self.camera.focal_px
        u = (np.arange(w) - (w - 1) / 2.0) / f
        v = (np.arange(h) - (h - 1) / 2.0) / f
        scale = np.sqrt(1.0 + u[None, :] ** 2 + v[:, None] ** 2)
        return (planar * scale).astype(np.float32)

    # -- vehicle and scene ---------------------------------------------------------------------------
    def _advance_vehicle(self, t_ns: int) -> None:
        if self.vehicle is not None:
            self.vehicle.advance_to(t_ns * 1e-9)

    def _drive(self) -> BicycleModel:
        """Take the ego off its script: from now on a kinematic bicycle model drives it."""
        if self.vehicle is None:
            t = self.now_ns() * 1e-9
            pos, quat = self.world.ego_poses(np.array([t, t + 0.01]))
            model = BicycleModel(Pose(pos[0], quat[0]), t0=t)
            model.speed = float(np.linalg.norm(pos[1] - pos[0]) / 0.01)  # keep rolling at the scripted speed
            self.vehicle = model
            self.world.scene.ego = model
        return self.vehicle

    def vehicle_pose(self, vehicle_name: str) -> FluPose:
        """The ego vehicle's pose now."""
        self._check("", vehicle_name)
        with self._lock:
            t_ns = self.now_ns()
            self._advance_vehicle(t_ns)
        return _flu(self.world.ego_pose(t_ns * 1e-9))

    def set_vehicle_pose(self, pose: FluPose, ignore_collision: bool, vehicle_name: str) -> None:
        """Teleport the ego (it is driven from then on, standing still at the new pose)."""
        self._check("", vehicle_name)
        with self._lock:
            model = self._drive()
            model.advance_to(self.now_ns() * 1e-9)
            model.reset(Pose(np.asarray(pose.position, float), np.asarray(pose.orientation, float)))

    def car_state(self, vehicle_name: str) -> FluCarState:
        """Speed and kinematics of the ego from its trajectory."""
        self._check("", vehicle_name)
        with self._lock:
            t_ns = self.now_ns()
            self._advance_vehicle(t_ns)
        t = t_ns * 1e-9
        if self.vehicle is not None:
            pose, v = self.vehicle.pose, self.vehicle.velocity()
            fp = _flu(pose)
            kin = FluKinematics(pose=fp, linear_velocity=(float(v[0]), float(v[1]), float(v[2])))
            return FluCarState(speed=float(abs(self.vehicle.speed)), gear=1, kinematics=kin, timestamp=t_ns)
        pos, quat = self.world.ego_poses(np.array([t - 0.01, t]))
        vel = (pos[1] - pos[0]) / 0.01
        now = _flu(Pose(pos[1], quat[1]))
        kin = FluKinematics(pose=now, linear_velocity=(float(vel[0]), float(vel[1]), float(vel[2])))
        return FluCarState(speed=float(np.linalg.norm(vel)), gear=1, kinematics=kin, timestamp=t_ns)

    def set_car_controls(self, controls: CarControls, vehicle_name: str) -> None:
        """Drive the ego with AirSim car controls (a kinematic bicycle model, speed and steering limits)."""
        self._check("", vehicle_name)
        for key in ("throttle", "steering", "brake"):
            value = float(getattr(controls, key, 0.0))
            if not math.isfinite(value):
                raise BackendError(f"setCarControls: {key} must be a finite number, got {value}")
        with self._lock:
            model = self._drive()
            model.advance_to(self.now_ns() * 1e-9)
            model.set_controls(controls)
            self.controls = controls

    def object_pose(self, object_name: str) -> FluPose | None:
        """A scene object's pose now (by its actor name or the world's), None when unknown."""
        name = self.world_name(object_name)
        if name is None:
            return None
        return _flu(self.world.object_pose(name, self.now_ns() * 1e-9))

    def list_scene_objects(self, name_regex: str) -> list[str]:
        """The actor names (:attr:`actor_names`) that fully match ``name_regex``."""
        try:
            pattern = re.compile(name_regex)
        except re.error as exc:
            raise BackendError(f"simListSceneObjects: bad regex {name_regex!r}: {exc}") from None
        return [a for a in self.actor_names.values() if pattern.fullmatch(a)]

    def get_segmentation_object_id(self, mesh_name: str) -> int:
        """Segment id of a mesh (by its actor name or the world's), -1 when unknown."""
        name = self.world_name(mesh_name)
        return -1 if name is None else int(self.world.segment_ids().get(name, -1))

    def set_segmentation_object_id(self, mesh_name: str, object_id: int, is_name_regex: bool) -> bool:
        """Set a mesh's segment id (0..255): by actor name (or the world's), or every actor whose name
        matches the regex (case-insensitive, as AirSim)."""
        if is_name_regex:
            try:
                pattern = re.compile(mesh_name, re.IGNORECASE)
            except re.error as exc:
                raise BackendError(f"simSetSegmentationObjectID: bad regex {mesh_name!r}: {exc}") from None
            names = [n for n, a in self.actor_names.items() if pattern.fullmatch(a)]
        else:
            one = self.world_name(mesh_name)
            names = [] if one is None else [one]
        return any([self.world.set_segment_id(n, int(object_id)) for n in names])

    def settings_string(self) -> str:
        """The settings.json of this sim (its lidar block from the preset; a rig's: every lidar's, by
        name, at its mount in the NED body frame)."""
        settings = airsim_settings_json(self.preset)
        if len(self._lidars) > 1:
            sensors: dict[str, Any] = {}
            for lidar in self._lidars.values():
                mount = lidar.source.mount or Pose.identity()
                x, y, z = (float(v) for v in mount.position)
                roll, pitch, yaw = (math.degrees(a) for a in mount.rpy())
                block = airsim_lidar_settings(lidar.preset, lidar.name, x, -y, -z)
                block.update(Roll=roll, Pitch=-pitch, Yaw=-yaw)
                sensors[lidar.name] = block
            settings["Vehicles"]["PhysXCar"]["Sensors"] = sensors
        return json.dumps(settings)

    def list_vehicles(self) -> list[str]:
        """The one vehicle."""
        return [self.vehicle_name]

    # -- weather ---------------------------------------------------------------------------------
    def set_weather_parameter(self, param: int, value: float) -> None:
        """AirSim ``WeatherParameter`` in 0..1 (0 Rain, 1 Roadwetness, 2 Snow, ..., 7 Fog)."""
        if not 0.0 <= value <= 1.0:
            raise BackendError(f"simSetWeatherParameter: value must be in [0, 1], got {value}")
        self.weather[int(param)] = float(value)

    def enable_weather(self, enable: bool) -> None:
        """Weather takes effect only while enabled, as in AirSim."""
        self.weather_enabled = bool(enable)

    def weather_config(self) -> dict[str, Any] | None:
        """The weather as the lidar physics takes it, or None (see ``rt_lidar.physics.weather``)."""
        if not self.weather_enabled or not any(self.weather.values()):
            return None
        try:
            from rt_lidar.physics.weather import airsim_weather_to_config
        except ImportError:  # weather model not installed in this build
            return None
        cfg = airsim_weather_to_config(self.weather)
        if cfg is None:
            return None
        keys = ("rain_mm_h", "fog_visibility_m", "snow_mm_h")
        out = {k: getattr(cfg, k) for k in keys}
        if cfg.road_wetness > 0:  # only when wet: a dry answer's info stays as before
            out["road_wetness"] = cfg.road_wetness
        return out


def _png(rgb: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb), "RGB").save(buf, format="PNG")
    return buf.getvalue()


def _segment_colours(seg: np.ndarray) -> np.ndarray:
    """AirSim-like segmentation colours: a fixed pseudo-random colour per id, black for 0."""
    ids = np.arange(256, dtype=np.uint32)
    palette = np.stack([(ids * 67) % 256, (ids * 149) % 256, (ids * 211) % 256], axis=1).astype(np.uint8)
    palette[0] = 0
    return palette[np.minimum(seg, 255)]
