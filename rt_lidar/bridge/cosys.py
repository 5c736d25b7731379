"""Cosys-AirSim's lidars on the wire, both ends: the beam grid, the segmentation colours, the answers.

Facts taken from Cosys-AirSim (github.com/Cosys-Lab/Cosys-AirSim: ``UnrealLidarSensor.cpp``,
``LidarCamera.cpp``, ``RpcLibAdaptorsBase.hpp``, ``docs/lidar.md``, ``docs/gpulidar.md``):

- **CPU lidar** (``getLidarData``): a map ``time_stamp, point_cloud, groundtruth, pose``. The cloud is
  the last *whole rotation*, organised: ``channels x MeasurementsPerCycle`` points, column-major (cell
  ``column * channels + channel``), channel 0 the highest (``VerticalFOVUpper`` down to ``Lower``,
  evenly spaced), columns at ``HorizontalFOVStart + i * (End - Start) / (M - 1)`` degrees, clockwise
  seen from above (NED yaw). Points are x, y, z in the sensor's NED frame; a ray that hit nothing is
  ``0, 0, 0`` with the label ``out_of_range``; ``groundtruth`` holds the hit actor's name per point.
- **GPU lidar** (``getGPULidarData``): a map ``time_stamp, point_cloud, pose``, five floats a point:
  x, y, z (sensor frame, x forward, y left, z up), the segmentation colour ``R << 16 | G << 8 | B``
  as a float, and an intensity (surface reflectivity x impact angle x rain extinction); the same
  organised grid, channels from the lowest up; a miss or a return under its threshold is five zeros.
- An empty cloud goes as ``[0]`` (rpclib's workaround kept by both).
- Segmentation colours: object id k has colour k of Cosys's colour map (``cosysairsim/colormap.npy``);
  :func:`segmentation_colours` builds its first entries.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import firings_per_scan, scan_period_ns
from rt_lidar.unreal_bridge.wire import FluPose, Pose, ned_to_flu_points, pose_ned_to_flu

__all__ = [
    "OUT_OF_RANGE",
    "CosysFrame",
    "CosysGrid",
    "colour_ids",
    "read_cosys_cpu",
    "read_cosys_gpu",
    "segmentation_colours",
]

OUT_OF_RANGE = "out_of_range"
"""Cosys-AirSim's label of a ray that hit nothing."""

_COLOUR_LEVELS = (255, 127, 191, 95, 159, 223, 79, 110, 143, 175, 207, 239, 86, 102, 119, 135)
"""The channel values of Cosys-AirSim's colour map in the order it first uses them (the first 16: ids
0..4095). Checked against the ``colormap.npy`` of the ``cosysairsim`` package by the tests."""


def segmentation_colours(count: int = 256) -> np.ndarray:
    """(count, 3) uint8: the colour of segmentation ids 0..count-1 in Cosys-AirSim's map. Id 0 is the
    first level in every channel; each further level v adds the colours that use v in some channel and
    only earlier levels in the others, by which channels hold v (B, G, G+B, R, R+B, R+G, all), the other
    channels running over the earlier levels (R slowest)."""
    if not 0 < count <= len(_COLOUR_LEVELS) ** 3:
        raise ValueError(f"count must be in 1..{len(_COLOUR_LEVELS) ** 3}")
    out: list[tuple[int, int, int]] = [(_COLOUR_LEVELS[0],) * 3]
    for k in range(1, len(_COLOUR_LEVELS)):
        if len(out) >= count:
            break
        earlier, new = _COLOUR_LEVELS[:k], _COLOUR_LEVELS[k]
        for mask in range(1, 8):
            holds = ((mask >> 2) & 1, (mask >> 1) & 1, mask & 1)
            free = [c for c in range(3) if not holds[c]]
            for values in itertools.product(earlier, repeat=len(free)):
                colour = [new, new, new]
                for c, v in zip(free, values, strict=True):
                    colour[c] = v
                out.append((colour[0], colour[1], colour[2]))
    return np.array(out[:count], np.uint8)


def packed_colours(count: int = 256) -> np.ndarray:
    """(count,) uint32 ``R << 16 | G << 8 | B`` of :func:`segmentation_colours`."""
    c = segmentation_colours(count).astype(np.uint32)
    return (c[:, 0] << 16) | (c[:, 1] << 8) | c[:, 2]


def colour_ids(rgb: np.ndarray, count: int = 256) -> np.ndarray:
    """The segmentation id (0..count-1) of each packed colour (the GPU lidar's fourth float), -1 for a
    colour outside the first ``count`` ids of the map."""
    table = packed_colours(count)
    order = np.argsort(table)
    values = np.asarray(rgb).astype(np.uint32)
    pos = np.clip(np.searchsorted(table[order], values), 0, count - 1)
    found = table[order][pos] == values
    return np.where(found, order[pos], -1).astype(np.int64)


@dataclass(frozen=True)
class CosysGrid:
    """The beam grid of a Cosys-AirSim lidar: ``channels`` evenly spaced from ``upper_deg`` to
    ``lower_deg``, ``measurements`` columns from ``h_start_deg`` to ``h_end_deg`` (clockwise)."""

    channels: int
    measurements: int
    upper_deg: float
    lower_deg: float
    h_start_deg: float
    h_end_deg: float
    rotation_hz: float
    range_m: float

    @classmethod
    def of_preset(cls, preset: SensorPreset) -> CosysGrid:
        """The grid the preset's settings.json lidar block asks a Cosys-AirSim lidar for
        (:func:`rt_lidar.bridge.airsim_settings.airsim_lidar_settings`): its rings' elevation span,
        its columns a rotation, its rotation rate."""
        el = np.asarray(preset.elevations_deg, np.float64)
        period_s = scan_period_ns(preset) * 1e-9
        columns = max(2, round(firings_per_scan(preset) / max(preset.n_rings, 1)))
        return cls(
            channels=int(preset.n_rings),
            measurements=int(columns),
            upper_deg=float(el.max()),
            lower_deg=float(el.min()),
            h_start_deg=0.0,
            h_end_deg=360.0,
            rotation_hz=1.0 / period_s,
            range_m=float(preset.range.max_m),
        )

    @property
    def size(self) -> int:
        """Cells of one rotation."""
        return self.channels * self.measurements

    def cpu_elevations(self) -> np.ndarray:
        """(channels,) deg, channel 0 the highest (the CPU lidar's order)."""
        if self.channels == 1:
            return np.array([self.upper_deg])
        step = (self.upper_deg - self.lower_deg) / (self.channels - 1)
        return self.upper_deg - np.arange(self.channels) * step

    def gpu_elevations(self) -> np.ndarray:
        """(channels,) deg, channel 0 the lowest (the GPU lidar's order)."""
        return self.cpu_elevations()[::-1].copy()

    def headings(self) -> np.ndarray:
        """(measurements,) deg: each column's horizontal angle, clockwise from forward."""
        step = (self.h_end_deg - self.h_start_deg) / (self.measurements - 1)
        return self.h_start_deg + np.arange(self.measurements) * step

    def directions(self, gpu: bool = False) -> np.ndarray:
        """(size, 3) float64 unit rays of every cell in the wire's order, sensor frame x forward, y left,
        z up (a clockwise heading is a negative azimuth)."""
        el = np.radians(self.gpu_elevations() if gpu else self.cpu_elevations())
        az = -np.radians(self.headings())
        ce = np.cos(el)[None, :]
        return np.stack(
            [
                (ce * np.cos(az)[:, None]).ravel(),
                (ce * np.sin(az)[:, None]).ravel(),
                np.broadcast_to(np.sin(el)[None, :], (self.measurements, self.channels)).ravel(),
            ],
            axis=1,
        )

    def cells_of(self, azimuth_deg: np.ndarray, elevation_deg: np.ndarray, gpu: bool = False) -> np.ndarray:
        """The cell nearest each direction (azimuth counter-clockwise, as the project's firings): the
        nearest channel by elevation and the nearest column by heading."""
        els = self.gpu_elevations() if gpu else self.cpu_elevations()
        order = np.argsort(els)
        pos = np.clip(np.searchsorted(els[order], elevation_deg), 1, max(len(els) - 1, 1))
        lo, hi = els[order][pos - 1], els[order][np.minimum(pos, len(els) - 1)]
        pick = np.where(np.abs(elevation_deg - lo) <= np.abs(elevation_deg - hi), pos - 1, pos)
        channel = order[np.clip(pick, 0, len(els) - 1)]
        heading = np.mod(-np.asarray(azimuth_deg, np.float64) - self.h_start_deg, 360.0)
        step = (self.h_end_deg - self.h_start_deg) / (self.measurements - 1)
        column = np.mod(np.rint(heading / step).astype(np.int64), self.measurements)
        return column * self.channels + channel

    def angular_step_deg(self) -> tuple[float, float]:
        """(horizontal, vertical) spacing of the grid: a firing's direction is served by a cell at most
        half of each away (plus the preset's own non-uniform spacing)."""
        v = 0.0 if self.channels == 1 else (self.upper_deg - self.lower_deg) / (self.channels - 1)
        return (self.h_end_deg - self.h_start_deg) / (self.measurements - 1), v


@dataclass
class CosysFrame:
    """One Cosys-AirSim lidar answer, organised, in the project frame (x forward, y left, z up)."""

    points: np.ndarray
    """(cells, 3) float32, zeros where the ray returned nothing."""
    labels: list[str] | None
    """CPU lidar: the hit actor's name per cell (``out_of_range`` for a miss)."""
    rgb: np.ndarray | None
    """GPU lidar: the packed segmentation colour per cell (uint32)."""
    intensity: np.ndarray | None
    """GPU lidar: its intensity per cell (float32)."""
    pose: FluPose
    time_stamp: int

    @property
    def returned(self) -> np.ndarray:
        """(cells,) bool: the ray returned a point (not the zeros of a miss)."""
        return np.any(self.points != 0.0, axis=1)


def _map(raw: Any, call: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{call} answered a {type(raw).__name__}, not a map")
    return raw


def read_cosys_cpu(client: Any, lidar_name: str = "", vehicle_name: str = "") -> CosysFrame:
    """``getLidarData`` of a Cosys-AirSim CPU lidar (its ``groundtruth`` labels kept)."""
    raw = _map(
        client.rpc.call_arrays("getLidarData", (lidar_name, vehicle_name), {"point_cloud": np.float32}),
        "getLidarData",
    )
    cloud = np.asarray(raw.get("point_cloud", []), np.float32).ravel()
    labels = [str(s) for s in raw.get("groundtruth") or []]
    if cloud.size < 3 or not labels:
        cloud, labels = cloud[:0], []
    points = ned_to_flu_points(cloud.reshape(-1, 3))
    if len(labels) != len(points):
        raise ValueError(f"getLidarData: {len(labels)} groundtruth labels for {len(points)} points")
    pose = pose_ned_to_flu(Pose.from_msgpack(raw.get("pose", {})))
    return CosysFrame(points, labels, None, None, pose, int(raw.get("time_stamp", 0)))


def read_cosys_gpu(client: Any, lidar_name: str = "", vehicle_name: str = "") -> CosysFrame:
    """``getGPULidarData`` of a Cosys-AirSim GPU lidar: points, segmentation colours, intensities."""
    raw = _map(
        client.rpc.call_arrays("getGPULidarData", (lidar_name, vehicle_name), {"point_cloud": np.float32}),
        "getGPULidarData",
    )
    cloud = np.asarray(raw.get("point_cloud", []), np.float32).ravel()
    if cloud.size % 5:
        cloud = cloud[: cloud.size - cloud.size % 5]  # the empty answer's [0]
    rows = cloud.reshape(-1, 5)
    pose = pose_ned_to_flu(Pose.from_msgpack(raw.get("pose", {})))
    rgb = np.rint(rows[:, 3]).astype(np.uint32)  # an exact integer below 2^24 in float32
    return CosysFrame(
        np.ascontiguousarray(rows[:, :3]), None, rgb, rows[:, 4].copy(), pose, int(raw.get("time_stamp", 0))
    )


def grid_error_deg(
    grid: CosysGrid, azimuth_deg: np.ndarray, elevation_deg: np.ndarray, gpu: bool = False
) -> float:
    """The largest angle between a direction and the grid cell that serves it (deg)."""
    if len(azimuth_deg) == 0:
        return 0.0
    cells = grid.cells_of(azimuth_deg, elevation_deg, gpu)
    d = grid.directions(gpu)[cells]
    az, el = np.radians(azimuth_deg), np.radians(elevation_deg)
    want = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=1)
    cos = np.clip(np.einsum("ij,ij->i", d, want), -1.0, 1.0)
    return float(math.degrees(float(np.arccos(cos.min()))))
