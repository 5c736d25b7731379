"""Ouster IMU packets (LEGACY IMU profile, 48 bytes, 100 Hz) from the sensor's motion.

Layout (ouster-sdk's ``PacketFormat``): system, accelerometer and gyroscope timestamps (u64 ns), then
linear acceleration x, y, z (float32, g) and angular velocity x, y, z (float32, deg/s), in the sensor
frame (``imu_to_sensor_transform`` is written as the identity). The accelerometer reads specific force:
the path's acceleration plus 1 g up. The sensor's path is sampled at the scans' start poses: the
acceleration of the last two intervals and the turn rate of the last one hold over the next rotation.
"""

from __future__ import annotations

import numpy as np

from rt_lidar.pipeline.assembler import Scan

__all__ = ["IMU_DTYPE", "IMU_PERIOD_NS", "SensorMotion", "imu_packets"]

IMU_PERIOD_NS = 10_000_000
G_MPS2 = 9.80665
IMU_DTYPE = np.dtype(
    [
        ("sys_ts", "<u8"),
        ("accel_ts", "<u8"),
        ("gyro_ts", "<u8"),
        ("accel", "<f4", (3,)),
        ("gyro", "<f4", (3,)),
    ]
)
assert IMU_DTYPE.itemsize == 48


def _rotate_inverse(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``v`` (world) in the frame of unit quaternion ``q`` (w, x, y, z): R(q)^T v."""
    w, x, y, z = q
    r = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    return r.T @ v


def _turn_rate(q0: np.ndarray, q1: np.ndarray, dt_s: float) -> np.ndarray:
    """Angular velocity (rad/s, body frame) turning ``q0`` into ``q1`` in ``dt_s``."""
    w0, x0, y0, z0 = q0
    conj = np.array([w0, -x0, -y0, -z0])
    a, b = conj, q1  # dq = q0^-1 q1
    dq = np.array(
        [
            a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
            a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
            a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
            a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
        ]
    )
    if dq[0] < 0:
        dq = -dq
    s = float(np.linalg.norm(dq[1:]))
    if s < 1e-12 or dt_s <= 0:
        return np.zeros(3)
    angle = 2.0 * np.arctan2(s, dq[0])
    return dq[1:] / s * angle / dt_s


def imu_packets(
    t0_ns: int, t1_ns: int, epoch_ns: int, accel_world: np.ndarray, rate: np.ndarray, q: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """IMU packets (N, 48) every 10 ms in [t0, t1), and their send times: specific force (acceleration
    + 1 g up, in g) and turn rate (deg/s) in the sensor frame of orientation ``q``."""
    times = np.arange(-(-t0_ns // IMU_PERIOD_NS), -(-t1_ns // IMU_PERIOD_NS), dtype=np.int64) * IMU_PERIOD_NS
    pk = np.zeros(times.size, IMU_DTYPE)
    stamp = (times + epoch_ns).astype(np.uint64)
    pk["sys_ts"], pk["accel_ts"], pk["gyro_ts"] = stamp, stamp, stamp
    pk["accel"] = _rotate_inverse(q, accel_world + np.array([0.0, 0.0, G_MPS2])) / G_MPS2
    pk["gyro"] = np.degrees(rate)
    return pk.view(np.uint8).reshape(times.size, 48), times


class SensorMotion:
    """The sensor's path from scan start poses: acceleration and turn rate of the latest interval."""

    def __init__(self) -> None:
        self.t: list[int] = []
        self.p: list[np.ndarray] = []
        self.q: list[np.ndarray] = []

    def add(self, scan: Scan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Record the scan's start pose; acceleration (world, m/s^2), turn rate (body, rad/s) and the
        orientation to report over its rotation."""
        self.t = [*self.t[-2:], scan.start_ns]
        self.p = [*self.p[-2:], np.asarray(scan.sensor_position, np.float64)]
        self.q = [*self.q[-2:], np.asarray(scan.sensor_rotation, np.float64)]
        accel, rate = np.zeros(3), np.zeros(3)
        if len(self.t) == 3:
            (t0, t1, t2), (p0, p1, p2) = self.t, self.p
            v0 = (p1 - p0) / ((t1 - t0) * 1e-9)
            v1 = (p2 - p1) / ((t2 - t1) * 1e-9)
            accel = (v1 - v0) / ((t2 - t0) * 0.5e-9)
        if len(self.t) >= 2:
            rate = _turn_rate(self.q[-2], self.q[-1], (self.t[-1] - self.t[-2]) * 1e-9)
        return accel, rate, self.q[-1]
