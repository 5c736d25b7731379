"""AirSim's wire structs, and the one place NED is converted to and from the project frame.

The structs themselves (msgpack maps keyed by AirSim's field names) are in
:mod:`rt_lidar.unreal_bridge.wire_structs` and importable from here; this module adds the project-frame types,
the conversions and the lidar answers' forms.

Frames. AirSim speaks NED: x forward (north), y right (east), z down. The project frame is FLU as ROS
uses it: x forward, y left, z up. The change is a 180 deg rotation about x, ``(x, y, z) -> (x, -y, -z)``,
its own inverse; a quaternion ``(w, x, y, z)`` becomes ``(w, x, -y, -z)`` (both the world and the body
axes change the same way). Wire structs stay NED; the ``Flu*`` types and :class:`LidarFrame` are in the
project frame. Nothing else in the code base converts frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from . import fast_decode
from .errors import WireFormatError
from .wire_structs import (
    CarControls,
    CarState,
    CollisionInfo,
    GeoPoint,
    ImageRequest,
    ImageResponse,
    KinematicsState,
    LidarData,
    Pose,
    Quat,
    Quaternionr,
    Vec3,
    Vector3r,
    empty_f32,
)

__all__ = [
    "FIRING_FIELDS",
    "LEAN_FIELDS",
    "OMITTABLE_FIELDS",
    "CarControls",
    "CarState",
    "CollisionInfo",
    "FluCarState",
    "FluImage",
    "FluKinematics",
    "FluPose",
    "GeoPoint",
    "ImageRequest",
    "ImageResponse",
    "KinematicsState",
    "LidarData",
    "LidarFrame",
    "LidarHits",
    "Pose",
    "Quaternionr",
    "Vector3r",
    "car_state_flu_to_ned",
    "car_state_ned_to_flu",
    "flu_to_ned_points",
    "flu_to_ned_points_msgpack",
    "flu_to_ned_quaternion",
    "flu_to_ned_vector",
    "kinematics_flu_to_ned",
    "kinematics_ned_to_flu",
    "ned_to_flu_points",
    "ned_to_flu_quaternion",
    "ned_to_flu_vector",
    "pose_flu_to_ned",
    "pose_ned_to_flu",
    "pose_samples_from_wire",
    "pose_samples_to_wire",
]

_FLIP = np.array([1.0, -1.0, -1.0], dtype=np.float32)


@dataclass(frozen=True, slots=True)
class FluPose:
    """A pose in the project frame (x forward, y left, z up): position in metres, unit quaternion wxyz."""

    position: Vec3 = (0.0, 0.0, 0.0)
    orientation: Quat = (1.0, 0.0, 0.0, 0.0)

    def matrix(self) -> np.ndarray:
        """The 4x4 homogeneous transform (float64) of this pose."""
        w, x, y, z = self.orientation
        out = np.eye(4)
        out[:3, :3] = [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
        out[:3, 3] = self.position
        return out


@dataclass(frozen=True, slots=True)
class FluKinematics:
    """Kinematics in the project frame (m, m/s, rad/s, m/s^2, rad/s^2)."""

    pose: FluPose = field(default_factory=FluPose)
    linear_velocity: Vec3 = (0.0, 0.0, 0.0)
    angular_velocity: Vec3 = (0.0, 0.0, 0.0)
    linear_acceleration: Vec3 = (0.0, 0.0, 0.0)
    angular_acceleration: Vec3 = (0.0, 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class FluCarState:
    """A car's state in the project frame; ``timestamp`` in ns."""

    speed: float = 0.0
    gear: int = 0
    rpm: float = 0.0
    maxrpm: float = 0.0
    handbrake: bool = False
    kinematics: FluKinematics = field(default_factory=FluKinematics)
    timestamp: int = 0


@dataclass(frozen=True, slots=True)
class LidarFrame:
    """One lidar answer in the project frame.

    ``points`` (N, 3) float32 in the frame the lidar's ``DataFrame`` setting names (sensor-local or
    vehicle-inertial), converted from NED; ``segmentation`` (N,) int32; ``pose`` the lidar's pose;
    ``time_stamp`` ns.
    """

    points: np.ndarray
    segmentation: np.ndarray
    pose: FluPose
    time_stamp: int


def ned_to_flu_points(points: npt.ArrayLike, copy: bool = True) -> np.ndarray:
    """(N, 3) float32 FLU points from NED points given as (N, 3) or flat (3N,).

    ``copy=False`` converts a float32 array in place (the caller gives up the NED array).
    """
    arr = np.asarray(points, dtype=np.float32)
    if arr.ndim == 1:
        if arr.size % 3:
            raise WireFormatError(f"a flat point cloud needs 3 values a point, got {arr.size} values")
        arr = arr.reshape(-1, 3)
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise WireFormatError(f"points must be (N, 3), got shape {arr.shape}")
    flip = _flip_rows(arr.shape[0])
    if copy or not arr.flags.writeable or not arr.flags.c_contiguous:
        return (arr.reshape(-1) * flip).reshape(-1, 3)
    flat = arr.reshape(-1)
    flat *= flip  # one contiguous pass (negating the strided y, z columns costs 5x more)
    return arr


_flip_cache = np.ones(0, np.float32)


def _flip_rows(n: int) -> np.ndarray:
    """``[1, -1, -1] * n`` as a flat float32 array (a view of one cached, read-only array)."""
    global _flip_cache
    if _flip_cache.size < 3 * n:
        grown = np.tile(_FLIP.astype(np.float32), max(n, 2 * (_flip_cache.size // 3), 1024))
        grown.flags.writeable = False
        _flip_cache = grown
    return _flip_cache[: 3 * n]


def flu_to_ned_points(points: npt.ArrayLike, copy: bool = True) -> np.ndarray:
    """(N, 3) float32 NED points from FLU points (the same flip: it is its own inverse)."""
    return ned_to_flu_points(points, copy)


def flu_to_ned_points_msgpack(points: npt.ArrayLike) -> bytearray:
    """FLU (N, 3) points as the msgpack float32 array of AirSim's flat NED ``point_cloud``."""
    return fast_decode.pack_float32_rows(points, (False, True, True))


def ned_to_flu_vector(v: Sequence[float] | Vector3r) -> Vec3:
    """A NED vector (position, velocity, angular rate, ...) in FLU."""
    x, y, z = v.as_tuple() if isinstance(v, Vector3r) else v
    return (float(x), -float(y), -float(z))


def flu_to_ned_vector(v: Sequence[float]) -> Vector3r:
    """A FLU vector as a NED ``Vector3r``."""
    x, y, z = v
    return Vector3r(float(x), -float(y), -float(z))


def ned_to_flu_quaternion(q: Sequence[float] | Quaternionr) -> Quat:
    """A NED orientation ``(w, x, y, z)`` as the same physical orientation in FLU."""
    w, x, y, z = q.as_tuple() if isinstance(q, Quaternionr) else q
    return (float(w), float(x), -float(y), -float(z))


def flu_to_ned_quaternion(q: Sequence[float]) -> Quaternionr:
    """A FLU orientation ``(w, x, y, z)`` as a NED ``Quaternionr``."""
    w, x, y, z = q
    return Quaternionr(float(w), float(x), -float(y), -float(z))


OMITTABLE_FIELDS = frozenset({"point", "normal"})
"""Core fields of a hits answer a client may ask our server to leave out (``omit``): both follow from the
optional fields (``point`` = ``direction`` x ``range``; ``normal``, for the physics, only through
``cos_incidence``), so a controller that reads those need not receive 1.6 MB a HDL-64E frame twice."""

FIRING_FIELDS = frozenset({"ring", "time", "direction"})
"""Fields of a hits answer that follow from the lidar's firing schedule: a lockstep client that computes
the same schedule (the ``firings`` digest ``rtLidarServerInfo`` gives for its lidar equals its own) may
ask our server to leave them out (``omit``), 22 of a HDL-64E ray's 63 bytes. An answer of sub-ray
bundles keeps them."""

LEAN_FIELDS = OMITTABLE_FIELDS | FIRING_FIELDS
"""Every field a hits call may ask our server to leave out: what a lockstep controller on the server's
schedule asks for (the allowed names of the ``omit`` option)."""

INFO_POSE_SAMPLES = "pose_samples"
"""The answer header (``info``) entry holding the lidar's world poses on the 1 ms grid it cast from."""
_POSE_SAMPLE_FLIP = np.array([1.0, 1.0, -1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
"""(t, x, y, z, qw, qx, qy, qz) FLU <-> NED: the flip of every vector and orientation (exact)."""


def pose_samples_to_wire(samples: npt.ArrayLike) -> dict[str, Any]:
    """(S, 8) float64 rows ``(t_s, x, y, z, qw, qx, qy, qz)`` (project frame) as an ``info.pose_samples``
    entry: a field map ``{"dtype": "<f8", "shape": [S, 8], "data": bin}`` in NED (floats of ``info``
    would go as float32; these must arrive exact)."""
    a = np.asarray(samples, np.float64).reshape(-1, 8) * _POSE_SAMPLE_FLIP
    return {"dtype": "<f8", "shape": [int(a.shape[0]), 8], "data": np.ascontiguousarray(a, "<f8").tobytes()}


def pose_samples_from_wire(spec: Any) -> np.ndarray:
    """An ``info.pose_samples`` entry as (S, 8) float64 rows in the project frame (see
    :func:`pose_samples_to_wire`); raises :class:`WireFormatError` on anything else."""
    if not isinstance(spec, Mapping):
        raise WireFormatError("rtLidarGetHits: info.pose_samples must be a field map")
    shape, data = spec.get("shape"), spec.get("data")
    if (
        spec.get("dtype") != "<f8"
        or not isinstance(data, bytes)
        or not isinstance(shape, list)
        or len(shape) != 2
        or shape[1] != 8
        or not isinstance(shape[0], int)
        or len(data) != shape[0] * 64
    ):
        raise WireFormatError("rtLidarGetHits: info.pose_samples must be <f8 (S, 8) bytes")
    return np.frombuffer(data, "<f8").reshape(shape[0], 8) * _POSE_SAMPLE_FLIP


def pose_ned_to_flu(pose: Pose) -> FluPose:
    """An AirSim pose in the project frame."""
    return FluPose(ned_to_flu_vector(pose.position), ned_to_flu_quaternion(pose.orientation))


def pose_flu_to_ned(pose: FluPose) -> Pose:
    """A project-frame pose as an AirSim pose."""
    return Pose(flu_to_ned_vector(pose.position), flu_to_ned_quaternion(pose.orientation))


def kinematics_ned_to_flu(k: KinematicsState) -> FluKinematics:
    """AirSim kinematics in the project frame."""
    return FluKinematics(
        FluPose(ned_to_flu_vector(k.position), ned_to_flu_quaternion(k.orientation)),
        ned_to_flu_vector(k.linear_velocity),
        ned_to_flu_vector(k.angular_velocity),
        ned_to_flu_vector(k.linear_acceleration),
        ned_to_flu_vector(k.angular_acceleration),
    )


def kinematics_flu_to_ned(k: FluKinematics) -> KinematicsState:
    """Project-frame kinematics as AirSim's."""
    pose = pose_flu_to_ned(k.pose)
    return KinematicsState(
        pose.position,
        pose.orientation,
        flu_to_ned_vector(k.linear_velocity),
        flu_to_ned_vector(k.angular_velocity),
        flu_to_ned_vector(k.linear_acceleration),
        flu_to_ned_vector(k.angular_acceleration),
    )


def car_state_ned_to_flu(s: CarState) -> FluCarState:
    """An AirSim car state in the project frame (the collision record is dropped)."""
    return FluCarState(
        s.speed,
        s.gear,
        s.rpm,
        s.maxrpm,
        s.handbrake,
        kinematics_ned_to_flu(s.kinematics_estimated),
        s.timestamp,
    )


def car_state_flu_to_ned(s: FluCarState) -> CarState:
    """A project-frame car state as AirSim's ``CarState``."""
    return CarState(
        speed=s.speed,
        gear=s.gear,
        rpm=s.rpm,
        maxrpm=s.maxrpm,
        handbrake=s.handbrake,
        kinematics_estimated=kinematics_flu_to_ned(s.kinematics),
        timestamp=s.timestamp,
    )


@dataclass(frozen=True, slots=True)
class FluImage:
    """One camera image with the camera pose in the project frame (AirSim's ``ImageResponse`` otherwise).

    ``data_uint8`` holds PNG bytes when ``compress`` else raw pixels (AirSim: 3 bytes a pixel, BGR);
    ``data_float`` float32 pixels when ``pixels_as_float``.
    """

    camera_name: str = ""
    image_type: int = 0
    width: int = 0
    height: int = 0
    data_uint8: bytes = b""
    data_float: np.ndarray = field(default_factory=empty_f32)
    pixels_as_float: bool = False
    compress: bool = True
    camera_pose: FluPose = field(default_factory=FluPose)
    time_stamp: int = 0
    message: str = ""

    def to_wire(self) -> ImageResponse:
        """As AirSim's ``ImageResponse`` (NED camera pose)."""
        pose = pose_flu_to_ned(self.camera_pose)
        return ImageResponse(
            self.data_uint8,
            np.asarray(self.data_float, dtype=np.float32).ravel(),
            self.camera_name,
            pose.position,
            pose.orientation,
            self.time_stamp,
            self.message,
            self.pixels_as_float,
            self.compress,
            self.width,
            self.height,
            self.image_type,
        )

    @classmethod
    def from_wire(cls, r: ImageResponse) -> FluImage:
        """From AirSim's ``ImageResponse``."""
        return cls(
            r.camera_name,
            r.image_type,
            r.width,
            r.height,
            r.image_data_uint8,
            r.image_data_float,
            r.pixels_as_float,
            r.compress,
            pose_ned_to_flu(Pose(r.camera_position, r.camera_orientation)),
            r.time_stamp,
            r.message,
        )


@dataclass(frozen=True, slots=True)
class LidarHits:
    """Every ray of one lidar answer with what stock AirSim does not send (extension ``rtLidarGetHits``).

    All arrays have one row per ray fired, hits and misses: ``points`` (N, 3) float32 and ``normals``
    (N, 3) float32 (unit, zero for a miss) in the project frame, ``segmentation`` (N,) int32, ``ring``
    (N,) uint16, ``time`` (N,) int64 ns firing time on the ``time_stamp`` clock, ``range`` (N,) float32 m
    (NaN for a miss), ``miss`` (N,) bool.

    ``extras`` holds optional per-ray arrays a server may add (our embedded server: ``direction`` (N, 3)
    unit ray direction in the lidar frame, project axes, ``cos_incidence``, ``material`` indexing
    ``info["materials"]``, and the ``glass_*`` fields of the first transmissive surface crossed);
    ``info`` optional header values (``materials``, ``t0_ns`` / ``t1_ns`` of the swept interval,
    ``weather``). Vector extras are converted like every other vector.
    """

    points: np.ndarray
    normals: np.ndarray
    segmentation: np.ndarray
    ring: np.ndarray
    time: np.ndarray
    range: np.ndarray
    miss: np.ndarray
    pose: FluPose
    time_stamp: int
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)
    omitted: frozenset[str] = frozenset()
    """The fields the answer left out (``omit``): core ones read as zeros, extras are absent."""
