"""The demo's camera frames, painted in a child process of the idle CPU class.

A camera frame is a picture for people, not the sensor: the child renders it (and the intensity mask of
the scan it belongs to) on CPU time the frame loop leaves over. In a thread of the publisher it took the
interpreter lock from the frame loop, and an idle-class thread would hold that lock while it waits for a
core; a process of its own has neither problem. Data goes through shared memory (no pickling).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import signal
from multiprocessing import shared_memory
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from rt_lidar.points import POINT_DTYPE
from rt_lidar.unreal_bridge.world import CameraSpec, Pose
from rt_lidar.unreal_bridge.world.camera import camera_projection, project

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
    xyz = np.stack([points["x"], points["y"], points["z"]], axis=-1)
    u, v, depth, inside = project(xyz, camera_projection(camera, sensor_mount), w, h)
    keep = inside & (depth > 0.5)  # no closer than half a metre to the camera
    u, v, depth, inten = u[keep], v[keep], depth[keep], points["intensity"][keep]
    order = np.argsort(-depth)  # far first, so the nearest return is written last and wins
    rows, cols = v[order].astype(np.int64), u[order].astype(np.int64)
    mask[rows, cols] = np.maximum(inten[order], 1e-6) / max(intensity_max, 1e-12)
    return mask


def _frame_views(block: shared_memory.SharedMemory, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The (H, W, 3) uint8 image and the (H, W) float32 mask behind it, in one shared block."""
    w, h = size
    buf = block.buf
    assert buf is not None
    return np.ndarray((h, w, 3), np.uint8, buffer=buf), np.ndarray(
        (h, w), np.float32, buffer=buf, offset=h * w * 3
    )


def _frame_bytes(size: tuple[int, int]) -> int:
    w, h = size
    return h * w * 3 + h * w * 4


def _paint_loop(conn: Connection, scene: str, seed: int, size: tuple[int, int], intensity_max: float) -> None:
    from rt_lidar.pipeline.builder import build_world
    from rt_lidar.session.realtime import lower_priority

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the viewer's to handle: it closes our pipe
    lower_priority("idle")
    world = build_world(scene, seed=seed)
    camera = CameraSpec(width=size[0], height=size[1])
    blocks: dict[str, shared_memory.SharedMemory] = {}
    conn.send_bytes(b"ready")
    try:
        while True:
            head = conn.recv_bytes()
            if not head:
                return
            ask = json.loads(head)
            for stale in set(blocks) - {ask["points"], ask["out"]}:  # a points block the parent outgrew
                blocks.pop(stale).close()
            for name in (ask["points"], ask["out"]):
                if name not in blocks:
                    blocks[name] = shared_memory.SharedMemory(name=name)  # the parent owns and unlinks it
            src = blocks[ask["points"]].buf
            points = np.ndarray((int(ask["n"]),), POINT_DTYPE, buffer=src).copy()
            rgb, mask = _frame_views(blocks[ask["out"]], size)
            rgb[:] = world.render_camera(camera, int(ask["start_ns"]) * 1e-9).rgb
            mask[:] = intensity_mask(points, world.scene.sensor_mount, camera, intensity_max)
            del points, rgb, mask, src
            conn.send_bytes(head)  # a few bytes: the pipe takes them without waiting for the parent
    finally:
        for shm in blocks.values():
            with contextlib.suppress(Exception):
                shm.close()


class CameraPainter:
    """Camera frames of the scripted ``scene`` painted by an idle-class child process, one at a time.

    Scans go to the child and frames come back through shared memory, with a few bytes of JSON on a pipe
    to say so: neither side ever waits on the other (an idle-class child may not run for a while, and a
    pipe of megabytes would stall the frame loop until it did)."""

    def __init__(self, scene: str, seed: int, size: tuple[int, int], intensity_max: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.size = (int(size[0]), int(size[1]))
        self._out = shared_memory.SharedMemory(create=True, size=_frame_bytes(self.size))
        self._points: shared_memory.SharedMemory | None = None
        self._conn, child = ctx.Pipe()
        self._proc: Any = ctx.Process(
            target=_paint_loop, args=(child, scene, seed, self.size, intensity_max), daemon=True
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
        pts = np.ascontiguousarray(points, POINT_DTYPE)
        if self._points is None or self._points.size < max(pts.nbytes, 1):
            if self._points is not None:
                self._points.close()
                self._points.unlink()
            self._points = shared_memory.SharedMemory(create=True, size=max(pts.nbytes, 1) * 5 // 4 + 64)
        np.ndarray((pts.size,), POINT_DTYPE, buffer=self._points.buf)[:] = pts
        ask = {
            "start_ns": int(start_ns),
            "n": int(pts.size),
            "points": self._points.name,
            "out": self._out.name,
        }
        self._conn.send_bytes(json.dumps(ask).encode())
        self.busy = True
        return True

    def take(self, timeout_s: float = 0.0) -> tuple[np.ndarray, np.ndarray, int] | None:
        """The frame asked for last as (rgb, mask, start_ns), once it is there (waiting up to
        ``timeout_s`` for it; an idle-class child may get no CPU for a long time)."""
        if not self.busy or not self._conn.poll(timeout_s):
            return None
        done = json.loads(self._conn.recv_bytes())
        rgb, mask = _frame_views(self._out, self.size)
        self.busy = False
        return rgb.copy(), mask.copy(), int(done["start_ns"])

    def close(self) -> None:
        """Stop the child (a frame in flight is dropped) and free the shared blocks."""
        with contextlib.suppress(OSError):
            self._conn.send_bytes(b"")
        self._proc.join(timeout=5)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(timeout=5)
        self._conn.close()
        for shm in (self._out, self._points):
            if shm is not None:
                with contextlib.suppress(Exception):
                    shm.close()
                    shm.unlink()
