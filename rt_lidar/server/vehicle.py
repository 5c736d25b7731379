"""A kinematic bicycle model of the ego car, driven by AirSim-style car controls.

State: position (x, y) on the ground plane of the world (x forward, y left, z up), heading ``yaw``
(rad, counter-clockwise from +x) and signed speed ``v`` (m/s, along the heading). Controls follow
AirSim's ``CarControls``: ``throttle`` in [-1, 1] (negative drives backwards), ``steering`` in [-1, 1]
(positive turns right, as in AirSim), ``brake`` in [0, 1], ``handbrake``.

The model records its pose after every step, so :meth:`BicycleModel.positions_rotations` and
:meth:`BicycleModel.pose_at` answer like a :class:`~rt_lidar.unreal_bridge.world.Trajectory`: the embedded
world's ego can follow the car while it is being driven (times before the first step hold the start
pose; times after the last are extrapolated with the current speed and yaw rate).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rt_lidar.schema import Where, check_fields, spec
from rt_lidar.unreal_bridge.world.pose import Pose, quat_from_yaw

__all__ = ["BicycleModel", "ControlsLike", "VehicleControls", "VehicleLimits", "VehicleState"]

F64 = NDArray[np.float64]
_HISTORY_MAX = 8192


class ControlsLike(Protocol):
    """Anything with AirSim's control fields (``rt_lidar.unreal_bridge.wire.CarControls`` is one)."""

    @property
    def throttle(self) -> float: ...

    @property
    def steering(self) -> float: ...

    @property
    def brake(self) -> float: ...


@dataclass(frozen=True)
class VehicleControls:
    """Car controls: throttle [-1, 1], steering [-1, 1] (positive = right), brake [0, 1]."""

    throttle: float = 0.0
    steering: float = 0.0
    brake: float = 0.0
    handbrake: bool = False


@dataclass(frozen=True)
class VehicleLimits:
    """The car's geometry and limits (defaults: a mid-size saloon)."""

    wheelbase_m: float = spec(2.7, 0.0, None, "m")
    max_speed_mps: float = spec(20.0, 0.0, None, "m/s")
    max_reverse_mps: float = spec(5.0, 0.0, None, "m/s")
    max_steer_rad: float = spec(0.6, 0.0, math.pi / 2, "rad")
    max_steer_rate_rps: float = spec(1.5, 0.0, None, "rad/s")
    max_accel_mps2: float = spec(3.0, 0.0, None, "m/s^2")
    max_brake_mps2: float = spec(8.0, 0.0, None, "m/s^2")
    drag_per_s: float = spec(0.05, 0.0, None, "1/s")
    """Rolling and air resistance as a fraction of the speed lost per second with no throttle."""

    def __post_init__(self) -> None:
        check_fields(self, "VehicleLimits", _code_error)  # set in code, not by users: a ValueError

    def validate(self, what: Where) -> None:
        """The wheelbase and the steering limit must be positive (and the limit below pi/2)."""
        if self.wheelbase_m <= 0:
            raise what.fail("wheelbase_m", "must be > 0")
        if not 0 < self.max_steer_rad < math.pi / 2:
            raise what.fail("max_steer_rad", f"must be in (0, pi/2), got {self.max_steer_rad!r}")


def _code_error(source: str, field: str, problem: str) -> Exception:
    return ValueError(f"{source}.{field}: {problem}")


@dataclass(frozen=True)
class VehicleState:
    """A snapshot: time, pose on the plane, speed, wheel angle and yaw rate."""

    t: float
    x: float
    y: float
    yaw: float
    speed: float
    steer_rad: float
    yaw_rate: float


def _clip(v: float, lo: float, hi: float) -> float:
    return lo if v < lo else hi if v > hi else v


class BicycleModel:
    """Kinematic bicycle (rear-axle reference) with speed, steering and steering-rate limits."""

    def __init__(self, start: Pose | None = None, limits: VehicleLimits | None = None, t0: float = 0.0):
        self.limits = limits or VehicleLimits()
        self._controls: ControlsLike = VehicleControls()
        self.t = float(t0)
        self._place(start if start is not None else Pose.identity())

    def _place(self, pose: Pose) -> None:
        w, x, y, z = (float(c) for c in pose.rotation)
        self._z = float(pose.position[2])
        self.x, self.y = float(pose.position[0]), float(pose.position[1])
        self.yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
        self.speed = 0.0
        self.steer = 0.0
        self._hist_t: list[float] = [self.t]
        self._hist_xyyaw: list[tuple[float, float, float]] = [(self.x, self.y, self.yaw)]

    # -- driving ------------------------------------------------------------------------------------
    def set_controls(self, controls: ControlsLike) -> None:
        """Controls to hold until the next call (what ``setCarControls`` does)."""
        self._controls = controls

    @property
    def controls(self) -> ControlsLike:
        """The controls in force."""
        return self._controls

    @property
    def yaw_rate(self) -> float:
        """Current yaw rate, rad/s (v / L * tan(delta))."""
        return self.speed / self.limits.wheelbase_m * math.tan(self.steer)

    def step(self, dt: float, controls: ControlsLike | None = None) -> VehicleState:
        """Advance ``dt`` seconds under ``controls`` (or the ones set last); returns the new state."""
        if not (math.isfinite(dt) and dt >= 0.0):
            raise ValueError(f"BicycleModel.step: dt must be finite and >= 0, got {dt!r}")
        if controls is not None:
            self._controls = controls
        lim, c = self.limits, self._controls
        throttle = _clip(float(c.throttle), -1.0, 1.0)
        brake = 1.0 if getattr(c, "handbrake", False) else _clip(float(c.brake), 0.0, 1.0)
        # steering: AirSim's positive steering turns right, i.e. a negative (clockwise) wheel angle here
        target = -_clip(float(c.steering), -1.0, 1.0) * lim.max_steer_rad
        max_d = lim.max_steer_rate_rps * dt
        self.steer += _clip(target - self.steer, -max_d, max_d)
        # longitudinal: throttle accelerates (backwards when negative), brake and drag slow towards 0
        v = self.speed + throttle * lim.max_accel_mps2 * dt
        slow = (brake * lim.max_brake_mps2 + lim.drag_per_s * abs(v)) * dt
        v = math.copysign(abs(v) - slow, v) if abs(v) > slow else 0.0
        v = _clip(v, -lim.max_reverse_mps, lim.max_speed_mps)
        # kinematic bicycle, integrated exactly along the arc of constant speed and wheel angle
        v_mid = 0.5 * (self.speed + v)
        omega = v_mid / lim.wheelbase_m * math.tan(self.steer)
        if abs(omega) < 1e-9:
            self.x += v_mid * math.cos(self.yaw) * dt
            self.y += v_mid * math.sin(self.yaw) * dt
        else:
            r = v_mid / omega
            yaw1 = self.yaw + omega * dt
            self.x += r * (math.sin(yaw1) - math.sin(self.yaw))
            self.y += r * (math.cos(self.yaw) - math.cos(yaw1))
        self.yaw += omega * dt
        self.speed = v
        self.t += dt
        self._hist_t.append(self.t)
        self._hist_xyyaw.append((self.x, self.y, self.yaw))
        if len(self._hist_t) > _HISTORY_MAX:  # keep the recent past only (what a scan can ask about)
            del self._hist_t[: _HISTORY_MAX // 2], self._hist_xyyaw[: _HISTORY_MAX // 2]
        return self.state

    def advance_to(self, t: float, max_dt: float = 0.02) -> VehicleState:
        """Step under the current controls until time ``t`` (sub-steps of at most ``max_dt``)."""
        while self.t < t - 1e-12:
            self.step(min(max_dt, t - self.t))
        return self.state

    def reset(self, pose: Pose | None = None) -> None:
        """Stop the car at ``pose`` (default: where it is) and forget its history."""
        self._place(pose if pose is not None else self.pose)
        self._controls = VehicleControls()

    # -- reading ------------------------------------------------------------------------------------
    def frozen(self) -> BicycleModel:
        """A copy that answers :meth:`positions_rotations` exactly as this model does now, whatever
        steps this one takes later (a cast outside the server's call lock reads it)."""
        twin = copy.copy(self)
        twin._hist_t = list(self._hist_t)
        twin._hist_xyyaw = list(self._hist_xyyaw)
        return twin

    @property
    def state(self) -> VehicleState:
        """The current state."""
        return VehicleState(self.t, self.x, self.y, self.yaw, self.speed, self.steer, self.yaw_rate)

    @property
    def pose(self) -> Pose:
        """The current pose (level, at the start height)."""
        return Pose(np.array([self.x, self.y, self._z]), quat_from_yaw(np.array([self.yaw]))[0])

    def velocity(self) -> F64:
        """World-frame velocity (3,), m/s."""
        return np.array([self.speed * math.cos(self.yaw), self.speed * math.sin(self.yaw), 0.0])

    def positions_rotations(self, t: ArrayLike) -> tuple[F64, F64]:
        """Positions (K, 3) and quaternions (K, 4) at times t (K,), from the recorded history."""
        tq = np.atleast_1d(np.asarray(t, dtype=np.float64)).reshape(-1)
        ht = np.asarray(self._hist_t)
        hs = np.asarray(self._hist_xyyaw)
        x = np.interp(tq, ht, hs[:, 0])
        y = np.interp(tq, ht, hs[:, 1])
        yaw = np.interp(tq, ht, hs[:, 2])
        ahead = tq > ht[-1]
        if np.any(ahead):
            dt = tq[ahead] - ht[-1]
            w, v = self.yaw_rate, self.speed
            if abs(w) < 1e-9:
                x[ahead] = self.x + v * math.cos(self.yaw) * dt
                y[ahead] = self.y + v * math.sin(self.yaw) * dt
            else:
                yaw1 = self.yaw + w * dt
                x[ahead] = self.x + v / w * (np.sin(yaw1) - math.sin(self.yaw))
                y[ahead] = self.y + v / w * (math.cos(self.yaw) - np.cos(yaw1))
            yaw[ahead] = self.yaw + w * dt
        pos = np.stack([x, y, np.full_like(x, self._z)], axis=-1)
        return pos, quat_from_yaw(yaw)

    def pose_at(self, t: float) -> Pose:
        """The pose at one time."""
        p, q = self.positions_rotations(np.array([t]))
        return Pose(p[0], q[0])
