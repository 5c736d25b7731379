"""The beam argument of the extension call ``rtLidarGetBeamHits`` (docs/extension-call.md), both ends.

``rtLidarGetBeamHits(lidar_name, vehicle_name, beam)`` answers like ``rtLidarGetHits`` but casts every
firing as a bundle of sub-rays. ``beam`` is a map; its one key so far is ``sub_rays``:
``{"sub_rays": {"offsets_rad": [[dh, dv], ...], "weights": [w, ...]}}`` -- the angular offsets of the
sub-rays from the pulse's nominal direction (horizontal, vertical; rad) and their weights. The client
packs it with :func:`encode_beam`, the server reads it with :func:`decode_beam`.

It is a method of its own, not a third argument of ``rtLidarGetHits``: rpclib binds one function per
name with one argument count (binding a name twice throws), so an rpclib server in Unreal could not
offer both forms, and a stateless call leaves every other reader's ``rtLidarGetHits`` answers as they
are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import WireFormatError

__all__ = ["BEAM_HITS_METHOD", "MAX_WIRE_SUB_RAYS", "decode_beam", "encode_beam"]

BEAM_HITS_METHOD = "rtLidarGetBeamHits"
"""The method name (three arguments: lidar name, vehicle name, beam map)."""
MAX_WIRE_SUB_RAYS = 1024
"""Most sub-rays a request may carry (a backend may accept fewer)."""


def encode_beam(offsets_rad: Any, weights: Any) -> dict[str, Any]:
    """The ``beam`` argument for sub-ray ``offsets_rad`` (N, 2) rad and ``weights`` (N,).

    Values go as plain msgpack arrays of floats (the client sends float64: the offsets arrive exact).
    """
    off = np.asarray(offsets_rad, np.float64).reshape(-1, 2)
    w = np.asarray(weights, np.float64).ravel()
    return {"sub_rays": {"offsets_rad": off.tolist(), "weights": w.tolist()}}


def decode_beam(beam: Any) -> tuple[np.ndarray, np.ndarray]:
    """(offsets (N, 2) float64 rad, weights (N,) float32) of a ``beam`` argument, checked for shape and
    finiteness; raises :class:`~unreal_bridge.errors.WireFormatError` naming what is wrong."""
    if not isinstance(beam, Mapping) or not isinstance(beam.get("sub_rays"), Mapping):
        raise WireFormatError(f"{BEAM_HITS_METHOD}: beam must be a map with a 'sub_rays' map")
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
