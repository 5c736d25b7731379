"""``AirSimServer``: AirSim's RPC API (method names, argument orders, wire structs) over a backend.

The server speaks rpclib's msgpack-RPC (:mod:`rt_lidar.unreal_bridge.rpc`) and translates between AirSim's
NED wire structs and a :class:`SimBackend` that works in the project frame with plain Python and NumPy
values; stock AirSim and Cosys-AirSim clients connect to it unchanged. Big arrays (the lidar point
cloud, float images) are encoded by NumPy as float32 arrays, not element by element.

Beyond AirSim it binds the extension call ``rtLidarGetHits`` (docs/extension-call.md), and
``rtLidarGetBeamHits`` (every firing as a sub-ray bundle, optionally with the per-ray sun cosines) when
the backend offers ``lidar_beam_hits``.

A backend with ``prepare_lidar_*`` methods (:class:`~rt_lidar.unreal_bridge.casts.DeferredSimBackend`, the
embedded sim) has its lidar calls cast outside the call lock: the lock is held only to take the call's
interval and a frozen view of the state, heavy casts start in FIFO order within a ray budget
(:class:`~rt_lidar.unreal_bridge.casts.CastQueue`), and other clients' calls go on meanwhile. Its
``rtLidarGetHits`` and ``rtLidarGetBeamHits`` are answered :class:`~unreal_bridge.rpc.Later` (cast and
encoded on a worker thread, into the segment a shared-memory offer names), so the frames a client asks
ahead are cast at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

import numpy as np

from . import wire
from .beam_call import BEAM_HITS_METHOD, SunRequest, decode_beam, decode_full, decode_sun
from .casts import HEAVY_BUDGET_RAYS, CastQueue, DeferredSimBackend, PreparedCast, is_deferred, takes_omit
from .errors import WireFormatError
from .hits_codec import compact_option, encode_hits, hits_options, omit_option, server_info
from .limits import ServerLimits, safe_pattern
from .rpc import Later, Raw, RpcServer
from .shm import ShmAttachments, ShmRefused, ShmTarget
from .wire import (
    CarControls,
    FluCarState,
    FluImage,
    FluPose,
    GeoPoint,
    ImageRequest,
    LidarFrame,
    LidarHits,
    Pose,
)

__all__ = [
    "DEFAULT_PORT",
    "HOME_GEO_POINT",
    "MIN_REQUIRED_CLIENT_VERSION",
    "SERVER_VERSION",
    "AirSimServer",
    "BeamSimBackend",
    "SimBackend",
]

DEFAULT_PORT = 41451
#: Cosys-AirSim clients need a server version >= 4, stock AirSim clients >= 1.
SERVER_VERSION = 4
#: Stock AirSim clients are version 1.
MIN_REQUIRED_CLIENT_VERSION = 1
#: AirSim's default home (settings.json ``OriginGeopoint``).
HOME_GEO_POINT = GeoPoint(47.641468, -122.140165, 122.0)
_log = logging.getLogger(__name__)
MAX_IMAGE_REQUESTS = 16
"""Most image requests one ``simGetImages`` call may carry."""
MAX_NAMED_STATES = 64
"""Most vehicle names ``enableApiControl`` / ``armDisarm`` remember."""
T = TypeVar("T")
_NAN_POSE = Pose(wire.Vector3r(np.nan, np.nan, np.nan), wire.Quaternionr(np.nan, np.nan, np.nan, np.nan))


class SimBackend(Protocol):
    """What the server needs from a simulation; every value in the project frame (x fwd, y left, z up).

    Names are AirSim's (``""`` means the default lidar / vehicle). To refuse a call with a message,
    raise :class:`~rt_lidar.unreal_bridge.errors.BackendError` (any exception is answered the same way).
    """

    def lidar_data(self, lidar_name: str, vehicle_name: str) -> LidarFrame:
        """The lidar's latest answer: points (N, 3) float32, segmentation (N,) int32, pose, time (ns)."""
        ...

    def lidar_hits(self, lidar_name: str, vehicle_name: str) -> LidarHits:
        """The lidar's latest rays with ring, firing time, range, normal and miss flag."""
        ...

    def images(self, requests: Sequence[ImageRequest], vehicle_name: str) -> list[FluImage]:
        """One image a request (``image_type`` as AirSim's ``ImageType``)."""
        ...

    def vehicle_pose(self, vehicle_name: str) -> FluPose:
        """The vehicle's pose."""
        ...

    def set_vehicle_pose(self, pose: FluPose, ignore_collision: bool, vehicle_name: str) -> None:
        """Teleport the vehicle."""
        ...

    def pause(self, paused: bool) -> None:
        """Pause or resume the sim clock."""
        ...

    def is_paused(self) -> bool:
        """Whether the sim clock is paused."""
        ...

    def continue_for_time(self, seconds: float) -> None:
        """Run the sim for ``seconds`` of sim time, then pause (returns when done)."""
        ...

    def continue_for_frames(self, frames: int) -> None:
        """Run the sim for ``frames`` frames, then pause (returns when done)."""
        ...

    def car_state(self, vehicle_name: str) -> FluCarState:
        """The car's state."""
        ...

    def set_car_controls(self, controls: CarControls, vehicle_name: str) -> None:
        """Apply car controls."""
        ...

    def object_pose(self, object_name: str) -> FluPose | None:
        """A scene object's pose, None for an unknown object (answered as AirSim's NaN pose)."""
        ...

    def list_scene_objects(self, name_regex: str) -> list[str]:
        """Names of scene objects matching ``name_regex`` (Python ``re.fullmatch``)."""
        ...

    def get_segmentation_object_id(self, mesh_name: str) -> int:
        """A mesh's segmentation id, -1 when unknown."""
        ...

    def set_segmentation_object_id(self, mesh_name: str, object_id: int, is_name_regex: bool) -> bool:
        """Set the segmentation id of a mesh (or of all matching ``mesh_name`` as a regex)."""
        ...

    def reset(self) -> None:
        """Reset vehicles and sim to their start."""
        ...

    def settings_string(self) -> str:
        """The settings.json text the sim runs with."""
        ...

    def list_vehicles(self) -> list[str]:
        """Vehicle names."""
        ...

    def set_weather_parameter(self, param: int, value: float) -> None:
        """AirSim ``WeatherParameter`` (0 rain, 7 fog, ...) to ``value`` in 0..1."""
        ...

    def enable_weather(self, enable: bool) -> None:
        """Turn weather effects on or off."""
        ...


class BeamSimBackend(SimBackend, Protocol):
    """A backend that also casts each firing as a bundle of sub-rays (extension ``rtLidarGetBeamHits``)."""

    def lidar_beam_hits(
        self,
        lidar_name: str,
        vehicle_name: str,
        offsets_rad: np.ndarray,
        weights: np.ndarray,
        sun: SunRequest | None = None,
    ) -> LidarHits:
        """Like :meth:`SimBackend.lidar_hits`, every firing cast as ``len(weights)`` sub-rays at angular
        ``offsets_rad`` (N, 2) float64 (horizontal, vertical) from its direction: N consecutive rays a
        firing, with ``info["sub_rays"]`` = N and ``info["subray_weights"]`` = ``weights``. With ``sun``
        (passed only when the request has one) the extras also hold the per-ray ``sun_cos`` and
        ``beam_sun_cos`` and ``info["sun_direction"]`` the (project-frame) direction used."""
        ...


def _requests(raw: Any) -> list[ImageRequest]:
    if not isinstance(raw, list):
        raise WireFormatError("simGetImages: requests must be an array")
    if len(raw) > MAX_IMAGE_REQUESTS:
        raise WireFormatError(f"simGetImages: {len(raw)} requests; at most {MAX_IMAGE_REQUESTS} a call")
    return [ImageRequest.from_msgpack(r) for r in raw]


class AirSimServer:
    """An AirSim-compatible RPC server over ``backend``; ``port=0`` picks a free port (see :attr:`port`).

    Binds 127.0.0.1 unless told otherwise. ``start()`` serves in a background thread,
    ``serve_forever()`` in the caller's; ``close()`` stops and disconnects everyone.
    """

    def __init__(
        self,
        backend: SimBackend,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        max_message_size: int | None = None,
        limits: ServerLimits | None = None,
        cast_budget_rays: int = HEAVY_BUDGET_RAYS,
    ) -> None:
        self.backend = backend
        self.rpc = RpcServer(host, port, max_message_size=max_message_size, limits=limits)
        self._api_control: dict[str, bool] = {}
        self._armed: dict[str, bool] = {}
        for name, func, arity in self._table():
            self.rpc.register(name, func, arity)
        # name patterns are matched by RE2 outside the call lock; the backend is asked under it
        self.rpc.register("simListSceneObjects", self._list_scene_objects, 1, locked=False)
        self.rpc.register("simSetSegmentationObjectID", self._set_segmentation_id, 3, locked=False)
        if callable(getattr(backend, "lidar_beam_hits", None)):  # a backend without it: rpclib's not-found
            self.rpc.register(BEAM_HITS_METHOD, self._beam_hits, 3)
        self.casts = CastQueue(heavy_budget=cast_budget_rays)
        """Turns of the lidar casts run outside the call lock (heavy ones in FIFO order, together only
        while their rays stay within ``cast_budget_rays``: the backend's ray budget of one call)."""
        self._deferred = is_deferred(backend)
        self._takes_omit = self._deferred and takes_omit(backend)
        """The backend's prepared hits need not compute the fields an answer omits (its ``omit``)."""
        if self._deferred:  # the lock is held only to prepare the cast (unreal_bridge.casts)
            self.rpc.register("getLidarData", self._lidar_data, 2, locked=False)
            self.rpc.register("rtLidarGetHits", self._lidar_hits, (2, 3), locked=False)
            if callable(getattr(backend, "lidar_beam_hits", None)):
                self.rpc.register(BEAM_HITS_METHOD, self._beam_hits, 3, locked=False)
        self.shm = ShmAttachments()
        """Client segments of the same-host fast path (:mod:`rt_lidar.unreal_bridge.shm`) mapped now."""
        self.rpc.on_disconnect = self.shm.on_disconnect  # a killed client's segment goes with its socket

    @property
    def port(self) -> int:
        """The port served."""
        return int(self.rpc.port)

    @property
    def host(self) -> str:
        """The address served."""
        return str(self.rpc.host)

    def start(self) -> AirSimServer:
        """Serve in a background thread; returns self."""
        self.rpc.start()
        return self

    def serve_forever(self) -> None:
        """Serve until :meth:`close`."""
        self.rpc.serve_forever()

    def close(self) -> None:
        """Stop serving and close every connection."""
        self.rpc.close()
        self.shm.close()

    def __enter__(self) -> AirSimServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # the method table: AirSim name, handler, accepted argument counts (stock AirSim's first) -------
    def _table(self) -> list[tuple[str, Any, int | tuple[int, ...]]]:
        b = self.backend
        return [
            ("ping", lambda: True, 0),
            ("getServerVersion", lambda: SERVER_VERSION, 0),
            ("getMinRequiredClientVersion", lambda: MIN_REQUIRED_CLIENT_VERSION, 0),
            ("getLidarData", self._lidar_data, 2),
            ("rtLidarGetHits", self._plain_lidar_hits, (2, 3)),
            ("rtLidarServerInfo", lambda: server_info(b), 0),
            ("simGetImages", self._images, (3, 2)),  # stock: requests, vehicle, external; Cosys: 2
            ("simGetImage", self._image, 4),  # 4th: stock ``external`` (bool), Cosys ``annotation_name``
            ("simGetVehiclePose", lambda v: wire.pose_flu_to_ned(b.vehicle_pose(str(v))).to_msgpack(), 1),
            ("simSetVehiclePose", self._set_vehicle_pose, 3),
            ("simPause", lambda paused: b.pause(bool(paused)), 1),
            ("simIsPaused", lambda: bool(b.is_paused()), 0),
            ("simContinueForTime", lambda seconds: b.continue_for_time(float(seconds)), 1),
            ("simContinueForFrames", lambda frames: b.continue_for_frames(int(frames)), 1),
            ("getCarState", lambda v: wire.car_state_flu_to_ned(b.car_state(str(v))).to_msgpack(), 1),
            ("setCarControls", lambda c, v: b.set_car_controls(CarControls.from_msgpack(c), str(v)), 2),
            ("simGetObjectPose", self._object_pose, (1, 2)),  # Cosys adds ``ned`` (always NED here)
            ("simGetSegmentationObjectID", lambda mesh: int(b.get_segmentation_object_id(str(mesh))), 1),
            ("reset", lambda: b.reset(), 0),
            ("enableApiControl", self._enable_api_control, 2),
            ("isApiControlEnabled", lambda v: self._api_control.get(str(v), False), 1),
            ("armDisarm", self._arm_disarm, 2),
            ("getSettingsString", lambda: str(b.settings_string()), 0),
            ("listVehicles", lambda: list(b.list_vehicles()), 0),
            ("simSetWeatherParameter", lambda p, v: b.set_weather_parameter(int(p), float(v)), 2),
            ("simEnableWeather", lambda enable: b.enable_weather(bool(enable)), 1),
            ("getHomeGeoPoint", lambda v: HOME_GEO_POINT.to_msgpack(), 1),
            ("simGetCollisionInfo", lambda v: wire.CollisionInfo().to_msgpack(), 1),
            ("simGetGroundTruthKinematics", self._ground_truth_kinematics, 1),
            ("simPrintLogMessage", self._log_message, 3),
        ]

    # handlers --------------------------------------------------------------------------------------
    def _scene_names(self) -> list[str]:
        with self.rpc.call_lock:
            return [str(n) for n in self.backend.list_scene_objects(".*")]

    def _list_scene_objects(self, regex: Any) -> list[str]:
        pattern = safe_pattern(regex)  # a bad pattern is answered as an error, not passed on
        return [n for n in self._scene_names() if pattern.fullmatch(n)]

    def _vehicle(self, vehicle_name: Any) -> str:
        """``vehicle_name`` when the backend has that vehicle (``""``: the default one)."""
        name = str(vehicle_name)
        if name == "":
            return name
        known = [str(v) for v in self.backend.list_vehicles()]  # callers run under the call lock
        if name not in known:
            raise WireFormatError(f"no vehicle '{name:.80}' (vehicles: {', '.join(known)})")
        return name

    def _cast(self, prepare: Callable[[], PreparedCast[T]]) -> T:
        """Prepare a deferred backend's cast under the call lock, then wait for its turn and cast
        outside it."""
        return self._in_turn(self._prepared(prepare))

    def _prepared(self, prepare: Callable[[], PreparedCast[T]]) -> PreparedCast[T]:
        """A deferred backend's cast, prepared under the call lock (its place in the request order)."""
        with self.rpc.call_lock:
            return prepare()

    def _in_turn(self, job: PreparedCast[T]) -> T:
        """Cast ``job`` outside the call lock once its turn in :attr:`casts` comes."""
        with self.casts.turn(job.rays):
            return job.run()

    def _plain_lidar_hits(self, lidar_name: Any, vehicle_name: Any, options: Any = None) -> dict[str, Any]:
        """``rtLidarGetHits`` of a backend that casts when asked (under the call lock)."""
        omit, compact = hits_options(options)
        hits = self.backend.lidar_hits(str(lidar_name), str(vehicle_name))
        return encode_hits(hits, omit=omit, compact=compact)

    def _lidar_hits(self, lidar_name: Any, vehicle_name: Any, options: Any = None) -> Later:
        """Prepared now, in the connection's request order (its interval and frozen world); cast and
        encoded later (:mod:`rt_lidar.unreal_bridge.later`): a client that asked ahead has its next frame's
        calls run meanwhile, so two frames of one connection may be cast at once."""
        omit, compact = hits_options(options)
        job = self._prepared(lambda: self._prepare_hits(str(lidar_name), str(vehicle_name), omit))
        return Later(lambda: encode_hits(self._in_turn(job), omit=omit, compact=compact))

    def _prepare_hits(self, lidar: str, vehicle: str, omit: frozenset[str]) -> PreparedCast[LidarHits]:
        """The deferred backend's ``prepare_lidar_hits``, told the fields the answer omits when it
        takes them (:func:`rt_lidar.unreal_bridge.casts.takes_omit`)."""
        backend = cast(DeferredSimBackend, self.backend)
        if omit and self._takes_omit:
            return backend.prepare_lidar_hits(lidar, vehicle, omit=omit)  # type: ignore[call-arg]
        return backend.prepare_lidar_hits(lidar, vehicle)

    def _lidar_data(self, lidar_name: Any, vehicle_name: Any) -> dict[str, Any]:
        lidar, vehicle = str(lidar_name), str(vehicle_name)
        if self._deferred:
            backend = cast(DeferredSimBackend, self.backend)
            frame = self._cast(lambda: backend.prepare_lidar_data(lidar, vehicle))
        else:
            frame = self.backend.lidar_data(lidar, vehicle)
        points = np.asarray(frame.points, dtype=np.float32).reshape(-1, 3)
        seg = np.asarray(frame.segmentation, dtype=np.int32).ravel()
        if len(seg) != len(points):
            raise ValueError(f"backend gave {len(seg)} segmentation ids for {len(points)} points")
        return {
            "time_stamp": int(frame.time_stamp),
            "point_cloud": Raw(wire.flu_to_ned_points_msgpack(points)),
            "pose": wire.pose_flu_to_ned(frame.pose).to_msgpack(),
            "segmentation": seg,  # packed by rpc.pack as a uniform int array
        }

    def _beam_hits(self, lidar_name: Any, vehicle_name: Any, beam: Any) -> dict[str, Any] | Later:
        """``rtLidarGetBeamHits``. Prepared now and cast later, as ``rtLidarGetHits`` is (frames asked
        ahead are cast at once, sub-ray bundles, sun and pose samples included). The segment a
        ``transport`` entry offers is attached only while its answer is written into it, after the cast:
        an answer that never runs holds none."""
        lidar, vehicle = str(lidar_name), str(vehicle_name)
        poses = isinstance(beam, Mapping) and "poses" in beam  # send info.pose_samples
        omit = omit_option(beam.get("omit"), BEAM_HITS_METHOD) if isinstance(beam, Mapping) else frozenset()
        compact = isinstance(beam, Mapping) and compact_option(beam.get("compact"), BEAM_HITS_METHOD)
        form = (omit, compact)
        if isinstance(beam, Mapping) and beam and beam.keys() <= {"transport", "poses", "omit", "compact"}:
            # only the offer, the poses and the form of the answer: the cast of rtLidarGetHits
            if not self._deferred:
                return self._written(beam, self.backend.lidar_hits(lidar, vehicle), poses, form)
            job = self._prepared(lambda: self._prepare_hits(lidar, vehicle, omit))
            return Later(lambda: self._written(beam, self._in_turn(job), poses, form))
        offsets, weights = decode_beam(beam)
        sun = decode_sun(beam)
        full = decode_full(beam)
        # --beam full where the backend chooses the pulses itself; else every pulse's bundle
        full_cast = None
        if full is not None:
            full_cast = getattr(
                self.backend,
                "prepare_lidar_full_beam_hits" if self._deferred else "lidar_full_beam_hits",
                None,
            )
        if self._deferred:
            deferred = cast(DeferredSimBackend, self.backend)
            if callable(full_cast):
                beam_job = self._prepared(lambda: full_cast(lidar, vehicle, offsets, weights, sun, full))
            else:
                beam_job = self._prepared(
                    lambda: deferred.prepare_lidar_beam_hits(lidar, vehicle, offsets, weights, sun)
                )
            return Later(lambda: self._written(beam, self._in_turn(beam_job), poses, form))
        if callable(full_cast):
            return self._written(beam, full_cast(lidar, vehicle, offsets, weights, sun, full), poses, form)
        if sun is None:  # a backend that knows no sun is called as before
            hits = cast(BeamSimBackend, self.backend).lidar_beam_hits(lidar, vehicle, offsets, weights)
        else:
            hits = cast(BeamSimBackend, self.backend).lidar_beam_hits(
                lidar, vehicle, offsets, weights, sun=sun
            )
        return self._written(beam, hits, poses, form)

    def _written(
        self, beam: Any, hits: LidarHits, poses: bool, form: tuple[frozenset[str], bool]
    ) -> dict[str, Any]:
        """The answer of ``hits`` in ``form`` (the fields left out, compact or not), its fields written
        into the segment the beam offers when this server can use it (attached for this answer alone,
        let go of once written), else inline."""
        target, refused = self._shm_target(beam)
        try:
            return self._answer(hits, target, refused, poses, *form)
        finally:
            if target is not None:
                target.release()

    def _shm_target(self, beam: Any) -> tuple[ShmTarget | None, str]:
        """The segment a beam's ``transport`` entry offers, or None and why not (``""``: none offered)."""
        if not (isinstance(beam, Mapping) and "transport" in beam):
            return None, ""
        try:
            return self.shm.attach(beam["transport"]), ""
        except ShmRefused as exc:
            return None, str(exc)

    @staticmethod
    def _answer(
        hits: LidarHits,
        target: ShmTarget | None,
        refused: str,
        poses: bool = False,
        omit: frozenset[str] = frozenset(),
        compact: bool = False,
    ) -> dict[str, Any]:
        answer = encode_hits(hits, shm=target, poses=poses, omit=omit, compact=compact)
        if refused:
            answer["shm_refused"] = refused
        return answer

    def _images(self, requests: Any, vehicle_name: Any, external: Any = False) -> list[dict[str, Any]]:
        reqs = _requests(requests)
        images = self.backend.images(reqs, str(vehicle_name))
        return [img.to_wire().to_msgpack() for img in images]

    def _image(self, camera_name: Any, image_type: Any, vehicle_name: Any, fourth: Any) -> bytes:
        annotation = fourth if isinstance(fourth, str) else ""
        req = ImageRequest(str(camera_name), int(image_type), False, True, annotation)
        images = self.backend.images([req], str(vehicle_name))
        return bytes(images[0].data_uint8) if images else b""

    def _set_vehicle_pose(self, pose: Any, ignore_collision: Any, vehicle_name: Any) -> None:
        flu = wire.pose_ned_to_flu(Pose.from_msgpack(pose))
        self.backend.set_vehicle_pose(flu, bool(ignore_collision), str(vehicle_name))

    def _object_pose(self, object_name: Any, ned: Any = True) -> dict[str, Any]:
        pose = self.backend.object_pose(str(object_name))
        return (_NAN_POSE if pose is None else wire.pose_flu_to_ned(pose)).to_msgpack()

    def _set_segmentation_id(self, mesh_name: Any, object_id: Any, is_name_regex: Any) -> bool:
        if not is_name_regex:
            with self.rpc.call_lock:
                return bool(self.backend.set_segmentation_object_id(str(mesh_name), int(object_id), False))
        pattern = safe_pattern(mesh_name, ignore_case=True)  # AirSim matches these case-insensitively
        names = [n for n in self._scene_names() if pattern.fullmatch(n)]
        with self.rpc.call_lock:
            done = [self.backend.set_segmentation_object_id(n, int(object_id), False) for n in names]
        return any(done)

    def _enable_api_control(self, is_enabled: Any, vehicle_name: Any) -> None:
        name = self._vehicle(vehicle_name)
        if len(self._api_control) < MAX_NAMED_STATES or name in self._api_control:
            self._api_control[name] = bool(is_enabled)

    def _arm_disarm(self, arm: Any, vehicle_name: Any) -> bool:
        name = self._vehicle(vehicle_name)
        if len(self._armed) < MAX_NAMED_STATES or name in self._armed:
            self._armed[name] = bool(arm)
        return True

    def _ground_truth_kinematics(self, vehicle_name: Any) -> dict[str, Any]:
        state = self.backend.car_state(str(vehicle_name))
        return wire.kinematics_flu_to_ned(state.kinematics).to_msgpack()

    def _log_message(self, message: Any, param: Any, severity: Any) -> None:
        _log.info("simPrintLogMessage: %s %s", message, param)
