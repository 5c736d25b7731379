"""``AirSimClient``: a fast client of AirSim's RPC API, in the project frame, on msgpack 1.x.

It speaks to stock AirSim, Cosys-AirSim and the embedded server (:mod:`rt_lidar.unreal_bridge.server`) alike.
Calls use AirSim's method names and argument orders; where stock AirSim and Cosys-AirSim bind a
method with different argument counts (``simGetImages``, ``simGetObjectPose``) the client tries the
stock form first and remembers the form the server accepted. Poses, points and kinematics come back
converted from NED to the project frame (x forward, y left, z up) by :mod:`rt_lidar.unreal_bridge.wire`.

``get_lidar_data`` decodes the point cloud straight into NumPy (see :mod:`unreal_bridge.fast_decode`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from .beam_call import BEAM_HITS_METHOD, FullBeamRequest, SunArg, encode_beam
from .errors import BridgeError, RpcError, WireFormatError
from .hits_codec import decode_hits
from .rpc import DEFAULT_MAX_MESSAGE_SIZE, RpcClient
from .shm import MAX_RING_SEGMENTS, MAX_SEGMENT_BYTES, ShmSegment, shm_available
from .wire import (
    FIRING_FIELDS,
    CarControls,
    CarState,
    FluCarState,
    FluImage,
    FluPose,
    ImageRequest,
    ImageResponse,
    LidarFrame,
    LidarHits,
    Pose,
    car_state_ned_to_flu,
    ned_to_flu_points,
    pose_flu_to_ned,
    pose_ned_to_flu,
)

__all__ = [
    "CLIENT_VERSION",
    "MIN_SERVER_VERSION",
    "AirSimClient",
    "FrameRequest",
]

#: The API version this client reports (Cosys-AirSim's; stock AirSim servers need >= 1).
CLIENT_VERSION = 4
#: The oldest server API version this client works with (stock AirSim's).
MIN_SERVER_VERSION = 1
#: The first shared-memory segment's size (a bigger one follows when an answer does not fit).
SHM_INITIAL_BYTES = 16 << 20
_LIDAR_ARRAYS = {"point_cloud": np.float32, "segmentation": np.int32}


def _is_arity_error(exc: RpcError) -> bool:
    return "invalid number of arguments" in str(exc.error)


class FrameRequest(NamedTuple):
    """A lockstep frame :meth:`AirSimClient.send_frame_request` asked for, its answers not read yet."""

    advance: int | None
    """The msgid of its ``simContinueForTime`` (None: it reads the frame another lidar's request
    advanced the sim to, as a rig's other lidars do)."""
    hits: int
    """The msgid of its hits call (``rtLidarGetHits``, or ``rtLidarGetBeamHits`` offering ``segment``)."""
    segment: ShmSegment | None = None
    """The ring's segment lent to it until its answer is decoded (None: the fields come over TCP)."""
    omit: frozenset[str] = frozenset()
    """The fields its hits call asked the server to leave out."""


class AirSimClient:
    """Client of an AirSim-compatible RPC server (stock AirSim, Cosys-AirSim, or ours).

    ``timeout`` (s) is each call's deadline (connect, request and the whole answer);
    ``max_reply_bytes`` caps an answer's size. A call that fails raises
    :class:`~rt_lidar.unreal_bridge.errors.RpcError` (the server's error) or
    :class:`~rt_lidar.unreal_bridge.errors.ConnectionLost` (naming the call); the next call reconnects.

    ``shared_memory=True`` offers the server a shared-memory segment (first of ``shm_bytes``, a bigger
    one when an answer does not fit) for the per-ray fields of the extension calls
    (:mod:`unreal_bridge.shm`); TCP carries them until a server takes the offer, and for good once one
    refuses it (another host, an older server). :attr:`transport` says which carried the last answer.
    The segments form a ring: each call or frame asked ahead (:meth:`send_frame_request`) is lent one
    of its own until its answer is decoded.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 41451,
        timeout: float | None = 60.0,
        max_reply_bytes: int = DEFAULT_MAX_MESSAGE_SIZE,
        shared_memory: bool = False,
        shm_bytes: int = SHM_INITIAL_BYTES,
    ) -> None:
        # float64 arguments, as the stock Python client sends them: AirSim takes ``double`` times
        # (simContinueForTime); its float parameters read float64 just as well.
        self.rpc = RpcClient(
            host, port, timeout=timeout, max_message_size=max_reply_bytes, single_float=False
        )
        self._forms: dict[str, int] = {}
        self._shm_lock = threading.Lock()
        self._free: list[ShmSegment] = []
        """The ring's segments not lent to a request now."""
        self._lent: list[ShmSegment] = []
        """The ring's segments offered in a request whose answer is not decoded yet."""
        self._shm_size = int(shm_bytes)
        self._shm_taken = False
        """The server has taken an offer (answered through a segment, or asked for a bigger one)."""
        self.omit_fields: frozenset[str] = frozenset()
        """Core fields of the hits answers the caller does not read: the extension calls ask the server
        to leave them out (``omit``; set it only to fields the server's ``rtLidarServerInfo`` lists)."""
        self.compact = False
        """Ask the hits calls for compact answers (:mod:`rt_lidar.unreal_bridge.compact`; set it only when the
        server's ``rtLidarServerInfo`` says ``compact``)."""
        self.omit_firings: frozenset[str] = frozenset()
        """Lidars (by the name the calls give) whose answers may also leave out the firing fields
        (:data:`~unreal_bridge.wire.FIRING_FIELDS`): set by a lockstep caller whose firing schedule is
        the server's for that lidar (``rtLidarServerInfo``'s ``firings`` digest)."""
        self.shm_refused: str | None = None if shared_memory else "not asked for"
        """Why the per-ray fields go over TCP (None while shared memory is offered)."""
        self.transport = "tcp"
        """How the last extension answer's fields came: ``"tcp"`` or ``"shm"``."""
        if shared_memory and not shm_available():
            self.shm_refused = "no writable /dev/shm here"

    def close(self) -> None:
        """Close the connection and remove the shared-memory segments."""
        self.rpc.close()
        with self._shm_lock:
            for segment in (*self._free, *self._lent):
                segment.close()
            self._free.clear()
            self._lent.clear()

    def __enter__(self) -> AirSimClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, *args: Any) -> Any:
        """Any RPC method by its AirSim name, with its arguments in AirSim's order; msgpack-decoded result."""
        return self.rpc.call(method, *args)

    def _call_forms(self, method: str, forms: Sequence[tuple[Any, ...]]) -> Any:
        """Call with the first argument form the server accepts (stock AirSim's first)."""
        start = self._forms.get(method, 0)
        for i in range(start, len(forms)):
            try:
                result = self.rpc.call(method, *forms[i])
            except RpcError as exc:
                if i + 1 < len(forms) and _is_arity_error(exc):
                    continue
                raise
            self._forms[method] = i
            return result
        raise AssertionError("unreachable")

    # connection ------------------------------------------------------------------------------------
    def ping(self) -> bool:
        """``ping``: True when the server answers."""
        return bool(self.rpc.call("ping"))

    def get_server_version(self) -> int:
        """``getServerVersion``."""
        return int(self.rpc.call("getServerVersion"))

    def get_min_required_client_version(self) -> int:
        """``getMinRequiredClientVersion``."""
        return int(self.rpc.call("getMinRequiredClientVersion"))

    def confirm_connection(self) -> int:
        """Ping and check versions as AirSim's ``confirmConnection`` does; return the server version.

        Raises :class:`~rt_lidar.unreal_bridge.errors.WireFormatError` when the server is too old for us or
        needs a newer client than we are.
        """
        if not self.ping():
            raise WireFormatError("the server answered ping with false")
        server = self.get_server_version()
        needed = self.get_min_required_client_version()
        if server < MIN_SERVER_VERSION or needed > CLIENT_VERSION:
            raise WireFormatError(
                f"version mismatch: server {server} (we need >= {MIN_SERVER_VERSION}), "
                f"client {CLIENT_VERSION} (server needs >= {needed})"
            )
        return server

    # sensors ---------------------------------------------------------------------------------------
    def get_lidar_data(self, lidar_name: str = "", vehicle_name: str = "") -> LidarFrame:
        """``getLidarData``: points (N, 3) float32, segmentation (N,) int32, pose, time stamp (ns)."""
        raw = self.rpc.call_arrays("getLidarData", (lidar_name, vehicle_name), _LIDAR_ARRAYS)
        if not isinstance(raw, Mapping):
            raise WireFormatError(f"getLidarData answered a {type(raw).__name__}, not a map")
        cloud = raw.get("point_cloud")
        cloud = np.asarray(cloud if cloud is not None else [], dtype=np.float32).ravel()
        points = ned_to_flu_points(cloud if cloud.size >= 3 else cloud[:0], copy=False)  # a fresh array
        seg = raw.get("segmentation")
        if seg is None or (isinstance(seg, np.ndarray) and seg.size == 0 and len(points)):
            segmentation = np.full(len(points), -1, dtype=np.int32)  # Cosys-AirSim sends none
        else:
            segmentation = np.asarray(seg, dtype=np.int32).ravel()
        if len(segmentation) != len(points):
            raise WireFormatError(
                f"getLidarData: {len(segmentation)} segmentation ids for {len(points)} points"
            )
        return LidarFrame(
            points=points,
            segmentation=segmentation,
            pose=pose_ned_to_flu(Pose.from_msgpack(raw.get("pose", {}))),
            time_stamp=int(raw.get("time_stamp", 0)),
        )

    def rt_lidar_get_hits(
        self, lidar_name: str = "", vehicle_name: str = "", poses: bool = False
    ) -> LidarHits:
        """Extension ``rtLidarGetHits`` (our server only): rings, firing times, ranges, normals, misses.

        With shared memory offered this is ``rtLidarGetBeamHits`` with a beam of only the offer (the
        same cast); a server that refuses that form gets ``rtLidarGetHits`` from then on. ``poses``
        asks for the lidar's world poses on the 1 ms grid it cast from (``info["pose_samples"]``, (S, 8)
        float64 rows ``t_s, x, y, z, qw, qx, qy, qz``), through ``rtLidarGetBeamHits`` with a beam of
        ``poses``; a server without that entry raises an :class:`~rt_lidar.unreal_bridge.errors.RpcError`."""
        if poses:
            return self.rt_lidar_get_beam_hits(lidar_name, vehicle_name, poses=True)
        if self.shm_refused is None:
            try:
                return self._shm_call(lidar_name, vehicle_name, {})
            except RpcError as exc:  # no such call, or one predating the offer: the beam is refused
                if not (exc.unbound or "beam" in str(exc.error)):
                    raise
                self._stop_shm(f"the server refused the offer: {exc.error}")
        self.transport = "tcp"
        answer = self.rpc.call("rtLidarGetHits", *self._hits_args(lidar_name, vehicle_name))
        return self._decode(answer, None, self.omit_for(lidar_name))

    def omit_for(self, lidar_name: str) -> frozenset[str]:
        """The fields the hits calls for ``lidar_name`` ask to leave out: :attr:`omit_fields`, and the
        firing fields for a lidar in :attr:`omit_firings`."""
        return self.omit_fields | (FIRING_FIELDS if lidar_name in self.omit_firings else frozenset())

    def _hits_args(self, lidar_name: str, vehicle_name: str) -> list[Any]:
        """The arguments of ``rtLidarGetHits``: with the options (:meth:`_answer_form`) when there are."""
        form = self._answer_form(lidar_name)
        return [lidar_name, vehicle_name, form] if form else [lidar_name, vehicle_name]

    def _with_form(self, beam: dict[str, Any], lidar_name: str) -> dict[str, Any]:
        """``beam`` with the entries of :meth:`_answer_form`."""
        return {**beam, **self._answer_form(lidar_name)}

    def _answer_form(self, lidar_name: str) -> dict[str, Any]:
        """The hits calls' options for ``lidar_name``: ``omit`` when :meth:`omit_for` names any,
        ``compact`` when :attr:`compact` is set."""
        omit = self.omit_for(lidar_name)
        form: dict[str, Any] = {"omit": sorted(omit)} if omit else {}
        if self.compact:
            form["compact"] = True
        return form

    def _decode(
        self, answer: Any, segment: ShmSegment | None = None, omit: frozenset[str] | None = None
    ) -> LidarHits:
        """:func:`decode_hits` of the answer to a call that asked to omit ``omit`` (None: the current
        :attr:`omit_fields`)."""
        return decode_hits(answer, segment, self.omit_fields if omit is None else omit)

    def _stop_shm(self, reason: str) -> None:
        """TCP for good: the free segments go now, the lent ones as their answers come."""
        with self._shm_lock:
            self.shm_refused = reason
            for segment in self._free:
                segment.close()
            self._free.clear()

    def _lend(self) -> ShmSegment | None:
        """A segment of the ring for one request (None: TCP, shared memory refused or the ring full)."""
        with self._shm_lock:
            if self.shm_refused is not None or len(self._lent) >= MAX_RING_SEGMENTS:
                return None
            while self._free:
                segment = self._free.pop()
                if segment.size >= self._shm_size:
                    self._lent.append(segment)
                    return segment
                segment.close()  # smaller than an answer needed
            try:
                segment = ShmSegment(self._shm_size)
            except OSError as exc:  # /dev/shm full or gone: TCP from now on
                self.shm_refused = f"cannot create a segment: {exc}"
                return None
            self._lent.append(segment)
            return segment

    def _give_back(self, segment: ShmSegment, reusable: bool = True) -> None:
        """``segment``'s answer is decoded (or its request failed): back to the ring when ``reusable``
        (the server answered, so it writes no more into it), else removed (its request was lost with
        the connection: the server may still be writing it)."""
        with self._shm_lock:
            if segment in self._lent:
                self._lent.remove(segment)
            keep = reusable and self.shm_refused is None and segment.size >= self._shm_size
            if keep and not segment.closed:
                self._free.append(segment)
            else:
                segment.close()

    def _decode_offered(
        self, answer: Any, segment: ShmSegment, omit: frozenset[str] | None = None
    ) -> LidarHits:
        """Decode the answer to a request that offered ``segment`` (and asked to omit ``omit``); one
        that came inline says why: a bigger segment for the next offers (``shm_needed``), or TCP for good."""
        if isinstance(answer, Mapping) and isinstance(answer.get("shm"), Mapping):
            hits = self._decode(answer, segment, omit)
            self._shm_taken = True
            self.transport = "shm"
            return hits
        hits = self._decode(answer, None, omit)
        self.transport = "tcp"
        if not self._grow_for(answer):
            why = answer.get("shm_refused") if isinstance(answer, Mapping) else None
            self._stop_shm(str(why or "the server answered without shared memory"))
        return hits

    def _grow_for(self, answer: Any) -> bool:
        """When ``answer`` came inline because its segment was too small (``shm_needed``), make the
        ring's next segments big enough; True then."""
        needed = answer.get("shm_needed") if isinstance(answer, Mapping) else None
        if not isinstance(needed, int) or isinstance(needed, bool) or needed > MAX_SEGMENT_BYTES:
            return False
        self._shm_taken = True
        with self._shm_lock:
            self._shm_size = max(self._shm_size, min(needed + needed // 4, MAX_SEGMENT_BYTES))
        return True

    def _shm_call(self, lidar_name: str, vehicle_name: str, beam: dict[str, Any]) -> LidarHits:
        """``rtLidarGetBeamHits`` with ``beam`` plus the offer of a segment of the ring."""
        segment = self._lend()
        if segment is None:
            self.transport = "tcp"
            omit = self.omit_for(lidar_name)
            if beam:
                args = [lidar_name, vehicle_name, self._with_form(beam, lidar_name)]
                return self._decode(self.rpc.call(BEAM_HITS_METHOD, *args), None, omit)
            return self._decode(
                self.rpc.call("rtLidarGetHits", *self._hits_args(lidar_name, vehicle_name)), None, omit
            )
        answered = False
        try:
            try:
                answer = self.rpc.call(
                    BEAM_HITS_METHOD,
                    lidar_name,
                    vehicle_name,
                    self._with_form({**beam, "transport": segment.offer()}, lidar_name),
                )
            except RpcError:
                answered = True
                raise
            answered = True
            return self._decode_offered(answer, segment, self.omit_for(lidar_name))
        finally:
            self._give_back(segment, reusable=answered)

    def rt_lidar_get_beam_hits(
        self,
        lidar_name: str,
        vehicle_name: str,
        offsets_rad: Any = None,
        weights: Any = None,
        sun: SunArg = None,
        poses: bool = False,
        full: FullBeamRequest | None = None,
    ) -> LidarHits:
        """Extension ``rtLidarGetBeamHits`` (our server only): like :meth:`rt_lidar_get_hits` with every
        firing cast as ``len(weights)`` sub-rays at angular ``offsets_rad`` (N, 2) rad (horizontal,
        vertical) from its direction, pulse-major; ``info["sub_rays"]`` says N. ``sun`` (a project-frame
        unit vector towards the sun, or ``"scene"`` for the server's) asks for the per-ray sun cosines
        (extras ``sun_cos`` / ``beam_sun_cos``, ``info["sun_direction"]``); without offsets and weights,
        one ray a pulse. A server without the call raises an :class:`~rt_lidar.unreal_bridge.errors.RpcError`
        whose ``unbound`` is true; a server that predates the sun entry answers without those fields.
        ``poses``: as for :meth:`rt_lidar_get_hits`. ``full``: ``--beam full``, the bundle only where the
        server finds the footprint needs it (``info.full_beam``, :data:`.beam_call.FULL_BEAM_INFO`;
        a server that does not know it answers with every pulse's bundle)."""
        beam = encode_beam(offsets_rad, weights, sun, poses, full)
        if self.shm_refused is None:
            return self._shm_call(lidar_name, vehicle_name, beam)
        self.transport = "tcp"
        answer = self.rpc.call(BEAM_HITS_METHOD, lidar_name, vehicle_name, self._with_form(beam, lidar_name))
        return self._decode(answer, None, self.omit_for(lidar_name))

    def sim_get_images(
        self, requests: Sequence[ImageRequest], vehicle_name: str = "", external: bool = False
    ) -> list[FluImage]:
        """``simGetImages``: one image a request, camera poses in the project frame."""
        reqs = [r.to_msgpack() for r in requests]
        raw = self._call_forms("simGetImages", [(reqs, vehicle_name, external), (reqs, vehicle_name)])
        return [FluImage.from_wire(ImageResponse.from_msgpack(r)) for r in raw or []]

    def sim_get_image(
        self, camera_name: str, image_type: int, vehicle_name: str = "", external: bool = False
    ) -> bytes | None:
        """``simGetImage``: the compressed (PNG) image, or None when the server has none."""
        result = self.rpc.call("simGetImage", str(camera_name), int(image_type), vehicle_name, external)
        if isinstance(result, str):
            result = result.encode("latin-1")
        return None if not result or result == b"\0" else bytes(result)

    # poses and objects -----------------------------------------------------------------------------
    def sim_get_vehicle_pose(self, vehicle_name: str = "") -> FluPose:
        """``simGetVehiclePose``."""
        return pose_ned_to_flu(Pose.from_msgpack(self.rpc.call("simGetVehiclePose", vehicle_name)))

    def sim_set_vehicle_pose(
        self, pose: FluPose, ignore_collision: bool = True, vehicle_name: str = ""
    ) -> None:
        """``simSetVehiclePose``."""
        self.rpc.call("simSetVehiclePose", pose_flu_to_ned(pose).to_msgpack(), ignore_collision, vehicle_name)

    def sim_get_object_pose(self, object_name: str) -> FluPose:
        """``simGetObjectPose`` (NaN pose for an unknown object, as AirSim answers)."""
        raw = self._call_forms("simGetObjectPose", [(object_name,), (object_name, True)])
        return pose_ned_to_flu(Pose.from_msgpack(raw))

    def sim_list_scene_objects(self, name_regex: str = ".*") -> list[str]:
        """``simListSceneObjects``."""
        return list(self.rpc.call("simListSceneObjects", name_regex))

    def sim_set_segmentation_object_id(
        self, mesh_name: str, object_id: int, is_name_regex: bool = False
    ) -> bool:
        """``simSetSegmentationObjectID``: True when some mesh matched."""
        return bool(self.rpc.call("simSetSegmentationObjectID", mesh_name, int(object_id), is_name_regex))

    def sim_get_segmentation_object_id(self, mesh_name: str) -> int:
        """``simGetSegmentationObjectID`` (-1 for an unknown mesh)."""
        return int(self.rpc.call("simGetSegmentationObjectID", mesh_name))

    def rt_lidar_server_info(self) -> dict[str, Any]:
        """Extension ``rtLidarServerInfo``: how the server serves (``{"in_order": True}`` from ours);
        empty from a server without the call."""
        try:
            info = self.rpc.call("rtLidarServerInfo")
        except RpcError as exc:
            if exc.unbound:
                return {}
            raise
        return dict(info) if isinstance(info, Mapping) else {}

    def send_frame_request(
        self,
        seconds: float | None,
        lidar_name: str = "",
        vehicle_name: str = "",
        beam: dict[str, Any] | None = None,
    ) -> FrameRequest:
        """Send ``simContinueForTime(seconds)`` and the frame's hits call without waiting (the next
        lockstep frame asked ahead, see :meth:`RpcClient.send_request`); :meth:`read_frame` takes the
        answer. The server casts the frame while this side still works on the previous one. With
        ``seconds`` None only the hits call goes: a rig's other lidar reading the frame the first one's
        request advanced the sim to.

        The hits call is ``rtLidarGetHits``, or ``rtLidarGetBeamHits`` with ``beam`` (an
        :func:`~rt_lidar.unreal_bridge.beam_call.encode_beam` dict: sub-rays, sun, pose samples) as
        :meth:`rt_lidar_get_beam_hits` sends it. Once the server has taken an offer of shared memory
        (any extension call before, as the controller's first), it is ``rtLidarGetBeamHits`` offering a
        segment of the ring of its own, so several frames asked ahead are written at once."""
        advance = None if seconds is None else self.rpc.send_request("simContinueForTime", [float(seconds)])
        segment = self._lend() if self._shm_taken else None
        omit = self.omit_for(lidar_name)
        if segment is None:
            if beam:
                args = [lidar_name, vehicle_name, self._with_form(beam, lidar_name)]
                return FrameRequest(advance, self.rpc.send_request(BEAM_HITS_METHOD, args), omit=omit)
            hits = self.rpc.send_request("rtLidarGetHits", self._hits_args(lidar_name, vehicle_name))
            return FrameRequest(advance, hits, omit=omit)
        try:
            form = self._with_form({**(beam or {}), "transport": segment.offer()}, lidar_name)
            hits = self.rpc.send_request(BEAM_HITS_METHOD, [lidar_name, vehicle_name, form])
        except BaseException:
            self._give_back(segment, reusable=False)
            raise
        return FrameRequest(advance, hits, segment, omit)

    def read_frame(self, request: FrameRequest, before_decode: Callable[[], None] | None = None) -> LidarHits:
        """The hits of a frame :meth:`send_frame_request` asked for; ``before_decode`` runs once its
        bytes are in, before they are turned into arrays (to ask for the next frame meanwhile); an answer
        that came inline because its segment was too small has grown the ring's size by then, so the
        frames asked next fit. Its segment goes back to the ring once decoded (removed instead when its
        answer was lost)."""
        raw = self._frame_answer(request)
        segment = request.segment
        try:
            if segment is not None:  # the frames asked next get a segment the size this one needed
                self._grow_for(raw)
            if before_decode is not None:
                before_decode()
            if segment is not None:
                return self._decode_offered(raw, segment, request.omit)
            self.transport = "tcp"
            return self._decode(raw, None, request.omit)
        finally:
            if segment is not None:
                self._give_back(segment)

    def _frame_answer(self, request: FrameRequest) -> Any:
        """The raw answer to a frame's hits call. When there is none (an error, a lost link) its segment
        goes back to the ring if the server answered the call, else it is removed (the server may still
        be writing it)."""
        answered = False
        try:
            try:
                if request.advance is not None:
                    self.rpc.read_response(request.advance)
            except BridgeError:
                with contextlib.suppress(BridgeError):  # its cast is not wanted: read it off the link
                    answered = self._read_off(request.hits)
                raise
            try:
                return self.rpc.read_response(request.hits)
            except RpcError:
                answered = True
                raise
        except BaseException:
            if request.segment is not None:
                self._give_back(request.segment, reusable=answered)
            raise

    def _read_off(self, msgid: int) -> bool:
        """Read the answer to ``msgid`` and drop it; True once it came (an error answer too)."""
        with contextlib.suppress(RpcError):
            self.rpc.read_response(msgid)
        return True

    # time ------------------------------------------------------------------------------------------
    def sim_pause(self, is_paused: bool) -> None:
        """``simPause``."""
        self.rpc.call("simPause", bool(is_paused))

    def sim_is_paused(self) -> bool:
        """``simIsPaused``."""
        return bool(self.rpc.call("simIsPaused"))

    def sim_continue_for_time(self, seconds: float) -> None:
        """``simContinueForTime``: run the sim for ``seconds`` of sim time, then pause."""
        self.rpc.call("simContinueForTime", float(seconds))

    def sim_continue_for_frames(self, frames: int) -> None:
        """``simContinueForFrames``: run the sim for ``frames`` frames, then pause."""
        self.rpc.call("simContinueForFrames", int(frames))

    # car -------------------------------------------------------------------------------------------
    def get_car_state(self, vehicle_name: str = "") -> FluCarState:
        """``getCarState``, kinematics in the project frame."""
        return car_state_ned_to_flu(CarState.from_msgpack(self.rpc.call("getCarState", vehicle_name)))

    def set_car_controls(self, controls: CarControls, vehicle_name: str = "") -> None:
        """``setCarControls``."""
        self.rpc.call("setCarControls", controls.to_msgpack(), vehicle_name)

    def enable_api_control(self, is_enabled: bool, vehicle_name: str = "") -> None:
        """``enableApiControl``."""
        self.rpc.call("enableApiControl", bool(is_enabled), vehicle_name)

    def is_api_control_enabled(self, vehicle_name: str = "") -> bool:
        """``isApiControlEnabled``."""
        return bool(self.rpc.call("isApiControlEnabled", vehicle_name))

    def reset(self) -> None:
        """``reset``."""
        self.rpc.call("reset")

    # settings and weather --------------------------------------------------------------------------
    def get_settings_string(self) -> str:
        """``getSettingsString``: the server's settings.json text."""
        return str(self.rpc.call("getSettingsString"))

    def list_vehicles(self) -> list[str]:
        """``listVehicles``."""
        return list(self.rpc.call("listVehicles"))

    def sim_enable_weather(self, enable: bool) -> None:
        """``simEnableWeather``."""
        self.rpc.call("simEnableWeather", bool(enable))

    def sim_set_weather_parameter(self, param: int, value: float) -> None:
        """``simSetWeatherParameter`` (param as AirSim's ``WeatherParameter``: 0 rain, ... 7 fog)."""
        self.rpc.call("simSetWeatherParameter", int(param), float(value))
