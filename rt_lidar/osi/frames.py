"""OSI's units, frames and small messages: poses (quaternion <-> roll/pitch/yaw), timestamps, ids.

OSI's frames are right-handed with z up (ISO 8855): x forward, y left, z up in a vehicle or sensor frame,
as rt-lidar's. Orientations are ``Orientation3d`` (roll, pitch, yaw in rad, applied yaw about z, then
pitch about the new y, then roll about the new x); times are ``Timestamp`` (seconds, nanos).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError

__all__ = [
    "NO_ID",
    "SPEED_OF_LIGHT_M_S",
    "interface_version",
    "osi_version",
    "quat_from_rpy",
    "require_osi",
    "rpy_from_quat",
    "set_mounting",
    "set_pose",
    "set_timestamp",
    "set_vector",
    "timestamp_ns",
]

SPEED_OF_LIGHT_M_S = 299_792_458.0
"""c in vacuum (m/s): time of flight = 2 R / c."""
NO_ID = 2**64 - 1
"""OSI's "no object" identifier, MAX(uint64)."""


def require_osi() -> None:
    """Raise a :class:`ConfigError` naming the extra when OSI's Python bindings (``osi3``) are missing."""
    try:
        import osi3.osi_sensorview_pb2  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"ASAM OSI needs the 'osi3' module of the osi-python package: pip install 'rt-lidar[osi]' ({exc})"
        ) from None


def interface_version(msg: Any) -> None:
    """Set ``msg.version`` to the OSI version of the installed bindings."""
    from osi3 import osi_version_pb2

    v = osi_version_pb2.DESCRIPTOR.GetOptions().Extensions[osi_version_pb2.current_interface_version]
    msg.version.CopyFrom(v)


def osi_version() -> str:
    """``major.minor.patch`` of the installed OSI bindings."""
    from osi3 import osi_version_pb2

    v = osi_version_pb2.DESCRIPTOR.GetOptions().Extensions[osi_version_pb2.current_interface_version]
    return f"{v.version_major}.{v.version_minor}.{v.version_patch}"


def rpy_from_quat(q: np.ndarray) -> tuple[float, float, float]:
    """(roll, pitch, yaw) in rad of a unit quaternion (w, x, y, z), OSI's z-y'-x'' order."""
    w, x, y, z = (float(v) for v in q)
    roll = math.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2.0 * (w * y - z * x))))
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return roll, pitch, yaw


def quat_from_rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """The unit quaternion (w, x, y, z) of OSI's (roll, pitch, yaw)."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return np.array(
        [
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ],
        np.float64,
    )


def set_vector(msg: Any, v: Any) -> None:
    """Fill a ``Vector3d`` from three numbers."""
    msg.x, msg.y, msg.z = (float(c) for c in v)


def set_pose(position_msg: Any, orientation_msg: Any, position: Any, quat: Any) -> None:
    """Fill a ``Vector3d`` and an ``Orientation3d`` from a position and a quaternion (w, x, y, z)."""
    set_vector(position_msg, position)
    orientation_msg.roll, orientation_msg.pitch, orientation_msg.yaw = rpy_from_quat(np.asarray(quat))


def set_mounting(msg: Any, mount: tuple[float, ...]) -> None:
    """Fill a ``MountingPosition`` from rt-lidar's mount (x, y, z, qw, qx, qy, qz in the vehicle frame)."""
    set_pose(msg.position, msg.orientation, mount[:3], mount[3:7])


def set_timestamp(msg: Any, t_ns: int) -> None:
    """Fill a ``Timestamp`` (seconds, nanos) from integer nanoseconds."""
    msg.seconds, msg.nanos = divmod(int(t_ns), 1_000_000_000)


def timestamp_ns(msg: Any) -> int:
    """Integer nanoseconds of a ``Timestamp``."""
    return int(msg.seconds) * 1_000_000_000 + int(msg.nanos)
