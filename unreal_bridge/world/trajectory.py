"""Scripted trajectories: where an object (or the ego car) is at time t, vectorised over t."""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import WorldError
from .interp import compiled, interp_columns, table_slopes
from .pose import Pose, quat_from_yaw, quat_multiply

__all__ = ["ConstantVelocity", "Looping", "StaticTrajectory", "Trajectory", "WaypointTrajectory"]

F64 = NDArray[np.float64]


@runtime_checkable
class Trajectory(Protocol):
    """A pose as a function of time (seconds); the pose maps the object frame into the world frame."""

    def positions_rotations(self, t: NDArray[np.float64]) -> tuple[F64, F64]:
        """Positions (K, 3) and quaternions (K, 4) (w, x, y, z) at times t (K,)."""
        ...

    def pose_at(self, t: float) -> Pose:
        """The pose at one time."""
        ...


_ZERO_YAWS = np.array([0.0, -0.0])
"""The yaws a zero yaw rate gives (w * t is +0 or -0), in the order np.signbit indexes them."""


def _times(t: ArrayLike) -> F64:
    """``t`` as a 1-D float64 array: itself when it is one (as every cast's per-ray times are), where
    ``atleast_1d(asarray(t)).reshape(-1)`` would give a view of the same elements at ~3 us a call."""
    if type(t) is np.ndarray and t.ndim == 1 and t.dtype == np.float64:
        return t
    return np.atleast_1d(np.asarray(t, dtype=np.float64)).reshape(-1)


def wrap_times(t: F64, period: float) -> F64:
    """``np.mod(t, period)`` (``period`` > 0), the same bits, cheaper for a batch of times that lie
    within one period ``[n P, (n + 1) P)`` whose start ``n P`` is exactly representable (a frame's
    rays): there the remainder is ``t - n P``, which the subtraction gives exactly (Sterbenz: ``n P
    <= t <= 2 n P``) at a fraction of the division's cost. Any other batch (several periods, negative,
    NaN or infinite times) takes ``np.mod``."""
    if t.size == 0:
        return np.mod(t, period)
    lo, hi = float(t.min()), float(t.max())  # NaN: every comparison below is False
    if not 0.0 <= lo <= hi:
        return np.mod(t, period)
    start = (lo // period) * period
    if start == 0.0:  # the first period: the times themselves (+ 0.0 turns a -0.0 into np.mod's +0.0)
        return t + 0.0 if hi < period else np.mod(t, period)
    exact = math.fmod(start, period) == 0.0  # start is n P with no rounding
    if exact and start <= lo and hi - start < period:  # (hi - start is exact whenever it is < start)
        return t - start
    return np.mod(t, period)


class StaticTrajectory:
    """An object that never moves."""

    def __init__(self, pose: Pose | None = None) -> None:
        self.pose = pose if pose is not None else Pose.identity()

    def positions_rotations(self, t: NDArray[np.float64]) -> tuple[F64, F64]:
        """The fixed pose repeated for every time in t."""
        k = _times(t).shape[0]
        return np.tile(self.pose.position, (k, 1)), np.tile(self.pose.rotation, (k, 1))

    def pose_at(self, t: float) -> Pose:
        """The fixed pose."""
        return self.pose

    def __repr__(self) -> str:
        return f"StaticTrajectory({self.pose!r})"


class ConstantVelocity:
    """Constant speed with a constant turn rate (CTRV), from ``start`` at t = 0.

    ``velocity_xyz`` is the world-frame velocity at t = 0 (m/s). With ``yaw_rate`` (rad/s) both the
    heading and the horizontal velocity turn about world +z at that rate, so the path is a circle
    arc; with ``yaw_rate == 0`` it is the straight line ``start.position + velocity_xyz * t``.
    """

    def __init__(self, start: Pose, velocity_xyz: ArrayLike, yaw_rate: float = 0.0) -> None:
        v = np.asarray(velocity_xyz, dtype=np.float64).reshape(-1)
        if v.shape != (3,) or not np.all(np.isfinite(v)):
            raise WorldError(f"ConstantVelocity.velocity_xyz must be 3 finite numbers, got {velocity_xyz!r}")
        if not np.isfinite(yaw_rate):
            raise WorldError(f"ConstantVelocity.yaw_rate must be finite, got {yaw_rate!r}")
        self.start = start
        self.velocity = v
        self.yaw_rate = float(yaw_rate)
        self._zero_yaw: tuple[Pose, F64] | None = None
        """The start pose and its rotations at yaw +0 and -0 (what every time gives at a zero yaw rate),
        as the general formula computes them."""

    def positions_rotations(self, t: NDArray[np.float64]) -> tuple[F64, F64]:
        """Positions (K, 3) and quaternions (K, 4) at times t (K,)."""
        tt = _times(t)
        w = self.yaw_rate
        steps = compiled()
        if w == 0.0 and steps is not None and tt.flags.c_contiguous:  # the twin of the lines below
            pos = np.empty((tt.shape[0], 3), np.float64)
            quat = np.empty((tt.shape[0], 4), np.float64)
            if steps.straight_poses(tt, self.start.position, self.velocity, self._zero_yaw_rows(), pos, quat):
                return pos, quat
        vx, vy, vz = self.velocity
        if abs(w) < 1e-12:
            dx, dy = vx * tt, vy * tt
        else:
            s, c = np.sin(w * tt), np.cos(w * tt)
            dx = (vx * s + vy * (c - 1.0)) / w
            dy = (vx * (1.0 - c) + vy * s) / w
        # start + step column by column: the same sums as broadcasting the (3,) start over (K, 3) rows,
        # which NumPy runs as K loops of length 3, an order of magnitude slower
        px, py, pz = self.start.position
        pos = np.empty((tt.shape[0], 3), np.float64)
        np.add(px, dx, out=pos[:, 0])
        np.add(py, dy, out=pos[:, 1])
        np.add(pz, vz * tt, out=pos[:, 2])
        yaw = w * tt
        if w == 0.0 and not np.isnan(yaw).any():  # every yaw is +0 or -0: pick one of their two rotations
            rows = self._zero_yaw_rows()
            negative = np.signbit(yaw)
            if negative.any():
                return pos, np.take(rows, negative.view(np.uint8), axis=0)
            return pos, np.repeat(rows[:1], tt.shape[0], axis=0)  # every yaw +0 (t >= 0)
        return pos, quat_multiply(quat_from_yaw(yaw), self.start.rotation)

    def _zero_yaw_rows(self) -> F64:
        """The start rotation at yaw +0 and at yaw -0 (2, 4), as the general formula computes them."""
        if self._zero_yaw is None or self._zero_yaw[0] is not self.start:
            rows = quat_multiply(quat_from_yaw(_ZERO_YAWS), self.start.rotation)
            self._zero_yaw = (self.start, np.ascontiguousarray(rows, np.float64))
        return self._zero_yaw[1]

    def pose_at(self, t: float) -> Pose:
        """The pose at time t."""
        p, q = self.positions_rotations(np.array([t]))
        return Pose(p[0], q[0])

    def __repr__(self) -> str:
        return f"ConstantVelocity({self.start!r}, {self.velocity.tolist()}, yaw_rate={self.yaw_rate})"


class Looping:
    """``inner`` replayed every ``period_s`` seconds: its pose at ``t mod period_s`` (a jump back to the
    start at each period; a street scene uses it so that a live session never runs out of street)."""

    def __init__(self, inner: Trajectory, period_s: float) -> None:
        if not (np.isfinite(period_s) and period_s > 0):
            raise WorldError(f"Looping.period_s must be a positive number of seconds, got {period_s!r}")
        self.inner = inner
        self.period_s = float(period_s)

    def positions_rotations(self, t: NDArray[np.float64]) -> tuple[F64, F64]:
        """Positions (K, 3) and quaternions (K, 4) at times t (K,)."""
        return self.inner.positions_rotations(wrap_times(_times(t), self.period_s))

    def pose_at(self, t: float) -> Pose:
        """The pose at time t."""
        return self.inner.pose_at(float(np.mod(float(t), self.period_s)))

    def __repr__(self) -> str:
        return f"Looping({self.inner!r}, period_s={self.period_s})"


class WaypointTrajectory:
    """Piecewise-linear motion through timed waypoints; holds the first/last pose outside them.

    ``yaws`` (K,) radians; when None the heading follows the direction of travel of the current
    segment (yaw only, the object stays level), and a stop keeps the previous heading.
    """

    def __init__(self, times: ArrayLike, positions: ArrayLike, yaws: ArrayLike | None = None) -> None:
        tt = np.asarray(times, dtype=np.float64).reshape(-1)
        pp = np.asarray(positions, dtype=np.float64)
        if tt.shape[0] < 1 or pp.shape != (tt.shape[0], 3):
            raise WorldError(
                f"WaypointTrajectory: positions must be (K, 3) matching times (K,), "
                f"got {pp.shape} and {tt.shape}"
            )
        if not (np.all(np.isfinite(tt)) and np.all(np.isfinite(pp))):
            raise WorldError("WaypointTrajectory: times and positions must be finite")
        if np.any(np.diff(tt) <= 0):
            raise WorldError("WaypointTrajectory: times must be strictly increasing")
        self.times = tt
        self.positions = pp
        self._slopes = table_slopes(tt, pp) if tt.shape[0] >= 2 else None
        self._inner_times = np.ascontiguousarray(tt[1:-1])
        """The waypoint times but the first and last: a time on segment ``j`` >= 1 has reached the
        inner waypoints 1 .. ``j`` (:meth:`segment_index`)."""
        if yaws is None:
            seg = np.diff(pp[:, :2], axis=0)
            seg_yaw = np.zeros(max(len(tt) - 1, 1))
            last = 0.0
            first_set = False
            for i, (dx, dy) in enumerate(seg):
                if np.hypot(dx, dy) > 1e-9:
                    last = float(np.arctan2(dy, dx))
                    if not first_set:
                        seg_yaw[:i] = last
                        first_set = True
                seg_yaw[i] = last
            self.segment_yaws: F64 | None = seg_yaw
            self.yaws: F64 | None = None
            self._segment_rotations = quat_from_yaw(seg_yaw)
            """quat_from_yaw of each segment's yaw: the rows every time on that segment takes."""
        else:
            yy = np.unwrap(np.asarray(yaws, dtype=np.float64).reshape(-1))
            if yy.shape != tt.shape:
                raise WorldError(f"WaypointTrajectory: yaws must be (K,) = {tt.shape}, got {yy.shape}")
            self.yaws = yy
            self.segment_yaws = None

    def positions_rotations(self, t: NDArray[np.float64]) -> tuple[F64, F64]:
        """Positions (K, 3) and quaternions (K, 4) at times t (K,)."""
        tq = _times(t)
        pos = interp_columns(tq, self.times, self.positions, self._slopes)
        if self.yaws is not None:
            return pos, quat_from_yaw(np.interp(tq, self.times, self.yaws))
        return pos, np.take(self._segment_rotations, self.segment_index(tq), axis=0)

    def segment_index(self, t: NDArray[np.float64]) -> NDArray[np.intp]:
        """(K,) the segment of each time ``t`` (K,) whose heading it takes (no yaws given): the last
        waypoint at or before it, held to ``0 .. len(segment_yaws) - 1`` (before the first waypoint the
        first segment, from the last on the last one, NaN the last one). That is
        ``clip(searchsorted(times, t, "right") - 1, 0, len(segment_yaws) - 1)``, the same integers, as
        one search of the inner waypoint times: how many of them each time has reached (no clip, whose
        call costs ~50 us in each of a frame's ~15 casts at a moving object)."""
        return np.searchsorted(self._inner_times, t, side="right")

    def pose_at(self, t: float) -> Pose:
        """The pose at time t."""
        p, q = self.positions_rotations(np.array([t]))
        return Pose(p[0], q[0])
