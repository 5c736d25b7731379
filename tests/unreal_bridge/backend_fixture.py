"""A small deterministic :class:`~rt_lidar.unreal_bridge.server.SimBackend` for the bridge's tests.

A test double of the embedded world (which lives in ``rt_lidar.unreal_bridge.world`` and has its own tests):
the lidar sees a flat grid of ``n_points`` points 1.5 m below it, every 10th ray a miss; one car,
three scene objects, a tiny camera. All values are in the project frame (x forward, y left, z up).
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from rt_lidar.unreal_bridge.errors import BackendError
from rt_lidar.unreal_bridge.wire import (
    CarControls,
    FluCarState,
    FluImage,
    FluKinematics,
    FluPose,
    ImageRequest,
    LidarFrame,
    LidarHits,
)

__all__ = ["PlaneBackend", "plane_points", "tiny_png"]

LIDAR_POSE = FluPose((1.0, 2.0, 1.5), (0.9238795325, 0.0, 0.0, 0.3826834324))  # yaw +45 deg (left)


def plane_points(n: int) -> np.ndarray:
    """``n`` points of a grid on the plane z = -1.5 (FLU), deterministic."""
    side = int(np.ceil(np.sqrt(n)))
    i = np.arange(n)
    return np.stack(
        [(i % side) * 0.1 + 0.5, (i // side) * 0.1 - side * 0.05, np.full(n, -1.5)], axis=1
    ).astype(np.float32)


def tiny_png(width: int, height: int, rgb: tuple[int, int, int] = (10, 200, 30)) -> bytes:
    """A valid PNG of one colour (so clients that decode images can)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@dataclass
class PlaneBackend:
    """Deterministic backend; records what was set so tests can check it."""

    n_points: int = 100_000
    paused: bool = False
    sim_time_ns: int = 1_000_000_000
    frame_ns: int = 10_000_000
    vehicle: FluPose = field(default_factory=lambda: FluPose((3.0, -4.0, 0.5), (1.0, 0.0, 0.0, 0.0)))
    controls: CarControls = field(default_factory=CarControls)
    weather: dict[int, float] = field(default_factory=dict)
    weather_enabled: bool = False
    seg_ids: dict[str, int] = field(default_factory=lambda: {"Road_1": 1, "Car_2": 20, "Tree_3": 200})
    resets: int = 0
    calls: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.points = plane_points(self.n_points)
        self.segmentation = (np.arange(self.n_points) % 256).astype(np.int32)

    def lidar_data(self, lidar_name: str, vehicle_name: str) -> LidarFrame:
        if lidar_name not in ("", "Lidar1"):
            raise BackendError(f"No lidar with name {lidar_name} exist on vehicle")
        return LidarFrame(self.points, self.segmentation, LIDAR_POSE, self.sim_time_ns)

    def lidar_hits(self, lidar_name: str, vehicle_name: str) -> LidarHits:
        n = self.n_points
        miss = np.arange(n) % 10 == 9
        rng = np.linalg.norm(self.points, axis=1).astype(np.float32)
        rng[miss] = np.nan
        normals = np.tile(np.array([0.0, 0.0, 1.0], np.float32), (n, 1))
        normals[miss] = 0.0
        return LidarHits(
            points=np.where(miss[:, None], 0.0, self.points).astype(np.float32),
            normals=normals,
            segmentation=np.where(miss, -1, self.segmentation).astype(np.int32),
            ring=(np.arange(n) % 32).astype(np.uint16),
            time=self.sim_time_ns + np.arange(n, dtype=np.int64) * 1000,
            range=rng,
            miss=miss,
            pose=LIDAR_POSE,
            time_stamp=self.sim_time_ns,
        )

    def images(self, requests: Sequence[ImageRequest], vehicle_name: str) -> list[FluImage]:
        out = []
        for r in requests:
            w, h = 8, 6
            if r.pixels_as_float:
                data = np.arange(w * h, dtype=np.float32) * 0.5
                out.append(FluImage(r.camera_name, r.image_type, w, h, b"", data, True, False, LIDAR_POSE, 7))
            else:
                png = tiny_png(w, h) if r.compress else b"\x01" * (w * h * 3)
                out.append(
                    FluImage(
                        r.camera_name, r.image_type, w, h, png, compress=r.compress, camera_pose=LIDAR_POSE
                    )
                )
        return out

    def vehicle_pose(self, vehicle_name: str) -> FluPose:
        return self.vehicle

    def set_vehicle_pose(self, pose: FluPose, ignore_collision: bool, vehicle_name: str) -> None:
        self.vehicle = pose

    def pause(self, paused: bool) -> None:
        self.paused = paused

    def is_paused(self) -> bool:
        return self.paused

    def continue_for_time(self, seconds: float) -> None:
        self.sim_time_ns += round(seconds * 1e9)
        self.paused = True

    def continue_for_frames(self, frames: int) -> None:
        self.sim_time_ns += frames * self.frame_ns
        self.paused = True

    def car_state(self, vehicle_name: str) -> FluCarState:
        kin = FluKinematics(self.vehicle, linear_velocity=(5.0, 1.0, 0.0), angular_velocity=(0.0, 0.0, 0.1))
        return FluCarState(5.1, 2, 1800.0, 7000.0, False, kin, self.sim_time_ns)

    def set_car_controls(self, controls: CarControls, vehicle_name: str) -> None:
        self.controls = controls

    def object_pose(self, object_name: str) -> FluPose | None:
        if object_name not in self.seg_ids:
            return None
        return replace(self.vehicle, position=(10.0, 1.0, 2.0))

    def list_scene_objects(self, name_regex: str) -> list[str]:
        return [n for n in self.seg_ids if re.fullmatch(name_regex, n)]

    def get_segmentation_object_id(self, mesh_name: str) -> int:
        return self.seg_ids.get(mesh_name, -1)

    def set_segmentation_object_id(self, mesh_name: str, object_id: int, is_name_regex: bool) -> bool:
        names = [n for n in self.seg_ids if re.fullmatch(mesh_name, n)] if is_name_regex else [mesh_name]
        hit = [n for n in names if n in self.seg_ids]
        for n in hit:
            self.seg_ids[n] = object_id
        return bool(hit)

    def reset(self) -> None:
        self.resets += 1

    def settings_string(self) -> str:
        return '{"SettingsVersion": 1.2, "SimMode": "Car"}'

    def list_vehicles(self) -> list[str]:
        return ["Car1"]

    def set_weather_parameter(self, param: int, value: float) -> None:
        self.weather[param] = value

    def enable_weather(self, enable: bool) -> None:
        self.weather_enabled = enable
