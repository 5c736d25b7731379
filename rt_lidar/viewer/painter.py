"""The demo's camera frames, painted in a child process of the idle CPU class.

A camera frame is a picture for people, not the sensor: the child renders it (and the intensity mask of
the scan it belongs to) on CPU time the frame loop leaves over. In a thread of the publisher it took the
interpreter lock from the frame loop, and an idle-class thread would hold that lock while it waits for a
core; a process of its own has neither problem. Scans go over a pipe as raw bytes (no pickling).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from rt_lidar.points import POINT_DTYPE
from unreal_bridge.world import CameraSpec, Pose

__all__ = ["CameraPainter", "intensity_mask"]


def intensity_mask(
    points: np.ndarray, sensor_mount: Pose, camera: CameraSpec, intensity_max: float = 255.0
) -> np.ndarray:
    """(H, W) float32 image: per pixel the intensity of the nearest return projected into ``camera``
    (0 where nothing returned); ``points`` in the sensor frame, both mounts on the ego."""
    h, w = camera.height, camera.width
    mask = np.zeros((h, w), np.float32)
    if points.size == 0:
        return mask
    xyz = np.stack([points["x"], points["y"], points["z"]], axis=-1).astype(np.float64)
    cam = camera.mount.inverse().compose(sensor_mount).transform_points(xyz)
    ahead = cam[:, 0] > 0.5
    cam, inten = cam[ahead], points["intensity"][ahead]
    f = camera.focal_px
    u = (w / 2 - f * cam[:, 1] / cam[:, 0]).astype(np.int64)
    v = (h / 2 - f * cam[:, 2] / cam[:, 0]).astype(np.int64)
    ok = (u >= 0) & (u < w) & (v >= 0) & (v < h)
    u, v, depth, inten = u[ok], v[ok], cam[ok, 0], inten[ok]
    order = np.argsort(-depth)  # far first, so the nearest return is written last and wins
    mask[v[order], u[order]] = np.maximum(inten[order], 1e-6) / max(intensity_max, 1e-12)
    return mask


def _raw(a: np.ndarray) -> memoryview:
    """The bytes of a contiguous array (a memoryview of an (H, W) array has H items, not its bytes)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).data


def _paint_loop(conn: Connection, scene: str, seed: int, size: tuple[int, int], intensity_max: float) -> None:
    from rt_lidar.build import build_world
    from rt_lidar.runtime import lower_priority

    lower_priority("idle")
    world = build_world(scene, seed=seed)
    camera = CameraSpec(width=size[0], height=size[1])
    conn.send_bytes(b"ready")
    while True:
        head = conn.recv_bytes()
        if not head:
            return
        start_ns = int(json.loads(head)["start_ns"])
        points = np.frombuffer(conn.recv_bytes(), dtype=POINT_DTYPE)
        rgb = np.ascontiguousarray(world.render_camera(camera, start_ns * 1e-9).rgb, np.uint8)
        mask = intensity_mask(points, world.scene.sensor_mount, camera, intensity_max)
        conn.send_bytes(json.dumps({"start_ns": start_ns, "rgb": rgb.shape, "mask": mask.shape}).encode())
        conn.send_bytes(_raw(rgb))
        conn.send_bytes(_raw(mask))


class CameraPainter:
    """Camera frames of the scripted ``scene`` painted by an idle-class child process, one at a time."""

    def __init__(self, scene: str, seed: int, size: tuple[int, int], intensity_max: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc: Any = ctx.Process(
            target=_paint_loop, args=(child, scene, seed, size, intensity_max), daemon=True
        )
        self._proc.start()
        child.close()
        self._ready = False  # the child has built its world
        self.busy = False
        """A frame is being painted."""

    def submit(self, points: np.ndarray, start_ns: int) -> bool:
        """Ask for the frame at ``start_ns`` with the mask of ``points``; False (skipped) while the child
        is still starting or painting the last one."""
        if not self._ready:
            if not self._conn.poll():
                return False
            self._ready = self._conn.recv_bytes() == b"ready"
        if self.busy or not self._ready:
            return False
        self._conn.send_bytes(json.dumps({"start_ns": int(start_ns)}).encode())
        self._conn.send_bytes(_raw(np.ascontiguousarray(points, POINT_DTYPE)))
        self.busy = True
        return True

    def take(self, wait: bool = False) -> tuple[np.ndarray, np.ndarray, int] | None:
        """The frame asked for last as (rgb, mask, start_ns), once it is there (``wait``: block)."""
        if not self.busy or (not wait and not self._conn.poll()):
            return None
        head = json.loads(self._conn.recv_bytes())
        rgb = np.frombuffer(self._conn.recv_bytes(), np.uint8).reshape(head["rgb"])
        mask = np.frombuffer(self._conn.recv_bytes(), np.float32).reshape(head["mask"])
        self.busy = False
        return rgb, mask, int(head["start_ns"])

    def close(self) -> None:
        """Stop the child (a frame in flight is dropped)."""
        with contextlib.suppress(OSError):
            self._conn.send_bytes(b"")
        self._proc.join(timeout=5)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(timeout=5)
        self._conn.close()
