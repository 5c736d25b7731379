"""CARLA's semantic lidar (``sensor.lidar.ray_cast_semantic``) as hits, without the ``carla`` package.

Layout, as CARLA's ``Docs/ref_sensors.md`` and ``carla.SemanticLidarMeasurement`` document it: ``raw_data``
holds one 24-byte detection a point, x, y, z and the cosine of the incidence angle as float32, then the
index of the object hit and its semantic tag as uint32; the points of channel 0 come first, then those
of channel 1 ..., ``get_point_count(channel)`` of each. Channel 0 is the highest laser (``upper_fov``),
the channels evenly spaced down to ``lower_fov``. Points are in the sensor's frame in Unreal's
left-handed axes (x forward, y right, z up): :func:`decode_semantic_lidar` turns y over once, and nothing
else here does. A measurement holds only the rays that hit something: a firing with no point is a miss.

Each firing of the preset in the frame is served by the point of the CARLA channel nearest its ring's
elevation (:meth:`CarlaLidarSetup.channel_of_rings`) nearest its azimuth, within half CARLA's horizontal
step; the preset's non-uniform beam table is thus served within half a channel spacing vertically
(:meth:`CarlaLidarSetup.vertical_error_deg`, smaller with ``vertical_oversample``) and half a column
horizontally. Incidence comes from ``cos_inc_angle``, the material from the tag
(``carla_tags.toml``), the segment from the object index, the firing time from the preset's schedule.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.physics.weather import (
    AIRSIM_FOG,
    AIRSIM_RAIN,
    AIRSIM_ROAD_WETNESS,
    WeatherConfig,
    airsim_weather_to_config,
)
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import Firings, firings_between, firings_per_scan, scan_period_ns

__all__ = [
    "CARLA_TAGS",
    "SEMANTIC_DETECTION",
    "CarlaLidarSetup",
    "CarlaSweep",
    "carla_rotation_to_quaternion",
    "carla_tag_materials",
    "carla_weather_to_config",
    "decode_semantic_lidar",
    "hits_from_carla",
    "next_sector_azimuth",
    "phase_start_ns",
]

SEMANTIC_DETECTION = np.dtype(
    [
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("cos_inc_angle", "<f4"),
        ("object_idx", "<u4"),
        ("object_tag", "<u4"),
    ]
)
"""One ``carla.SemanticLidarDetection`` in ``raw_data`` (24 bytes)."""
CARLA_TAGS = Path(__file__).with_name("carla_tags.toml")
"""The shipped table of CARLA's semantic tags and the material each is taken to be."""


@dataclass
class CarlaSweep:
    """One semantic lidar measurement decoded, in the project frame (x forward, y left, z up)."""

    points: np.ndarray  # (N, 3) float32
    cos_inc: np.ndarray  # (N,) float32
    object_idx: np.ndarray  # (N,) uint32
    object_tag: np.ndarray  # (N,) uint32
    channel: np.ndarray  # (N,) int64


def decode_semantic_lidar(raw: bytes | bytearray | memoryview, channel_counts: Sequence[int]) -> CarlaSweep:
    """A measurement's ``raw_data`` with its per-channel point counts (``get_point_count(c)`` for each
    channel), checked: the counts must add up to the buffer's points."""
    buf = memoryview(raw).cast("B")
    if buf.nbytes % SEMANTIC_DETECTION.itemsize:
        raise ValueError(
            f"semantic lidar raw_data of {buf.nbytes} bytes is not a whole number of 24-byte points"
        )
    det = np.frombuffer(buf, SEMANTIC_DETECTION)
    counts = np.asarray(channel_counts, np.int64)
    if counts.sum() != len(det) or (counts < 0).any():
        raise ValueError(f"channel counts add up to {int(counts.sum())}, raw_data holds {len(det)} points")
    points = np.stack([det["x"], -det["y"], det["z"]], axis=1).astype(np.float32)  # left- to right-handed
    return CarlaSweep(
        points,
        det["cos_inc_angle"].astype(np.float32),
        det["object_idx"].astype(np.uint32),
        det["object_tag"].astype(np.uint32),
        np.repeat(np.arange(len(counts)), counts),
    )


def carla_tag_materials(material_names: Sequence[str], version: str = "0.9.14") -> np.ndarray:
    """(256,) int16: the material number of each semantic tag (the table for CARLA ``version``: 0.9.14
    and later, or earlier); a tag the table does not list reads as concrete."""
    data = tomllib.loads(CARLA_TAGS.read_text())
    key = "tags" if tuple(int(v) for v in version.split(".")[:3]) >= (0, 9, 14) else "tags_0_9_13"
    index = {m: i for i, m in enumerate(material_names)}
    lut = np.full(256, index.get("concrete", 0), np.int16)
    for tag, (_name, material) in data[key].items():
        if material not in index:
            raise ConfigError(f"{CARLA_TAGS}: field '{key}.{tag}': unknown material '{material}'")
        lut[int(tag)] = index[material]
    return lut


@dataclass(frozen=True)
class CarlaLidarSetup:
    """The semantic lidar a preset asks CARLA for: evenly spaced channels between the preset's highest
    and lowest ring (``vertical_oversample`` x as many gaps, to serve a non-uniform table closer), its
    rotation rate and its points a second."""

    channels: int
    upper_fov: float
    lower_fov: float
    points_per_second: int
    rotation_frequency: float
    range_m: float
    horizontal_fov: float = 360.0

    @classmethod
    def of_preset(cls, preset: SensorPreset, vertical_oversample: int = 1) -> CarlaLidarSetup:
        """The setup serving ``preset`` (see the class)."""
        if vertical_oversample < 1:
            raise ConfigError(f"vertical_oversample must be >= 1, got {vertical_oversample}")
        el = np.asarray(preset.elevations_deg, np.float64)
        channels = (preset.n_rings - 1) * vertical_oversample + 1
        period_s = scan_period_ns(preset) * 1e-9
        columns = firings_per_scan(preset) / max(preset.n_rings, 1)
        return cls(
            channels=int(channels),
            upper_fov=float(el.max()),
            lower_fov=float(el.min()),
            points_per_second=round(columns * channels / period_s),
            rotation_frequency=1.0 / period_s,
            range_m=float(preset.range.max_m),
        )

    def attributes(self) -> dict[str, str]:
        """The blueprint attributes (``set_attribute(name, value)``) of this setup."""
        return {
            "channels": str(self.channels),
            "upper_fov": f"{self.upper_fov:.6g}",
            "lower_fov": f"{self.lower_fov:.6g}",
            "points_per_second": str(self.points_per_second),
            "rotation_frequency": f"{self.rotation_frequency:.6g}",
            "range": f"{self.range_m:.6g}",
            "horizontal_fov": f"{self.horizontal_fov:.6g}",
        }

    def elevations(self) -> np.ndarray:
        """(channels,) deg, channel 0 the highest."""
        if self.channels == 1:
            return np.array([self.upper_fov])
        return self.upper_fov - np.arange(self.channels) * (self.upper_fov - self.lower_fov) / (
            self.channels - 1
        )

    def channel_of_rings(self, preset: SensorPreset) -> np.ndarray:
        """(n_rings,) the CARLA channel serving each ring (nearest elevation)."""
        el = np.asarray(preset.elevations_deg, np.float64)
        return np.argmin(np.abs(el[:, None] - self.elevations()[None, :]), axis=1)

    def vertical_error_deg(self, preset: SensorPreset) -> float:
        """The largest elevation difference between a ring and the channel serving it (at most half the
        channel spacing)."""
        el = np.asarray(preset.elevations_deg, np.float64)
        return float(np.max(np.abs(el - self.elevations()[self.channel_of_rings(preset)])))

    def horizontal_step_deg(self) -> float:
        """CARLA's azimuth step between two points of one channel."""
        per_channel_per_s = self.points_per_second / self.channels
        return 360.0 * self.rotation_frequency / per_channel_per_s


def hits_from_carla(
    sweep: CarlaSweep,
    firings: Firings,
    preset: SensorPreset,
    setup: CarlaLidarSetup,
    tag_material: np.ndarray,
) -> Hits:
    """The hits of ``firings`` served from ``sweep`` (see the module's docstring)."""
    n = len(firings)
    direction = firings.directions().copy()
    range_m = np.full(n, np.inf, np.float32)
    material = np.full(n, -1, np.int16)
    segment = np.zeros(n, np.uint32)
    cos_inc = np.zeros(n, np.float32)
    r = np.linalg.norm(sweep.points.astype(np.float64), axis=1)
    ok = r > 1e-6
    az = np.degrees(np.arctan2(sweep.points[:, 1], sweep.points[:, 0]))
    tol = 0.5 * setup.horizontal_step_deg() + 1e-6
    wanted = setup.channel_of_rings(preset)[firings.ring.astype(np.int64)]
    for ch in np.unique(wanted):
        sel = np.nonzero(wanted == ch)[0]
        pts = np.nonzero((sweep.channel == ch) & ok)[0]
        if pts.size == 0:
            continue
        order = pts[np.argsort(az[pts])]
        a = az[order]
        j = np.searchsorted(a, firings.azimuth_deg[sel])
        cand = np.stack([np.mod(j - 1, a.size), np.mod(j, a.size)])
        dist = np.abs((a[cand] - firings.azimuth_deg[sel][None, :] + 180.0) % 360.0 - 180.0)
        pick = np.argmin(dist, axis=0)
        best, d = cand[pick, np.arange(sel.size)], dist[pick, np.arange(sel.size)]
        hit = d <= tol
        rows, src = sel[hit], order[best[hit]]
        range_m[rows] = r[src]
        direction[rows] = (sweep.points[src] / r[src][:, None]).astype(np.float32)
        cos_inc[rows] = np.abs(sweep.cos_inc[src])
        material[rows] = tag_material[np.minimum(sweep.object_tag[src], 255)]
        segment[rows] = sweep.object_idx[src]
    return Hits.without_glass(firings, direction, range_m, cos_inc, material, segment)


def next_sector_azimuth(sweep: CarlaSweep, setup: CarlaLidarSetup, dt_s: float) -> float | None:
    """Where the next tick's sweep starts (project azimuth, deg), read from this tick's points: the
    sweep turns clockwise (azimuth falling) over an arc of ``360 x rotation_frequency x dt`` degrees,
    so the next one starts one step past the arc's low end. None when a tick sweeps the whole circle
    (then any phase is as good) or there are too few points to tell."""
    arc = 360.0 * setup.rotation_frequency * dt_s
    if arc >= 360.0 - setup.horizontal_step_deg() or len(sweep.points) < 8:
        return None
    az = np.sort(np.degrees(np.arctan2(sweep.points[:, 1], sweep.points[:, 0])))
    gaps = np.diff(np.append(az, az[0] + 360.0))
    low_end = az[(int(np.argmax(gaps)) + 1) % len(az)]
    return float((low_end - setup.horizontal_step_deg() + 180.0) % 360.0 - 180.0)


def phase_start_ns(preset: SensorPreset, azimuth_deg: float) -> int:
    """The time within the preset's first rotation (ns) at which its schedule fires nearest
    ``azimuth_deg``: a frame loop starting there fires where CARLA's next tick sweeps."""
    firings = firings_between(preset, 0, scan_period_ns(preset))
    dist = np.abs((firings.azimuth_deg - azimuth_deg + 180.0) % 360.0 - 180.0)
    return int(firings.t_ns[int(np.argmin(dist))])


def carla_weather_to_config(
    precipitation: float, fog_density: float, wetness: float, precipitation_deposits: float = 0.0
) -> WeatherConfig | None:
    """``carla.WeatherParameters`` (0..100 each) as the physics' weather, on the scale AirSim's 0..1
    parameters take (:func:`~rt_lidar.physics.weather.airsim_weather_to_config`): precipitation p -> rain
    50 p/100 mm/h, fog density f -> visibility 1000 m x (20/1000)^(f/100), the road's wetness the larger
    of ``wetness`` and ``precipitation_deposits`` (puddles) / 100. None: clear."""
    return airsim_weather_to_config(
        {
            AIRSIM_RAIN: precipitation / 100.0,
            AIRSIM_FOG: fog_density / 100.0,
            AIRSIM_ROAD_WETNESS: max(wetness, precipitation_deposits) / 100.0,
        }
    )


def carla_rotation_to_quaternion(roll_deg: float, pitch_deg: float, yaw_deg: float) -> np.ndarray:
    """A ``carla.Rotation`` (Unreal's left-handed axes) as a project-frame quaternion (w, x, y, z): pitch
    and yaw change sign going to right-handed axes, roll keeps it; applied yaw, then pitch, then roll."""
    r, p, y = math.radians(roll_deg), -math.radians(pitch_deg), -math.radians(yaw_deg)
    cr, sr, cp, sp, cy, sy = (
        math.cos(r / 2),
        math.sin(r / 2),
        math.cos(p / 2),
        math.sin(p / 2),
        math.cos(y / 2),
        math.sin(y / 2),
    )
    return np.array(
        [
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ]
    )


def weather_fields(config: WeatherConfig | None) -> dict[str, Any] | None:
    """A weather as a hits' ``weather`` dict (the fields the frame loop follows), None when clear."""
    if config is None:
        return None
    out: dict[str, Any] = {
        "rain_mm_h": config.rain_mm_h,
        "fog_visibility_m": config.fog_visibility_m,
        "snow_mm_h": config.snow_mm_h,
    }
    if config.road_wetness > 0:
        out["road_wetness"] = config.road_wetness
    return out
