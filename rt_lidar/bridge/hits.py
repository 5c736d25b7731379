"""Hits <-> the bridge's ``LidarHits`` (the ``rtLidarGetHits`` extension), both directions.

The embedded server casts with :class:`~rt_lidar.pipeline.sources.WorldSource` and sends every ray with the
extension's optional fields (direction, incidence, per-face material, glass); the controller turns the
answer back into :class:`~rt_lidar.pipeline.sources.Hits` for the physics stage. Hits cast as sub-ray bundles
(``rtLidarGetBeamHits``) go as one row per sub-ray, pulse-major, with each row's pulse direction
(``pulse_direction``) and the bundle in the header (``info.sub_rays``, ``info.subray_weights``). Hits
cast with a sun carry its per-ray cosines both ways (``sun_cos``, ``beam_sun_cos``); hits of a wet road
its road mask, mirror rays and spray segments (``wet``, ``mirror_*``, ``spray_*``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.scan_pattern import Firings
from rt_lidar.unreal_bridge import FluPose, LidarHits
from rt_lidar.unreal_bridge.wire import FIRING_FIELDS, INFO_POSE_SAMPLES

__all__ = ["firings_from_directions", "hits_from_wire", "hits_to_wire"]


def hits_to_wire(
    hits: Hits,
    pose: FluPose,
    time_stamp_ns: int,
    t_offset_ns: int = 0,
    info: dict[str, Any] | None = None,
    omit: frozenset[str] = frozenset(),
) -> LidarHits:
    """Every ray of ``hits`` as an extension answer; firing times shifted by ``t_offset_ns``. Sub-ray
    hits (``hits.subrays`` > 1) give one row per sub-ray, with the sub-ray fields of the extension;
    the sun cosines go as the ``sun_cos`` / ``beam_sun_cos`` fields when the hits have them. The core
    fields in ``omit`` (``"point"``, ``"normal"``: an answer that will leave them out) are not computed
    and read as zeros, as :func:`unreal_bridge.hits_codec.decode_hits` gives them; the firing fields in it
    (``ring``, ``time``, ``direction``: a lockstep client with the same schedule) are not made either
    (empty), unless the hits are sub-ray bundles, which keep them."""
    n = hits.subrays
    info = dict(info or {})
    if hits.pose_samples is not None:  # each pulse's world pose, exactly (a rig's interference model)
        ts, p_s, q_s = hits.pose_samples
        info[INFO_POSE_SAMPLES] = np.column_stack([ts, p_s, q_s]).astype(np.float64)
    extras: dict[str, np.ndarray] = {}
    for name in _SUN_FIELDS:
        value = getattr(hits, name)
        if value is not None:
            extras[name] = np.asarray(value, np.float32)
    for attr, (wire_name, dtype) in (_WET_FIELDS | _GLASS_MIRROR_FIELDS).items():
        value = getattr(hits, attr)
        if value is not None:
            extras[wire_name] = np.asarray(value, dtype)
    if n > 1:
        if hits.subray_weight is None:
            raise ValueError("sub-ray hits need their subray_weight")
        info["sub_rays"] = n
        info["subray_weights"] = [float(w) for w in hits.subray_weight]
        extras["pulse_direction"] = np.repeat(hits.firings.directions(), n, axis=0)
    miss = ~np.isfinite(hits.range_m)
    rng = np.where(miss, np.float32(np.nan), hits.range_m).astype(np.float32)
    rows = hits.direction.shape[0]
    if "point" in omit:
        points = np.zeros((rows, 3), np.float32)
    else:
        points = _scaled_rows(hits.direction, np.where(miss, np.float32(0.0), hits.range_m))
    if "normal" in omit:
        normals = np.zeros((rows, 3), np.float32)
    else:
        # the physics needs only the incidence cosine; a normal consistent with it, facing the ray (and
        # zero for a miss: the rows of misses are written after the negation, not picked out before it)
        normals = np.negative(hits.direction, dtype=np.float32)
        normals[miss] = 0.0
    segmentation = hits.segment.astype(np.int32)
    segmentation[miss] = -1
    skip = omit & FIRING_FIELDS if n == 1 else frozenset()  # left out of the answer: not made
    direction = {} if "direction" in skip else {"direction": hits.direction.astype(np.float32, copy=False)}
    nothing = np.zeros(0, np.int64)
    return LidarHits(
        points=points.astype(np.float32, copy=False),
        normals=normals,
        segmentation=segmentation,
        ring=nothing
        if "ring" in skip
        else (np.repeat(hits.firings.ring, n) if n > 1 else hits.firings.ring).astype(np.uint16),
        time=nothing
        if "time" in skip
        else (np.repeat(hits.firings.t_ns, n) if n > 1 else hits.firings.t_ns) + np.int64(t_offset_ns),
        range=rng,
        miss=miss,
        pose=pose,
        time_stamp=int(time_stamp_ns),
        extras={  # the hits' own arrays where their type is the wire's (the answer is sent, not kept)
            **direction,
            "cos_incidence": hits.cos_incidence.astype(np.float32, copy=False),
            "material": hits.material.astype(np.int16, copy=False),
            "glass_range": hits.glass_range_m.astype(np.float32, copy=False),
            "glass_cos": hits.glass_cos.astype(np.float32, copy=False),
            "glass_material": hits.glass_material.astype(np.int16, copy=False),
            "glass_segment": hits.glass_segment.astype(np.uint32, copy=False),
            "glass_transmission": hits.glass_transmission.astype(np.float32, copy=False),
            **extras,
        },
        info=info,
    )


def _scaled_rows(rows: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``rows * scale[:, None]`` for (N, 3) ``rows``, a column at a time (a third of the broadcast's time)."""
    out = np.empty(rows.shape, np.result_type(rows, scale))
    for k in range(rows.shape[1]):
        np.multiply(rows[:, k], scale, out=out[:, k])
    return out


def firings_from_directions(ring: np.ndarray, t_ns: np.ndarray, direction: np.ndarray) -> Firings:
    """Firings rebuilt from per-ray rings, times and unit directions (column unknown: -1)."""
    d = direction.astype(np.float64)
    az = np.degrees(np.arctan2(d[:, 1], d[:, 0]))
    el = np.degrees(np.arcsin(np.clip(d[:, 2], -1.0, 1.0)))
    return Firings(
        ring=ring.astype(np.uint16),
        t_ns=t_ns.astype(np.int64),
        azimuth_deg=az,
        elevation_deg=el,
        column=np.full(ring.shape[0], -1, np.int64),
        unit=np.ascontiguousarray(direction, dtype=np.float32),
    )


def hits_from_wire(answer: LidarHits, t_offset_ns: int = 0, expected: Firings | None = None) -> Hits:
    """Hits of an extension answer that carries our optional fields; times shifted by ``-t_offset_ns``.

    An answer that left out the firing fields (:data:`~rt_lidar.unreal_bridge.wire.FIRING_FIELDS`, asked by a
    lockstep client with the server's schedule) takes ``expected`` as its firings: it must be given,
    with one firing a ray (a ``ValueError`` otherwise).

    An answer of sub-ray bundles (``info.sub_rays`` = N > 1) gives Hits with ``subrays`` = N, the
    pattern's weights, per-sub-ray directions and one firing per bundle. ``expected``: the firings
    this side computed for the frame (lockstep); when the answer's rings, times and directions are
    exactly those, they are taken as they are instead of being rebuilt from the directions.
    """
    ex = answer.extras
    left_out = answer.omitted & FIRING_FIELDS
    needed = [k for k in ("direction", "cos_incidence", "material") if k not in left_out]
    missing = [k for k in needed if k not in ex]
    if missing:
        raise ValueError(f"rtLidarGetHits answer lacks the optional fields {missing} (not our server?)")
    n = answer.miss.shape[0]
    miss = answer.miss.astype(bool)
    rng = np.where(miss, np.float32(np.inf), answer.range).astype(np.float32)
    sub, weights = _bundle(answer)
    if left_out:  # the server sent no firings: they are this side's, from the same schedule
        if sub != 1 or expected is None or len(expected) != n:
            have = "none" if expected is None else f"{len(expected)}"
            raise ValueError(
                f"rtLidarGetHits answer of {n} rays left out {sorted(left_out)}, and this side's firings "
                f"of the interval ({have}) cannot stand for them"
            )
        firings = expected
        direction = firings.directions()
    elif sub == 1:
        times = answer.time - np.int64(t_offset_ns)
        if expected is not None and _same_firings(expected, answer.ring, times, ex["direction"]):
            firings = expected
        else:
            firings = firings_from_directions(answer.ring, times, ex["direction"])
        direction = firings.directions()
    else:
        times = answer.time - np.int64(t_offset_ns)
        firings = firings_from_directions(answer.ring[::sub], times[::sub], ex["pulse_direction"][::sub])
        direction = np.ascontiguousarray(ex["direction"], dtype=np.float32)

    def opt(name: str, fill: float, dtype: Any) -> np.ndarray:
        return _own(ex[name], dtype) if name in ex else np.full(n, fill, dtype)

    hits = Hits(
        firings=firings,
        direction=direction,
        range_m=rng,
        cos_incidence=_own(ex["cos_incidence"], np.float32),
        material=_own(ex["material"], np.int16),
        segment=np.maximum(answer.segmentation, 0).astype(np.uint32),
        glass_range_m=opt("glass_range", np.inf, np.float32),
        glass_cos=opt("glass_cos", 0.0, np.float32),
        glass_material=opt("glass_material", -1, np.int16),
        glass_segment=_glass_segments(ex, n),
        glass_transmission=opt("glass_transmission", 1.0, np.float32),
        subrays=sub,
        subray_weight=weights,
        sun_cos=_sun_field(ex, "sun_cos"),
        beam_sun_cos=_sun_field(ex, "beam_sun_cos"),
    )
    for attr, value in _wet_fields(ex).items():
        setattr(hits, attr, value)
    if all(wire in ex for wire, _ in _GLASS_MIRROR_FIELDS.values()):
        for attr, (wire, dtype) in _GLASS_MIRROR_FIELDS.items():
            setattr(hits, attr, np.ascontiguousarray(ex[wire]).astype(dtype))
    samples = answer.info.get(INFO_POSE_SAMPLES)
    if samples is not None and t_offset_ns == 0:  # sample times are on the server's clock
        a = np.asarray(samples, np.float64)
        hits.pose_samples = (a[:, 0].copy(), a[:, 1:4].copy(), a[:, 4:8].copy())
    return hits


def _own(a: np.ndarray, dtype: Any) -> np.ndarray:
    """``a`` as ``dtype``, writable and this side's own: as it is when it already is (a compact answer's
    spread glass fields), else a copy (the fields decoded as views of the received message)."""
    if a.dtype == dtype and a.flags.writeable and a.flags.owndata:
        return a
    return a.astype(dtype)


def _glass_segments(extras: Any, n: int) -> np.ndarray:
    """The glass segment ids (uint32): negative wire values (an int field) read 0."""
    if "glass_segment" not in extras:
        return np.zeros(n, np.uint32)
    a = extras["glass_segment"]
    if a.dtype.kind == "u":  # a compact answer's <u4: nothing to clip
        return _own(a, np.uint32)
    return np.maximum(a.astype(np.int64), 0).astype(np.uint32)


_SUN_FIELDS = ("sun_cos", "beam_sun_cos")
"""The per-ray sun fields of :class:`~rt_lidar.pipeline.sources.Hits`, under the same names on the wire."""


_WET_FIELDS: dict[str, tuple[str, Any]] = {
    "wet": ("wet", np.uint8),
    "mirror_range_m": ("mirror_range", np.float32),
    "mirror_cos": ("mirror_cos", np.float32),
    "mirror_material": ("mirror_material", np.int16),
    "mirror_segment": ("mirror_segment", np.uint32),
    "spray_in_m": ("spray_in", np.float32),
    "spray_out_m": ("spray_out", np.float32),
    "spray_density": ("spray_density", np.float32),
}
"""The wet-road fields of :class:`~rt_lidar.pipeline.sources.Hits` (attribute: wire name, dtype): sent
only when the server casts a wet road (its ``Roadwetness`` > 0), all or none."""


_GLASS_MIRROR_FIELDS: dict[str, tuple[str, Any]] = {
    "glass_mirror_range_m": ("glass_mirror_range", np.float32),
    "glass_mirror_cos": ("glass_mirror_cos", np.float32),
    "glass_mirror_material": ("glass_mirror_material", np.int16),
    "glass_mirror_segment": ("glass_mirror_segment", np.uint32),
}
"""The mirror rays off each ray's first pane (:mod:`rt_lidar.physics.glass_ghost`; attribute: wire name,
dtype): sent only when some ray of the answer met glass, all or none."""


def _wet_fields(extras: Any) -> dict[str, np.ndarray | None]:
    """The wet-road attributes of an answer's extras (None each when the server sent none)."""
    if not all(wire in extras for wire, _ in _WET_FIELDS.values()):
        return {}
    out: dict[str, np.ndarray | None] = {}
    for attr, (wire, dtype) in _WET_FIELDS.items():
        a = np.ascontiguousarray(extras[wire]).astype(dtype)
        out[attr] = a.astype(bool) if attr == "wet" else a
    return out


def _same_firings(f: Firings, ring: np.ndarray, t_ns: np.ndarray, direction: np.ndarray) -> bool:
    """Whether ``f`` holds exactly these rings, times and unit directions (bit for bit)."""
    if len(f) != ring.shape[0] or f.unit is None:
        return False
    unit, direction = f.unit, np.asarray(direction)
    if unit.dtype != np.float32 or direction.dtype != np.float32 or unit.shape != direction.shape:
        return False
    # bit for bit (a value compare would take -0.0 for 0.0), without copying either array
    return bool(
        np.array_equal(f.t_ns, t_ns)
        and np.array_equal(f.ring, ring)
        and np.array_equal(unit.view(np.uint32), direction.view(np.uint32))
    )


def _sun_field(extras: Any, name: str) -> np.ndarray | None:
    """A sun field of an answer as float32, None when the server did not send it (no sun asked)."""
    return np.ascontiguousarray(extras[name], dtype=np.float32) if name in extras else None


def _bundle(answer: LidarHits) -> tuple[int, np.ndarray | None]:
    """(sub-rays per firing, their weights) of an answer, checked: N consecutive rows share a firing."""
    sub = answer.info.get("sub_rays", 1)
    if not isinstance(sub, int) or sub < 1:
        raise ValueError(f"rtLidarGetHits answer: bad info.sub_rays {sub!r}")
    if sub == 1:
        return 1, None
    weights = np.asarray(answer.info.get("subray_weights", []), dtype=np.float32)
    rows = answer.ring.shape[0]
    if weights.shape != (sub,) or rows % sub or "pulse_direction" not in answer.extras:
        raise ValueError(
            f"rtLidarGetHits answer of {sub} sub-rays: needs {sub} subray_weights, a multiple of {sub} "
            f"rays (got {rows}) and the pulse_direction field"
        )
    ring, t = answer.ring.reshape(-1, sub), answer.time.reshape(-1, sub)
    if not ((ring == ring[:, :1]).all() and (t == t[:, :1]).all()):
        raise ValueError(f"rtLidarGetHits answer: rows of one bundle of {sub} differ in ring or time")
    return sub, weights
