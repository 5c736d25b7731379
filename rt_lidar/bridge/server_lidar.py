"""The server's lidar against the preset: a controller whose preset is not the sensor the simulator
casts reads the wrong rays (another beam table, other firing times). Checked at connect from the
server's settings (``getSettingsString``); ``--preset server`` adopts the server's lidar instead."""

from __future__ import annotations

import json
import sys
from typing import Any

from rt_lidar.bridge.airsim_settings import _lidar_blocks, _mismatch, preset_from_airsim_settings
from rt_lidar.errors import ConfigError
from rt_lidar.sensor.presets import SensorPreset, list_presets, load_preset
from rt_lidar.unreal_bridge import RpcError

__all__ = ["ADOPT", "check_server_lidar", "resolve_server_preset"]

ADOPT = "server"
"""``--preset server``: take the preset from the server's lidar (the closest shipped one, else uniform)."""
SOURCE = "the server's settings (getSettingsString)"


def _settings(client: Any) -> Any:
    try:
        return json.loads(client.get_settings_string())
    except (RpcError, ValueError, TypeError):
        return None


def _describe(block: dict[str, Any]) -> str:
    n = int(block.get("NumberOfChannels", 16))
    lo, hi = float(block.get("VerticalFOVLower", -10.0)), float(block.get("VerticalFOVUpper", 10.0))
    return f"{n} channels, vertical FOV {lo:g}..{hi:g} deg"


def _closest(block: dict[str, Any]) -> str | None:
    scored = []
    for name in list_presets():
        score = _mismatch(load_preset(name), block)
        if score is not None:
            scored.append((score, name))
    return min(scored)[1] if scored else None


def check_server_lidar(client: Any, preset: SensorPreset, lidar_name: str = "") -> None:
    """Raise :class:`ConfigError` naming both when the server's lidar is not ``preset`` (channel count
    or field of view); say in one line when the server cannot tell."""
    settings = _settings(client)
    blocks = _lidar_blocks(settings, SOURCE) if isinstance(settings, dict) else {}
    if not blocks:
        print(
            f"rt-lidar: warning: the server's settings name no lidar: preset {preset.name} is not "
            "checked against the sensor it casts",
            file=sys.stderr,
        )
        return
    name = lidar_name or next(iter(blocks))
    if name not in blocks:
        raise ConfigError(f"the server has no lidar named {name!r}; its lidars: {', '.join(blocks)}")
    block = blocks[name]
    if _mismatch(preset, block) is not None:
        return
    lo, hi = min(preset.elevations_deg), max(preset.elevations_deg)
    closest = _closest(block)
    hint = f"--preset {closest!r}" if closest else "a preset file of that sensor"
    raise ConfigError(
        f"the server's lidar {name!r} ({_describe(block)}) is not preset {preset.name} "
        f"({preset.n_rings} beams, {lo:.1f}..{hi:.1f} deg): give {hint}, or --preset {ADOPT} to adopt "
        "the server's lidar"
    )


def resolve_server_preset(client: Any, preset: str | SensorPreset, lidar_name: str = "") -> SensorPreset:
    """The preset of a connection: ``preset`` checked against the server's lidar, or with
    ``preset == "server"`` the server's lidar adopted (and said in one line)."""
    if isinstance(preset, SensorPreset) or preset != ADOPT:
        sensor = preset if isinstance(preset, SensorPreset) else load_preset(preset)
        check_server_lidar(client, sensor, lidar_name)
        return sensor
    settings = _settings(client)
    if settings is None:
        raise ConfigError(f"--preset {ADOPT}: the server does not give its settings (getSettingsString)")
    adopted = preset_from_airsim_settings(settings, lidar_name or None, source=SOURCE)
    print(f"rt-lidar: the server's lidar adopted as preset {adopted.name}", file=sys.stderr)
    return adopted
