"""Rigid poses and vectorised quaternion helpers (w, x, y, z; x forward, y left, z up)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import WorldError

__all__ = [
    "Pose",
    "quat_conjugate",
    "quat_from_yaw",
    "quat_multiply",
    "quat_rotate",
    "quat_to_matrix",
]

F64 = NDArray[np.float64]


def quat_multiply(a: ArrayLike, b: ArrayLike) -> F64:
    """Hamilton product a * b of quaternions (..., 4) in (w, x, y, z) order, broadcast."""
    qa = np.asarray(a, dtype=np.float64)
    qb = np.asarray(b, dtype=np.float64)
    aw, ax, ay, az = qa[..., 0], qa[..., 1], qa[..., 2], qa[..., 3]
    bw, bx, by, bz = qb[..., 0], qb[..., 1], qb[..., 2], qb[..., 3]
    # component by component into one array (np.stack of four rows costs more than the products)
    out = np.empty(np.broadcast_shapes(qa.shape, qb.shape), np.float64)
    out[..., 0] = aw * bw - ax * bx - ay * by - az * bz
    out[..., 1] = aw * bx + ax * bw + ay * bz - az * by
    out[..., 2] = aw * by - ax * bz + ay * bw + az * bx
    out[..., 3] = aw * bz + ax * by - ay * bx + az * bw
    return out


def quat_conjugate(q: ArrayLike) -> F64:
    """Conjugate (the inverse of a unit quaternion), (..., 4)."""
    out = np.array(q, dtype=np.float64, copy=True)
    out[..., 1:] *= -1.0
    return out


def quat_rotate(q: ArrayLike, v: ArrayLike) -> F64:
    """Rotate vectors v (..., 3) by unit quaternions q (..., 4), broadcast, float64: v + w t + u x t with
    t = 2 u x v (u the vector part). The cross products are written out component by component, with
    np.cross's own products and differences (so the same bits), at a fraction of its call overhead."""
    qq = np.asarray(q, dtype=np.float64)
    vv = np.asarray(v, dtype=np.float64)
    w, x, y, z = qq[..., 0], qq[..., 1], qq[..., 2], qq[..., 3]
    vx, vy, vz = vv[..., 0], vv[..., 1], vv[..., 2]
    tx = 2.0 * (y * vz - z * vy)
    ty = 2.0 * (z * vx - x * vz)
    tz = 2.0 * (x * vy - y * vx)
    out = np.empty((*np.broadcast_shapes(qq.shape[:-1], vv.shape[:-1]), 3), np.float64)
    out[..., 0] = vx + w * tx + (y * tz - z * ty)
    out[..., 1] = vy + w * ty + (z * tx - x * tz)
    out[..., 2] = vz + w * tz + (x * ty - y * tx)
    return out


def quat_to_matrix(q: ArrayLike) -> F64:
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4)."""
    qq = np.asarray(q, dtype=np.float64)
    w, x, y, z = np.moveaxis(qq, -1, 0)
    m = np.stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        ],
        axis=-1,
    )
    return m.reshape(*qq.shape[:-1], 3, 3)


def quat_from_yaw(yaw: ArrayLike) -> F64:
    """Quaternions (..., 4) of rotations by yaw radians about +z."""
    h = 0.5 * np.asarray(yaw, dtype=np.float64)
    out = np.zeros((*h.shape, 4), np.float64)
    out[..., 0] = np.cos(h)
    out[..., 3] = np.sin(h)
    return out


def _rpy_quat(roll: float, pitch: float, yaw: float) -> F64:
    cr, sr = np.cos(roll / 2), np.sin(roll / 2)
    cp, sp = np.cos(pitch / 2), np.sin(pitch / 2)
    cy, sy = np.cos(yaw / 2), np.sin(yaw / 2)
    return np.array(
        [
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ]
    )


@dataclass(frozen=True)
class Pose:
    """A rigid transform from a child frame into its parent frame.

    ``position`` (3,) float64 metres, ``rotation`` (4,) float64 unit quaternion (w, x, y, z).
    A point p in the child frame is ``R p + position`` in the parent frame.
    """

    position: F64 = field(default_factory=lambda: np.zeros(3))
    rotation: F64 = field(default_factory=lambda: np.array([1.0, 0.0, 0.0, 0.0]))

    def __post_init__(self) -> None:
        p = np.array(self.position, dtype=np.float64).reshape(-1)
        q = np.array(self.rotation, dtype=np.float64).reshape(-1)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise WorldError(f"Pose.position must be 3 finite numbers, got {self.position!r}")
        norm = float(np.linalg.norm(q)) if q.shape == (4,) else 0.0
        if q.shape != (4,) or not np.isfinite(norm) or norm < 1e-9:
            raise WorldError(
                f"Pose.rotation must be a non-zero (w, x, y, z) quaternion, got {self.rotation!r}"
            )
        p.flags.writeable = False
        q = q / norm
        q.flags.writeable = False
        object.__setattr__(self, "position", p)
        object.__setattr__(self, "rotation", q)

    @classmethod
    def identity(cls) -> Pose:
        """The identity pose."""
        return cls()

    @classmethod
    def from_xyz_rpy(
        cls, x: float, y: float, z: float, roll: float = 0.0, pitch: float = 0.0, yaw: float = 0.0
    ) -> Pose:
        """Pose from a translation and intrinsic Z-Y-X (yaw, then pitch, then roll) angles in radians."""
        return cls(np.array([x, y, z], dtype=np.float64), _rpy_quat(roll, pitch, yaw))

    @classmethod
    def from_matrix(cls, matrix: ArrayLike) -> Pose:
        """Pose from a (4, 4) homogeneous matrix whose upper-left block is a rotation."""
        m = np.asarray(matrix, dtype=np.float64)
        if m.shape != (4, 4):
            raise WorldError(f"Pose.from_matrix needs a (4, 4) matrix, got shape {m.shape}")
        r = m[:3, :3]
        w = np.sqrt(max(0.0, 1.0 + r[0, 0] + r[1, 1] + r[2, 2])) / 2
        x = np.copysign(np.sqrt(max(0.0, 1.0 + r[0, 0] - r[1, 1] - r[2, 2])) / 2, r[2, 1] - r[1, 2])
        y = np.copysign(np.sqrt(max(0.0, 1.0 - r[0, 0] + r[1, 1] - r[2, 2])) / 2, r[0, 2] - r[2, 0])
        z = np.copysign(np.sqrt(max(0.0, 1.0 - r[0, 0] - r[1, 1] + r[2, 2])) / 2, r[1, 0] - r[0, 1])
        return cls(m[:3, 3].copy(), np.array([w, x, y, z]))

    def rpy(self) -> tuple[float, float, float]:
        """(roll, pitch, yaw) radians, the inverse of :meth:`from_xyz_rpy`."""
        w, x, y, z = self.rotation
        roll = float(np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y)))
        pitch = float(np.arcsin(np.clip(2 * (w * y - z * x), -1.0, 1.0)))
        yaw = float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))
        return roll, pitch, yaw

    def rotation_matrix(self) -> F64:
        """The (3, 3) rotation matrix."""
        return quat_to_matrix(self.rotation)

    def matrix(self) -> F64:
        """The (4, 4) homogeneous matrix child -> parent."""
        m = np.eye(4)
        m[:3, :3] = self.rotation_matrix()
        m[:3, 3] = self.position
        return m

    def rotate(self, v: ArrayLike) -> F64:
        """Rotate vectors (N, 3) or (3,) into the parent frame (no translation)."""
        return np.asarray(v, dtype=np.float64) @ self.rotation_matrix().T

    def transform_points(self, p: ArrayLike) -> F64:
        """Map points (N, 3) or (3,) from the child frame into the parent frame."""
        return self.rotate(p) + self.position

    def inverse(self) -> Pose:
        """The pose parent -> child."""
        q_inv = quat_conjugate(self.rotation)
        return Pose(-quat_rotate(q_inv, self.position), q_inv)

    def compose(self, other: Pose) -> Pose:
        """``self * other``: apply ``other`` first, then ``self`` (e.g. ego.compose(sensor_mount))."""
        return Pose(
            self.position + quat_rotate(self.rotation, other.position),
            quat_multiply(self.rotation, other.rotation),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Pose):
            return NotImplemented
        return bool(
            np.array_equal(self.position, other.position) and np.array_equal(self.rotation, other.rotation)
        )

    def __hash__(self) -> int:
        return hash((self.position.tobytes(), self.rotation.tobytes()))
