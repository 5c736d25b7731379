"""The beam argument of the extension call ``rtLidarGetBeamHits`` (docs/extension-call.md), both ends.

``rtLidarGetBeamHits(lidar_name, vehicle_name, beam)`` answers like ``rtLidarGetHits`` but casts every
firing as a bundle of sub-rays. ``beam`` is a map with up to two keys:

- ``sub_rays``: ``{"offsets_rad": [[dh, dv], ...], "weights": [w, ...]}`` -- the angular offsets of the
  sub-rays from the pulse's nominal direction (horizontal, vertical; rad) and their weights; absent =
  one ray along the pulse's direction (only together with ``sun``);
- ``sun``: ``{"direction": [x, y, z]}`` -- a unit vector towards the sun in AirSim's NED world frame,
  or ``{}`` for the sun of the server's own scene: the answer then carries the per-ray sun cosines;
- ``full``: ``{"edge_m": e, "spread_m": s}`` -- ``--beam full``: the server casts every firing's central
  ray, chooses from those the pulses whose footprint needs the bundle (``sub_rays``), with these range
  thresholds, and casts only those as the bundle; the answer's header says which
  (``info.full_beam``, :data:`FULL_BEAM_INFO`). A server that does not know the entry answers with the
  bundle for every pulse (``info.sub_rays``).

The client packs it with :func:`encode_beam`, the server reads it with :func:`decode_beam` and
:func:`decode_sun`. The sun direction is converted between NED and the project frame here, once each
way (with :mod:`rt_lidar.unreal_bridge.wire`'s vector flip).

It is a method of its own, not a third argument of ``rtLidarGetHits``: rpclib binds one function per
name with one argument count (binding a name twice throws), so an rpclib server in Unreal could not
offer both forms, and a stateless call leaves every other reader's ``rtLidarGetHits`` answers as they
are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .errors import WireFormatError
from .wire import Vec3, flu_to_ned_vector, ned_to_flu_vector

__all__ = [
    "BEAM_HITS_METHOD",
    "FULL_BEAM_INFO",
    "INFO_VECTORS",
    "MAX_WIRE_SUB_RAYS",
    "SCENE_SUN",
    "SUN_UNIT_TOLERANCE",
    "FullBeamRequest",
    "SunArg",
    "SunRequest",
    "decode_beam",
    "decode_full",
    "decode_sun",
    "encode_beam",
]

BEAM_HITS_METHOD = "rtLidarGetBeamHits"
"""The method name (three arguments: lidar name, vehicle name, beam map)."""
MAX_WIRE_SUB_RAYS = 1024
"""Most sub-rays a request may carry (a backend may accept fewer)."""
SCENE_SUN: Literal["scene"] = "scene"
"""The ``sun`` of :func:`encode_beam` that asks for the server's own scene sun (``"sun": {}``)."""
SUN_UNIT_TOLERANCE = 1e-6
"""How far from 1 the length of a sent sun direction may be (it is used as sent, never re-normalised)."""

INFO_VECTORS = ("sun_direction",)
"""Answer header (``info``) entries that are world-frame vectors: NED on the wire like every other vector
(``sun_direction``: the direction towards the sun a sun request was cast with)."""

FULL_BEAM_INFO = "full_beam"
"""The answer header entry of a ``full`` request: ``{"pulses": P, "sub_rays": N, "subray_weights": [...],
"bundle_pulses": [i, ...], "by_reason": {...}}``. The answer's first P rows are every firing's central
ray (one a firing, in firing order), the rest the N-ray bundles of the firings ``bundle_pulses``
(ascending), pulse-major, with each row's ``pulse_direction``."""

SunArg = Sequence[float] | np.ndarray | Literal["scene"] | None
"""What :func:`encode_beam` takes as ``sun``: a project-frame unit vector, :data:`SCENE_SUN`, or None."""


@dataclass(frozen=True)
class FullBeamRequest:
    """The ``full`` entry of a request: the range steps that call for the bundle (m)."""

    edge_m: float
    """Between two objects' neighbouring central rays."""
    spread_m: float
    """Over the footprint on one surface."""


@dataclass(frozen=True)
class SunRequest:
    """The ``sun`` entry of a request, in the project frame (x forward, y left, z up)."""

    direction: Vec3 | None
    """Unit world-frame vector towards the sun, exactly as sent; None = the server's scene sun."""


def encode_beam(
    offsets_rad: Any = None,
    weights: Any = None,
    sun: SunArg = None,
    poses: bool = False,
    full: FullBeamRequest | None = None,
) -> dict[str, Any]:
    """The ``beam`` argument for sub-ray ``offsets_rad`` (N, 2) rad and ``weights`` (N,) (both None: no
    ``sub_rays`` entry, one ray a pulse) and ``sun``: None (no sun), :data:`SCENE_SUN`, or a unit
    world-frame vector towards the sun in the project frame (sent in NED); ``poses`` asks for the
    lidar's world poses on the 1 ms grid it cast from (``"poses": {}``, answered in ``info.pose_samples``);
    ``full`` asks for ``--beam full`` with the sub-rays as its bundle (the ``full`` entry).

    Values go as plain msgpack arrays of floats (the client sends float64: offsets and sun arrive exact).
    Raises ValueError for a beam with neither entry or a sun direction that is not a unit 3-vector.
    """
    beam: dict[str, Any] = {}
    if offsets_rad is not None or weights is not None:
        off = np.asarray(offsets_rad, np.float64).reshape(-1, 2)
        w = np.asarray(weights, np.float64).ravel()
        beam["sub_rays"] = {"offsets_rad": off.tolist(), "weights": w.tolist()}
    if isinstance(sun, str):
        if sun != SCENE_SUN:
            raise ValueError(f"sun must be a unit 3-vector or {SCENE_SUN!r}, got {sun!r}")
        beam["sun"] = {}
    elif sun is not None:
        d = _unit(sun)
        if d is None:
            raise ValueError(f"sun must be a finite unit 3-vector, got {sun!r}")
        beam["sun"] = {"direction": list(flu_to_ned_vector(d).as_tuple())}
    if poses:
        beam["poses"] = {}
    if full is not None:
        if "sub_rays" not in beam:
            raise ValueError(f"{BEAM_HITS_METHOD}: a full beam needs its sub-ray bundle")
        beam["full"] = {"edge_m": float(full.edge_m), "spread_m": float(full.spread_m)}
    if not beam:
        raise ValueError(f"{BEAM_HITS_METHOD}: a beam needs sub-rays or a sun (or poses)")
    return beam


def _unit(v: Any) -> Vec3 | None:
    """``v`` as three floats when it is a finite vector of length 1 (within the tolerance), else None."""
    try:
        d = np.array(v, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if d.shape != (3,) or not np.isfinite(d).all():
        return None
    if abs(float(np.linalg.norm(d)) - 1.0) > SUN_UNIT_TOLERANCE:
        return None
    return (float(d[0]), float(d[1]), float(d[2]))


def decode_sun(beam: Any) -> SunRequest | None:
    """The ``sun`` entry of a ``beam`` argument in the project frame, None when it has none; raises
    :class:`~unreal_bridge.errors.WireFormatError` for a sun that is not a map or whose ``direction`` is
    not a finite unit 3-vector (NED)."""
    if not isinstance(beam, Mapping) or "sun" not in beam:
        return None
    sun = beam["sun"]
    if not isinstance(sun, Mapping):
        raise WireFormatError(f"{BEAM_HITS_METHOD}: sun must be a map ({{}} or {{'direction': [x, y, z]}})")
    if "direction" not in sun:
        return SunRequest(None)
    ned = sun["direction"]
    numbers = isinstance(ned, list) and all(type(x) in (int, float) for x in ned)  # no bools, no strings
    d = _unit(ned) if numbers else None
    if d is None:
        raise WireFormatError(
            f"{BEAM_HITS_METHOD}: sun.direction must be a unit vector [x, y, z] "
            f"(length 1 +- {SUN_UNIT_TOLERANCE}), got {ned!r:.80}"
        )
    return SunRequest(ned_to_flu_vector(d))


def decode_full(beam: Any) -> FullBeamRequest | None:
    """The ``full`` entry of a ``beam`` argument, None when it has none; raises
    :class:`~unreal_bridge.errors.WireFormatError` for one that is not a map of two finite non-negative
    numbers ``edge_m`` and ``spread_m``, or that comes without ``sub_rays``."""
    if not isinstance(beam, Mapping) or "full" not in beam:
        return None
    full = beam["full"]
    raw: list[Any] = [full.get(k) for k in ("edge_m", "spread_m")] if isinstance(full, Mapping) else []
    values = [float(v) for v in raw if type(v) in (int, float)]  # no bools, no strings
    ok = len(values) == 2 and all(math.isfinite(v) and v >= 0 for v in values)
    if not ok or not isinstance(beam.get("sub_rays"), Mapping):
        raise WireFormatError(
            f"{BEAM_HITS_METHOD}: full must be a map {{'edge_m': m, 'spread_m': m}} (finite, >= 0) beside "
            "a 'sub_rays' map"
        )
    return FullBeamRequest(float(values[0]), float(values[1]))


def decode_beam(beam: Any) -> tuple[np.ndarray, np.ndarray]:
    """(offsets (N, 2) float64 rad, weights (N,) float32) of a ``beam`` argument, checked for shape and
    finiteness; a beam with a ``sun`` but no ``sub_rays`` is one ray along the pulse (offset 0, weight
    1). Raises :class:`~rt_lidar.unreal_bridge.errors.WireFormatError` naming what is wrong."""
    if isinstance(beam, Mapping) and "sub_rays" not in beam and isinstance(beam.get("sun"), Mapping):
        return np.zeros((1, 2), np.float64), np.ones(1, np.float32)
    if not isinstance(beam, Mapping) or not isinstance(beam.get("sub_rays"), Mapping):
        raise WireFormatError(f"{BEAM_HITS_METHOD}: beam must be a map with a 'sub_rays' or a 'sun' map")
    sub = beam["sub_rays"]
    raw_off, raw_w = sub.get("offsets_rad"), sub.get("weights")
    if not isinstance(raw_off, list) or not isinstance(raw_w, list):
        raise WireFormatError(f"{BEAM_HITS_METHOD}: sub_rays needs 'offsets_rad' and 'weights' arrays")
    n = len(raw_w)
    if not 1 <= n <= MAX_WIRE_SUB_RAYS or len(raw_off) != n:
        raise WireFormatError(
            f"{BEAM_HITS_METHOD}: {len(raw_off)} offsets and {n} weights; need the same count, "
            f"1..{MAX_WIRE_SUB_RAYS}"
        )
    try:
        off = np.array(raw_off, dtype=np.float64)
        w = np.array(raw_w, dtype=np.float64)
    except (TypeError, ValueError):
        raise WireFormatError(f"{BEAM_HITS_METHOD}: offsets and weights must be numbers") from None
    if off.shape != (n, 2) or w.shape != (n,):
        raise WireFormatError(f"{BEAM_HITS_METHOD}: offsets_rad must be [[dh, dv], ...] pairs")
    if not (np.isfinite(off).all() and np.isfinite(w).all()):
        raise WireFormatError(f"{BEAM_HITS_METHOD}: offsets and weights must be finite")
    return off, w.astype(np.float32)
