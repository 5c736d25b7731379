"""Weather <-> OSI ``EnvironmentalConditions``.

OSI states precipitation and fog as classes (``PRECIPITATION_*`` by intensity in mm/h, ``FOG_*`` by
visibility in m) and the temperature in K; rt-lidar's weather is numbers
(:class:`~rt_lidar.physics.weather.WeatherConfig`: rain and snow in mm/h, fog visibility in m, road
wetness). Writing, the numbers go to their class, and also, exactly, to a ``source_reference`` of type
:data:`WEATHER_REFERENCE_TYPE` (``key=value`` identifiers) that rt-lidar's model reads back first.
Reading someone else's conditions, each class becomes the geometric middle of its range (the open top
classes their lower bound); precipitation below 0 degC (273.15 K) is snow.
"""

from __future__ import annotations

import math
from typing import Any

from rt_lidar.physics.weather import WEATHER_LIMITS

__all__ = ["WEATHER_REFERENCE_TYPE", "conditions_to_weather", "weather_to_conditions"]

WEATHER_REFERENCE_TYPE = "net.rt-lidar:weather"
"""``ExternalReference.type`` of the exact weather rt-lidar writes beside OSI's classes."""

# (class name, lower bound, upper bound) of OSI's precipitation intensity in mm/h
_PRECIPITATION = (
    ("PRECIPITATION_NONE", 0.0, 0.1),
    ("PRECIPITATION_VERY_LIGHT", 0.1, 0.5),
    ("PRECIPITATION_LIGHT", 0.5, 1.9),
    ("PRECIPITATION_MODERATE", 1.9, 8.1),
    ("PRECIPITATION_HEAVY", 8.1, 34.0),
    ("PRECIPITATION_VERY_HEAVY", 34.0, 149.0),
    ("PRECIPITATION_EXTREME", 149.0, math.inf),
)
# (class name, lower bound, upper bound) of OSI's fog classes by visibility in m
_FOG = (
    ("FOG_DENSE", 0.0, 50.0),
    ("FOG_THICK", 50.0, 200.0),
    ("FOG_LIGHT", 200.0, 1000.0),
    ("FOG_MIST", 1000.0, 2000.0),
    ("FOG_POOR_VISIBILITY", 2000.0, 4000.0),
    ("FOG_MODERATE_VISIBILITY", 4000.0, 10000.0),
    ("FOG_GOOD_VISIBILITY", 10000.0, 40000.0),
    ("FOG_EXCELLENT_VISIBILITY", 40000.0, math.inf),
)
FREEZING_K = 273.15


def _class_of(value: float, table: tuple[tuple[str, float, float], ...]) -> str:
    for name, lo, hi in table:
        if lo <= value < hi:
            return name
    return table[-1][0]


def _middle(name: str, table: tuple[tuple[str, float, float], ...]) -> float | None:
    for n, lo, hi in table:
        if n == name:
            if math.isinf(hi):
                return lo
            return math.sqrt(max(lo, 0.05) * hi) if lo > 0 else hi / 2
    return None


def weather_to_conditions(msg: Any, weather: dict[str, float] | None, sun_lux: float = 0.0) -> None:
    """Fill an ``EnvironmentalConditions`` from rt-lidar weather fields (None: clear air)."""
    w = dict(weather or {})
    enum = type(msg)
    rain, snow = float(w.get("rain_mm_h", 0.0)), float(w.get("snow_mm_h", 0.0))
    msg.precipitation = enum.Precipitation.Value(_class_of(max(rain, snow), _PRECIPITATION))
    if snow > rain:
        msg.temperature = FREEZING_K - 5.0
    fog = w.get("fog_visibility_m")
    msg.fog = enum.Fog.Value(_class_of(float(fog) if fog is not None else math.inf, _FOG))
    if sun_lux > 0:
        msg.sun.intensity = float(sun_lux)
    ref = msg.source_reference.add()
    ref.type = WEATHER_REFERENCE_TYPE
    ref.identifier.extend(f"{k}={float(v)!r}" for k, v in sorted(w.items()) if v is not None)


def conditions_to_weather(msg: Any) -> tuple[dict[str, float] | None, list[str]]:
    """rt-lidar weather fields of an ``EnvironmentalConditions`` (None: clear air), and notes on what
    was taken on the user's behalf (a class read as its middle, an unknown class ignored)."""
    notes: list[str] = []
    for ref in msg.source_reference:
        if ref.type == WEATHER_REFERENCE_TYPE:
            exact: dict[str, float] = {}
            for item in ref.identifier:
                key, _, value = item.partition("=")
                if key in WEATHER_LIMITS:
                    exact[key] = float(value)
            return (exact or None), notes
    enum = type(msg)
    out: dict[str, float] = {}
    if msg.HasField("precipitation"):
        name = enum.Precipitation.Name(msg.precipitation)
        mm_h = _middle(name, _PRECIPITATION)
        if mm_h is None:
            notes.append(f"precipitation {name} has no intensity: ignored")
        elif name != "PRECIPITATION_NONE":
            snow = msg.HasField("temperature") and msg.temperature < FREEZING_K
            key = "snow_mm_h" if snow else "rain_mm_h"
            out[key] = min(mm_h, WEATHER_LIMITS[key][1])
            notes.append(f"precipitation {name} read as {key}={out[key]:.3g}")
    if msg.HasField("fog"):
        name = enum.Fog.Name(msg.fog)
        vis = _middle(name, _FOG)
        if vis is None:
            notes.append(f"fog {name} has no visibility: ignored")
        elif name != "FOG_EXCELLENT_VISIBILITY":
            lo, hi = WEATHER_LIMITS["fog_visibility_m"]
            out["fog_visibility_m"] = min(max(vis, lo), hi)
            notes.append(f"fog {name} read as fog_visibility_m={out['fog_visibility_m']:.4g}")
    return (out or None), notes
