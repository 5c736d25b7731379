"""Datasheet figures of the products whose calibration files we read, by product name.

A vendor file holds the beam table (and sometimes the lidar mode), never the range, power or optics.
Those come from here: each model names the shipped preset whose non-beam fields (optics, pulse,
receiver, output, returns) stand in for it, and overrides the figures its own datasheet gives (range,
rotation rates, firing cycle, wavelength, packet layout). ``--model`` takes the vendor's product name;
case, spaces and punctuation are not significant (``puck hi-res`` = ``PuckHiRes``).
"""

from __future__ import annotations

from rt_lidar.errors import PresetError
from rt_lidar.sensor.vendor.model_spec import ModelSpec, model_key
from rt_lidar.sensor.vendor.models_hesai import HESAI
from rt_lidar.sensor.vendor.models_ouster import OUSTER
from rt_lidar.sensor.vendor.models_robosense import ROBOSENSE
from rt_lidar.sensor.vendor.models_velodyne import VELODYNE

__all__ = ["MODELS", "ModelSpec", "find_model", "model_key", "models_for"]

_LIST: tuple[ModelSpec, ...] = (*VELODYNE, *HESAI, *ROBOSENSE, *OUSTER)

MODELS: dict[str, ModelSpec] = {}
for _m in _LIST:
    for _name in (_m.name, *_m.aliases):
        MODELS[model_key(_name)] = _m


def find_model(name: str, source: str, vendor: str | None = None) -> ModelSpec:
    """The model called ``name`` (any case or punctuation); a FieldError naming ``source`` otherwise."""
    spec = MODELS.get(model_key(name))
    if spec is None:
        # the product with a suffix the table does not list (HDL-64E S3, OS-1-64-U13): the longest
        # name that starts it
        key = model_key(name)
        starts = [k for k in MODELS if key.startswith(k) and len(k) >= 3]
        spec = MODELS[max(starts, key=len)] if starts else None
    if spec is None or (vendor is not None and spec.vendor != vendor):
        names = ", ".join(m.name for m in _LIST if vendor is None or m.vendor == vendor)
        raise PresetError(source, "model", f"unknown {vendor or 'sensor'} model {name!r}; known: {names}")
    return spec


def models_for(vendor: str, n_beams: int) -> list[ModelSpec]:
    """The vendor's models with ``n_beams`` beams, in table order."""
    return [m for m in _LIST if m.vendor == vendor and n_beams in m.beams]
