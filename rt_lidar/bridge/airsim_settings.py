"""AirSim ``settings.json`` lidar blocks from presets, and presets back from such blocks.

AirSim's lidar is a uniform rotating scanner: channels evenly spread over [VerticalFOVLower,
VerticalFOVUpper], ``PointsPerSecond`` spread over ``RotationsPerSecond`` turns, horizontal angles
clockwise from forward (NED yaw). A solid-state preset maps to its frame rate and horizontal FOV.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rt_lidar.errors import ConfigError, FieldError
from rt_lidar.schema import check_value
from rt_lidar.sensor.presets import (
    SensorPreset,
    lambertian_return_w,
    list_presets,
    load_preset,
    preset_from_dict,
    preset_to_dict,
)
from rt_lidar.sensor.scan_pattern import firings_per_scan, scan_period_ns

__all__ = ["airsim_lidar_settings", "airsim_settings_json", "preset_from_airsim_settings"]

LIDAR_SENSOR_TYPE = 6
_FOV_TOLERANCE_DEG = 1.0
#: The lidar block's keys we read: type and allowed range (AirSim's defaults apply to absent keys).
LIDAR_FIELDS: dict[str, tuple[type, float, float]] = {
    "NumberOfChannels": (int, 1, 4096),
    "Range": (float, 0.1, 10_000.0),
    "PointsPerSecond": (float, 1.0, 1e8),
    "RotationsPerSecond": (float, 0.1, 100.0),
    "VerticalFOVUpper": (float, -90.0, 90.0),
    "VerticalFOVLower": (float, -90.0, 90.0),
    "HorizontalFOVStart": (float, -360.0, 360.0),
    "HorizontalFOVEnd": (float, -360.0, 360.0),
}
MAX_COLUMNS_PER_REV = 100_000


def _horizontal_fov(preset: SensorPreset) -> tuple[float, float]:
    s = preset.scan
    if s.pattern == "rotating":
        return 0.0, 359.0
    full = s.fov_deg if s.pattern == "rosette" else s.fov_h_deg
    half = (full if full is not None else 360.0) / 2.0
    return -half, half


def _vertical_fov(preset: SensorPreset) -> tuple[float, float]:
    s = preset.scan
    if s.pattern == "rosette":
        assert s.fov_deg is not None
        return -s.fov_deg / 2.0, s.fov_deg / 2.0
    el = preset.elevations_deg
    return float(el.min()), float(el.max())


def airsim_lidar_settings(
    preset: SensorPreset, name: str = "Lidar1", x: float = 0.0, y: float = 0.0, z: float = -1.8
) -> dict[str, Any]:
    """The settings.json sensor block (SensorType 6) of ``preset``; ``x, y, z`` in metres, NED."""
    del name  # the block does not carry its own name; it is the key in ``Sensors``
    period_s = scan_period_ns(preset) * 1e-9
    h_start, h_end = _horizontal_fov(preset)
    v_lower, v_upper = _vertical_fov(preset)
    return {
        "SensorType": LIDAR_SENSOR_TYPE,
        "Enabled": True,
        "NumberOfChannels": preset.n_rings,
        "RotationsPerSecond": round(1.0 / period_s, 6),
        "PointsPerSecond": round(firings_per_scan(preset) / period_s),
        "Range": preset.range.max_m,
        "VerticalFOVUpper": round(v_upper, 6),
        "VerticalFOVLower": round(v_lower, 6),
        "HorizontalFOVStart": h_start,
        "HorizontalFOVEnd": h_end,
        "X": x,
        "Y": y,
        "Z": z,
        "Roll": 0.0,
        "Pitch": 0.0,
        "Yaw": 0.0,
        "DrawDebugPoints": False,
        "DataFrame": "SensorLocalFrame",
    }


def airsim_settings_json(preset: SensorPreset, name: str = "Lidar1") -> dict[str, Any]:
    """A whole minimal settings.json: one PhysX car carrying the preset's lidar."""
    return {
        "SettingsVersion": 1.2,
        "SimMode": "Car",
        "Vehicles": {
            "PhysXCar": {
                "VehicleType": "PhysXCar",
                "AutoCreate": True,
                "Sensors": {name: airsim_lidar_settings(preset, name)},
            }
        },
    }


def _table(value: Any, source: str, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(source, where, f"must be a JSON object, got {type(value).__name__}")
    return value


def _checked_block(block: Mapping[str, Any], source: str, where: str) -> dict[str, Any]:
    """The lidar block with the fields we read checked (type, finite, range); others kept as they are."""
    out = dict(block)
    for key, (tp, lo, hi) in LIDAR_FIELDS.items():
        if key in block:
            meta = {"lo": lo, "hi": hi}
            out[key] = check_value(block[key], tp, meta, source, f"{where}.{key}")
    n = int(out.get("NumberOfChannels", 16))
    columns = float(out.get("PointsPerSecond", 100_000)) / n / float(out.get("RotationsPerSecond", 10.0))
    if columns > MAX_COLUMNS_PER_REV:
        raise FieldError(
            source,
            f"{where}.PointsPerSecond",
            f"{columns:,.0f} points per channel and rotation (PointsPerSecond / NumberOfChannels / "
            f"RotationsPerSecond); at most {MAX_COLUMNS_PER_REV:,}",
        )
    return out


def _lidar_blocks(settings: Any, source: str) -> dict[str, dict[str, Any]]:
    blocks: dict[str, dict[str, Any]] = {}
    root = _table(settings, source, "(top level)")
    for vname, vehicle in _table(root.get("Vehicles"), source, "Vehicles").items():
        sensors = _table(vehicle, source, f"Vehicles.{vname}").get("Sensors")
        for sname, block in _table(sensors, source, f"Vehicles.{vname}.Sensors").items():
            if isinstance(block, Mapping) and block.get("SensorType") == LIDAR_SENSOR_TYPE:
                where = f"Vehicles.{vname}.Sensors.{sname}"
                blocks.setdefault(str(sname), _checked_block(block, source, where))
    return blocks


def _mismatch(preset: SensorPreset, block: dict[str, Any]) -> float | None:
    """How far ``block`` is from ``preset`` in degrees of FOV, or None when it cannot be this sensor."""
    if int(block.get("NumberOfChannels", 16)) != preset.n_rings:
        return None
    ref = airsim_lidar_settings(preset)
    keys = ("VerticalFOVUpper", "VerticalFOVLower", "HorizontalFOVStart", "HorizontalFOVEnd")
    defaults = {
        "VerticalFOVUpper": 10.0,
        "VerticalFOVLower": -10.0,
        "HorizontalFOVStart": 0.0,
        "HorizontalFOVEnd": 359.0,
    }
    worst = max(abs(float(block.get(k, defaults[k])) - float(ref[k])) for k in keys)
    return worst if worst <= _FOV_TOLERANCE_DEG else None


def preset_from_airsim_settings(
    settings: Any, lidar_name: str | None = None, source: str = "settings.json"
) -> SensorPreset:
    """The preset closest to a settings.json lidar (same channels, FOV within 1 deg), else a uniform one.

    A matched rotating preset takes the block's ``RotationsPerSecond`` when the sensor allows it. The
    uniform fallback is a rotating sensor with generic optics and a detection threshold that puts a
    10 % target at 60 % of ``Range``. ``settings`` is the parsed JSON as it came (anything): a value of
    the wrong type or out of range raises :class:`~rt_lidar.errors.FieldError` naming ``source`` and
    the field (``Vehicles.Car1.Sensors.Lidar1.NumberOfChannels``).
    """
    blocks = _lidar_blocks(settings, source)
    if not blocks:
        raise ConfigError(f"{source}: no lidar sensor (SensorType 6)")
    if lidar_name is None:
        lidar_name = next(iter(blocks))
    if lidar_name not in blocks:
        raise ConfigError(f"{source}: no lidar named {lidar_name!r}; lidars: {', '.join(blocks)}")
    block = blocks[lidar_name]
    scored = []
    for pname in list_presets():
        preset = load_preset(pname)
        score = _mismatch(preset, block)
        if score is not None:
            scored.append((score, pname, preset))
    rps = float(block.get("RotationsPerSecond", 10.0))
    if scored:
        preset = min(scored, key=lambda s: (s[0], s[1]))[2]
        lo, hi = preset.scan.rotation_hz_range
        if preset.scan.pattern == "rotating" and lo <= rps <= hi and preset.scan.rotation_hz != rps:
            d = preset_to_dict(preset)
            d["scan"]["rotation_hz"] = rps
            preset = preset_from_dict(d, source=f"settings.json lidar {lidar_name!r}")
        return preset
    return _uniform_preset(block, lidar_name, rps)


def _uniform_preset(block: dict[str, Any], lidar_name: str, rps: float) -> SensorPreset:
    n = int(block.get("NumberOfChannels", 16))
    upper = float(block.get("VerticalFOVUpper", 10.0))
    lower = float(block.get("VerticalFOVLower", -10.0))
    max_m = float(block.get("Range", 100.0))
    points = float(block.get("PointsPerSecond", 100_000))
    columns = max(1, round(points / n / rps))
    beams = [{"ring": i, "elevation_deg": lower + (upper - lower) * i / max(n - 1, 1)} for i in range(n)]
    r10 = 0.6 * max_m
    d: dict[str, Any] = {
        "name": f"AirSim-{lidar_name}",
        "vendor": "AirSim",
        "model": "uniform rotating lidar",
        "source": f"built from settings.json lidar {lidar_name!r}",
        "packet_format": "none",
        "scan": {
            "pattern": "rotating",
            "rotation_hz": rps,
            "rotation_hz_range": [min(rps, 5.0), max(rps, 20.0)],
            "columns_per_rev": columns,
        },
        "range": {"max_m": max_m, "min_m": min(0.5, max_m / 2.0), "range_10pct_m": r10},
        "beams": beams,
    }
    probe = preset_from_dict(d, source=d["source"])  # dataclass defaults for optics and pulse
    threshold = lambertian_return_w(
        probe.pulse.peak_power_w, probe.optics.receiver_aperture_m, probe.optics.system_efficiency, r10
    )
    d["pulse"] = {"detection_threshold_w": threshold}
    return preset_from_dict(d, source=d["source"])
