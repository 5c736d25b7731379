"""AirSim's wire structs, NED as AirSim sends them: each travels as a msgpack map keyed by AirSim's exact
field names (rpclib's ``MSGPACK_DEFINE_MAP``). ``to_msgpack()`` gives that map (NumPy arrays for big
numeric fields, which :func:`unreal_bridge.rpc.pack` writes as float32/int32 arrays); ``from_msgpack()``
reads it, taking defaults for missing fields and ignoring unknown ones (Cosys-AirSim adds some).
:mod:`rt_lidar.unreal_bridge.wire` converts them to and from the project frame."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import numpy as np

from .errors import WireFormatError

__all__ = [
    "CarControls",
    "CarState",
    "CollisionInfo",
    "GeoPoint",
    "ImageRequest",
    "ImageResponse",
    "KinematicsState",
    "LidarData",
    "Pose",
    "Quat",
    "Quaternionr",
    "Vec3",
    "Vector3r",
    "empty_f32",
    "empty_i32",
]

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]  # (w, x, y, z)


class _Struct:
    """Base of the wire structs: a frozen dataclass <-> a msgpack map keyed by field name."""

    #: Fields holding nested structs: name -> struct class.
    _NESTED: ClassVar[dict[str, type[_Struct]]] = {}
    #: Fields holding numeric arrays: name -> NumPy dtype.
    _ARRAYS: ClassVar[dict[str, Any]] = {}

    def to_msgpack(self) -> dict[str, Any]:
        """The msgpack map AirSim sends for this struct."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            out[f.name] = value.to_msgpack() if isinstance(value, _Struct) else value
        return out

    @classmethod
    def from_msgpack(cls, data: Any) -> Self:
        """Read the struct from a decoded msgpack map (missing fields default, unknown ones ignored)."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise WireFormatError(f"{cls.__name__} must be a msgpack map, got {type(data).__name__}")
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name not in data:
                continue
            value = data[f.name]
            try:
                if f.name in cls._NESTED:
                    value = cls._NESTED[f.name].from_msgpack(value)
                elif f.name in cls._ARRAYS:
                    value = np.asarray(value if value is not None else [], dtype=cls._ARRAYS[f.name]).ravel()
                elif isinstance(f.default, bool):
                    value = bool(value)
                elif isinstance(f.default, float):
                    value = float(value)
                elif isinstance(f.default, int):
                    value = int(value)
                elif isinstance(f.default, str):
                    value = value.decode() if isinstance(value, bytes) else str(value)
                elif isinstance(f.default, bytes):
                    value = bytes(value) if isinstance(value, bytes | bytearray) else bytes(list(value or []))
            except (TypeError, ValueError) as exc:
                raise WireFormatError(f"{cls.__name__}.{f.name}: bad value {value!r:.60}: {exc}") from exc
            kwargs[f.name] = value
        return cls(**kwargs)


def empty_f32() -> np.ndarray:
    return np.empty(0, dtype=np.float32)


def empty_i32() -> np.ndarray:
    return np.empty(0, dtype=np.int32)


@dataclass(frozen=True, slots=True)
class Vector3r(_Struct):
    """AirSim ``Vector3r`` (NED when it is a position)."""

    x_val: float = 0.0
    y_val: float = 0.0
    z_val: float = 0.0

    def as_tuple(self) -> Vec3:
        return (self.x_val, self.y_val, self.z_val)


@dataclass(frozen=True, slots=True)
class Quaternionr(_Struct):
    """AirSim ``Quaternionr``: ``w_val`` first on the wire."""

    w_val: float = 1.0
    x_val: float = 0.0
    y_val: float = 0.0
    z_val: float = 0.0

    def as_tuple(self) -> Quat:
        return (self.w_val, self.x_val, self.y_val, self.z_val)


@dataclass(frozen=True, slots=True)
class Pose(_Struct):
    """AirSim ``Pose`` (NED)."""

    position: Vector3r = field(default_factory=Vector3r)
    orientation: Quaternionr = field(default_factory=Quaternionr)
    _NESTED: ClassVar[dict[str, type[_Struct]]] = {"position": Vector3r, "orientation": Quaternionr}


@dataclass(frozen=True, slots=True)
class GeoPoint(_Struct):
    """AirSim ``GeoPoint`` (degrees, metres)."""

    latitude: float = 0.0
    longitude: float = 0.0
    altitude: float = 0.0


@dataclass(frozen=True, slots=True)
class KinematicsState(_Struct):
    """AirSim ``KinematicsState`` (NED)."""

    position: Vector3r = field(default_factory=Vector3r)
    orientation: Quaternionr = field(default_factory=Quaternionr)
    linear_velocity: Vector3r = field(default_factory=Vector3r)
    angular_velocity: Vector3r = field(default_factory=Vector3r)
    linear_acceleration: Vector3r = field(default_factory=Vector3r)
    angular_acceleration: Vector3r = field(default_factory=Vector3r)
    _NESTED: ClassVar[dict[str, type[_Struct]]] = {
        "position": Vector3r,
        "orientation": Quaternionr,
        "linear_velocity": Vector3r,
        "angular_velocity": Vector3r,
        "linear_acceleration": Vector3r,
        "angular_acceleration": Vector3r,
    }


@dataclass(frozen=True, slots=True)
class CollisionInfo(_Struct):
    """AirSim ``CollisionInfo`` (NED)."""

    has_collided: bool = False
    normal: Vector3r = field(default_factory=Vector3r)
    impact_point: Vector3r = field(default_factory=Vector3r)
    position: Vector3r = field(default_factory=Vector3r)
    penetration_depth: float = 0.0
    time_stamp: int = 0
    object_name: str = ""
    object_id: int = -1
    _NESTED: ClassVar[dict[str, type[_Struct]]] = {
        "normal": Vector3r,
        "impact_point": Vector3r,
        "position": Vector3r,
    }


@dataclass(frozen=True, slots=True)
class LidarData(_Struct):
    """AirSim ``LidarData``: flat NED ``point_cloud`` (x0, y0, z0, x1, ...) and per-point segmentation."""

    time_stamp: int = 0
    point_cloud: np.ndarray = field(default_factory=empty_f32)
    pose: Pose = field(default_factory=Pose)
    segmentation: np.ndarray = field(default_factory=empty_i32)
    _NESTED: ClassVar[dict[str, type[_Struct]]] = {"pose": Pose}
    _ARRAYS: ClassVar[dict[str, Any]] = {"point_cloud": np.float32, "segmentation": np.int32}


@dataclass(frozen=True, slots=True)
class ImageRequest(_Struct):
    """AirSim ``ImageRequest`` (Cosys-AirSim adds ``annotation_name``)."""

    camera_name: str = "0"
    image_type: int = 0
    pixels_as_float: bool = False
    compress: bool = True
    annotation_name: str = ""

    def to_msgpack(self) -> dict[str, Any]:
        out = _Struct.to_msgpack(self)
        if not self.annotation_name:  # stock AirSim does not know the field
            del out["annotation_name"]
        return out


@dataclass(frozen=True, slots=True)
class ImageResponse(_Struct):
    """AirSim ``ImageResponse``: ``image_data_uint8`` (bin) or ``image_data_float`` (float32 array)."""

    image_data_uint8: bytes = b""
    image_data_float: np.ndarray = field(default_factory=empty_f32)
    camera_name: str = ""
    camera_position: Vector3r = field(default_factory=Vector3r)
    camera_orientation: Quaternionr = field(default_factory=Quaternionr)
    time_stamp: int = 0
    message: str = ""
    pixels_as_float: bool = False
    compress: bool = True
    width: int = 0
    height: int = 0
    image_type: int = 0
    _NESTED: ClassVar[dict[str, type[_Struct]]] = {
        "camera_position": Vector3r,
        "camera_orientation": Quaternionr,
    }
    _ARRAYS: ClassVar[dict[str, Any]] = {"image_data_float": np.float32}


@dataclass(frozen=True, slots=True)
class CarControls(_Struct):
    """AirSim ``CarControls``."""

    throttle: float = 0.0
    steering: float = 0.0
    brake: float = 0.0
    handbrake: bool = False
    is_manual_gear: bool = False
    manual_gear: int = 0
    gear_immediate: bool = True


@dataclass(frozen=True, slots=True)
class CarState(_Struct):
    """AirSim ``CarState`` (kinematics in NED)."""

    speed: float = 0.0
    gear: int = 0
    rpm: float = 0.0
    maxrpm: float = 0.0
    handbrake: bool = False
    collision: CollisionInfo = field(default_factory=CollisionInfo)
    kinematics_estimated: KinematicsState = field(default_factory=KinematicsState)
    timestamp: int = 0
    _NESTED: ClassVar[dict[str, type[_Struct]]] = {
        "collision": CollisionInfo,
        "kinematics_estimated": KinematicsState,
    }


# ------------------------------------------------------------------------------------ project frame
