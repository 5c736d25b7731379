"""A preset written as a standalone preset TOML that loads back as the same preset."""

from __future__ import annotations

import json
import re
from typing import Any

from rt_lidar.sensor.presets import SensorPreset, preset_to_dict

__all__ = ["preset_toml_text"]

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    return "[" + ", ".join(_value(x) for x in v) + "]"


def preset_toml_text(preset: SensorPreset, header: str = "") -> str:
    """``preset`` as TOML: scalars, then tables (``[provenance]`` with quoted keys), then ``[[beams]]``."""
    d = preset_to_dict(preset)
    out = [f"# {line}" for line in header.splitlines()] + ([""] if header else [])
    out += [f"{_key(k)} = {_value(v)}" for k, v in d.items() if not isinstance(v, (dict, list))]
    for k, v in d.items():
        if isinstance(v, dict):
            out += ["", f"[{_key(k)}]"] + [f"{_key(kk)} = {_value(vv)}" for kk, vv in v.items()]
    for b in d["beams"]:
        out += ["", "[[beams]]"] + [f"{_key(kk)} = {_value(vv)}" for kk, vv in b.items()]
    return "\n".join(out) + "\n"
