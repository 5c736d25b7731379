"""The sensor's poses at every firing time: sampled from its trajectory on a 1 ms grid, interpolated.

Evaluating the trajectory at each of ~10^5 firing times per frame would cost more than the ray cast, so
the sensor pose is sampled on one global grid (whole milliseconds of sim time) and every firing's pose is
interpolated from the two samples around it: positions linearly, rotations by normalised lerp. A
firing's pose then depends on its time alone, not on how the sim cut the time line into frames.
"""

from __future__ import annotations

import math

import numpy as np

from rt_lidar.unreal_bridge.world import Pose as MountPose
from rt_lidar.unreal_bridge.world import World
from rt_lidar.unreal_bridge.world.interp import interp_columns

__all__ = ["PoseSamples", "interp_columns", "interpolate_pose_samples", "sensor_pose_samples"]

_POSE_SAMPLE_S = 1e-3

PoseSamples = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Sensor poses on the 1 ms grid: sample times (S,) float64 s, positions (S, 3) and wxyz rotations
(S, 4) float64, neighbours in one hemisphere: what :func:`interpolate_pose_samples` needs to give every
firing's pose (carried by :attr:`Hits.pose_samples`, and over the bridge in ``info.pose_samples``)."""


def sensor_pose_samples(world: World, t_ns: np.ndarray, mount: MountPose | None = None) -> PoseSamples | None:
    """The sensor poses on the whole-millisecond grid that spans ``t_ns`` (None when it is empty)."""
    if t_ns.size == 0:
        return None
    t = t_ns.astype(np.float64) * 1e-9
    k0 = math.floor(float(t.min()) / _POSE_SAMPLE_S)
    k1 = max(math.ceil(float(t.max()) / _POSE_SAMPLE_S), k0 + 1)
    ts = np.arange(k0, k1 + 1, dtype=np.float64) * _POSE_SAMPLE_S
    p_s, q_s = world.sensor_poses(ts, mount)
    flip = np.einsum("ij,ij->i", q_s[1:], q_s[:-1]) < 0  # keep neighbours in one hemisphere
    q_s[1:][np.cumsum(flip) % 2 == 1] *= -1.0
    return ts, p_s, q_s


def interpolate_pose_samples(t_ns: np.ndarray, samples: PoseSamples | None) -> tuple[np.ndarray, np.ndarray]:
    """Sensor poses at every firing time ``t_ns`` from ``samples`` (:func:`sensor_pose_samples` of
    times spanning them): positions linear, rotations by normalised lerp."""
    if t_ns.size == 0 or samples is None:
        return np.zeros((0, 3)), np.zeros((0, 4))
    ts, p_s, q_s = samples
    t = t_ns.astype(np.float64) * 1e-9
    pos = interp_columns(t, ts, p_s)
    if bool(np.all(q_s == q_s[0])):
        # not turning (a straight road): one orientation for all, computed exactly as below
        q = q_s[:1] / np.sqrt(np.einsum("ij,ij->i", q_s[:1], q_s[:1]))[:, None]
        return pos, np.broadcast_to(q, (t.size, 4))
    quat = interp_columns(t, ts, q_s)
    quat /= np.sqrt(np.einsum("ij,ij->i", quat, quat))[:, None]
    return pos, quat


def _interpolated_sensor_poses(
    world: World, t_ns: np.ndarray, mount: MountPose | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Sensor poses at every firing time, from the trajectory sampled every millisecond.

    Positions are interpolated linearly and rotations by normalised lerp between samples 1 ms apart,
    which is exact for constant velocity and within 1e-7 rad for any yaw rate a car reaches.
    """
    return interpolate_pose_samples(t_ns, sensor_pose_samples(world, t_ns, mount))
