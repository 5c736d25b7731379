"""The ``rtLidarGetHits`` answer on the wire (docs/extension-call.md), both ways: the server's options
(``omit``, ``compact``) and :func:`encode_hits`, the client's :func:`decode_hits`. NED, little-endian
blobs of NumPy arrays, inline or through a client's shared-memory segment (:mod:`rt_lidar.unreal_bridge.shm`);
a compact answer narrows some ints and sends the glass fields at their rows alone
(:mod:`rt_lidar.unreal_bridge.compact`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from . import wire
from .beam_call import FULL_BEAM_INFO, INFO_VECTORS
from .compact import GLASS_FIELDS, GLASS_ROWS, NARROW_DTYPES, spread_glass
from .compact import glass_rows as compact_glass_rows
from .errors import WireFormatError
from .shm import HEADER_BYTES, ShmSegment, ShmTarget, needed_bytes
from .wire import (
    FIRING_FIELDS,
    INFO_POSE_SAMPLES,
    LEAN_FIELDS,
    LidarHits,
    Pose,
    ned_to_flu_points,
    ned_to_flu_vector,
    pose_ned_to_flu,
    pose_samples_from_wire,
)

__all__ = [
    "HITS_DTYPES",
    "SERVER_INFO",
    "compact_option",
    "decode_hits",
    "encode_hits",
    "hits_options",
    "omit_option",
    "server_info",
]

#: The field dtypes ``rtLidarGetHits`` may carry (anything else is refused, never interpreted).
HITS_DTYPES = {"|u1", "<u2", "<i2", "<i4", "<u4", "<i8", "<f4", "<f8"}

# Wire dtype of each NumPy dtype an extra field may have (narrow ints widen to the closed set).
_EXTRA_DTYPES = {
    np.dtype(np.bool_): "|u1",
    np.dtype(np.uint8): "|u1",
    np.dtype(np.uint16): "<u2",
    np.dtype(np.int16): "<i4",
    np.dtype(np.int32): "<i4",
    np.dtype(np.uint32): "<i8",
    np.dtype(np.int64): "<i8",
    np.dtype(np.float32): "<f4",
    np.dtype(np.float64): "<f8",
}


SERVER_INFO = {"in_order": True, "omit": sorted(LEAN_FIELDS), "compact": True}
"""``rtLidarServerInfo``: how this server serves (docs/extension-call.md). ``in_order``: each
connection's calls run one at a time and are answered in the order sent (``RpcServer`` does so), so a
controller may send the next frame's calls before it has read this frame's answer. ``omit``: the fields
a hits call may ask to be left out of its answer (its ``omit`` option); the firing fields
(:data:`~rt_lidar.unreal_bridge.wire.FIRING_FIELDS`) only by a client whose schedule matches the lidar's
``firings`` digest, which the answer adds where the backend gives them (``firing_digests()``).
``compact``: a hits call may ask for a compact answer (:mod:`rt_lidar.unreal_bridge.compact`)."""


def server_info(backend: object) -> dict[str, Any]:
    """The ``rtLidarServerInfo`` answer for ``backend``: :data:`SERVER_INFO`, with ``firings`` (lidar
    name -> digest of its firing schedule) where the backend has ``firing_digests()``."""
    info: dict[str, Any] = dict(SERVER_INFO)
    digests = getattr(backend, "firing_digests", None)
    if callable(digests):
        info["firings"] = {str(k): str(v) for k, v in digests().items()}
    return info


def omit_option(raw: Any, method: str) -> frozenset[str]:
    """The fields an ``omit`` option (a list of field names) asks to leave out of a hits answer; raises
    :class:`~rt_lidar.unreal_bridge.errors.WireFormatError` naming a field that cannot be."""
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(isinstance(f, str) for f in raw):
        raise WireFormatError(f"{method}: 'omit' must be a list of field names")
    bad = [f for f in raw if f not in LEAN_FIELDS]
    if bad:
        allowed = ", ".join(sorted(LEAN_FIELDS))
        raise WireFormatError(f"{method}: field '{bad[0]:.40}' cannot be omitted (allowed: {allowed})")
    return frozenset(raw)


def compact_option(raw: Any, method: str) -> bool:
    """Whether a ``compact`` option (true or false; absent: false) asks for a compact answer."""
    if raw is None:
        return False
    if not isinstance(raw, bool):
        raise WireFormatError(f"{method}: 'compact' must be true or false")
    return raw


def hits_options(options: Any) -> tuple[frozenset[str], bool]:
    """The optional third argument of ``rtLidarGetHits`` (``{"omit": [...], "compact": true}``): the
    fields the answer leaves out, and whether it is compact."""
    if options is None:
        return frozenset(), False
    if not isinstance(options, Mapping) or not options.keys() <= {"omit", "compact"}:
        raise WireFormatError("rtLidarGetHits: options must be a map with at most 'omit' and 'compact'")
    method = "rtLidarGetHits"
    return omit_option(options.get("omit"), method), compact_option(options.get("compact"), method)


def encode_hits(
    hits: LidarHits,
    shm: ShmTarget | None = None,
    poses: bool = False,
    omit: frozenset[str] = frozenset(),
    compact: bool = False,
) -> dict[str, Any]:
    """The ``rtLidarGetHits`` answer (docs/extension-call.md) of ``hits``: NED, little-endian blobs;
    ``compact``: a compact answer (:mod:`rt_lidar.unreal_bridge.compact`), asked for by the call.

    ``info.pose_samples`` (the lidar's world poses on the 1 ms grid it cast from) goes only with
    ``poses`` (a beam's ``poses`` entry asked for it), so every other answer stays as it was.

    With ``shm`` (a client's segment, :mod:`unreal_bridge.shm`) the fields' bytes are written there and
    each field says ``"shm": [offset, nbytes]`` instead of carrying ``"data"``; when they do not fit the
    answer goes inline with ``shm_refused`` and ``shm_needed`` (the segment size that would fit).
    """
    count = len(hits.points)
    bundles = hits.info.get("sub_rays", 1) != 1 or FULL_BEAM_INFO in hits.info
    if bundles:  # a bundle's rows are not the firings: they go as they are
        omit = omit - FIRING_FIELDS
    info = dict(hits.info)
    for key in INFO_VECTORS:
        if key in info:
            info[key] = list(wire.flu_to_ned_vector(info[key]).as_tuple())
    samples = info.pop(wire.INFO_POSE_SAMPLES, None)
    if poses and samples is not None:
        info[wire.INFO_POSE_SAMPLES] = wire.pose_samples_to_wire(samples)

    def blob(
        arr: Any, dtype: str, shape: tuple[int, ...], rows: int = count
    ) -> tuple[str, list[int], np.ndarray]:
        a = np.ascontiguousarray(np.asarray(arr).reshape(shape), dtype=np.dtype(dtype))
        if a.shape[0] != rows:
            raise ValueError(f"rtLidarGetHits: a field has {a.shape[0]} rows for {rows} points")
        return dtype, list(shape), a

    sparse = compact_glass_rows(hits.extras, count) if compact else None
    fields: dict[str, tuple[str, list[int], np.ndarray]] = {}
    if sparse is not None:
        fields[GLASS_ROWS] = blob(sparse, "<u4", (sparse.size,), sparse.size)
    for name, arr in hits.extras.items():
        if name in omit:
            continue
        a = np.asarray(arr)
        code = (compact and NARROW_DTYPES.get(a.dtype)) or _EXTRA_DTYPES.get(a.dtype)
        if code is None:
            raise ValueError(f"rtLidarGetHits: extra field '{name}' has unsupported dtype {a.dtype}")
        if a.ndim == 2 and a.shape[1] == 3:
            a = wire.flu_to_ned_points(a)  # vectors go NED like every other
        if sparse is not None and name in GLASS_FIELDS:  # only the rows of rays that crossed glass
            fields[name] = blob(np.take(a, sparse), code, (sparse.size,), sparse.size)
        else:
            fields[name] = blob(a, code, tuple(a.shape))
    if "point" not in omit:
        fields["point"] = blob(wire.flu_to_ned_points(hits.points), "<f4", (count, 3))
    if "normal" not in omit:
        normals = np.asarray(hits.normals, dtype=np.float32).reshape(-1, 3)
        fields["normal"] = blob(wire.flu_to_ned_points(normals), "<f4", (count, 3))
    fields["segmentation"] = blob(hits.segmentation, "<i4", (count,))
    if "ring" not in omit:
        fields["ring"] = blob(hits.ring, "<u2", (count,))
    if "time" not in omit:
        fields["time"] = blob(hits.time, "<i8", (count,))
    fields["range"] = blob(hits.range, "<f4", (count,))
    fields["miss"] = blob(hits.miss, "|u1", (count,))
    answer: dict[str, Any] = {
        "version": 1,
        "count": count,
        "frame": "NED",
        "time_stamp": int(hits.time_stamp),
        "pose": wire.pose_flu_to_ned(hits.pose).to_msgpack(),
        "info": info,
    }
    if omit:
        answer["omitted"] = sorted(omit)
    if compact:
        answer["compact"] = True
    if shm is not None:
        needed = needed_bytes([a.nbytes for _, _, a in fields.values()])
        if needed <= shm.capacity + HEADER_BYTES:
            shm.reset()
            answer["shm"] = {"name": shm.name}
            answer["fields"] = {
                name: {"dtype": code, "shape": shape, "shm": shm.write(a)}
                for name, (code, shape, a) in fields.items()
            }
            return answer
        answer["shm_refused"] = f"segment of {shm.capacity + HEADER_BYTES} bytes too small"
        answer["shm_needed"] = needed
    answer["fields"] = {
        name: {"dtype": code, "shape": shape, "data": _bytes_view(a)}
        for name, (code, shape, a) in fields.items()
    }
    return answer


def _bytes_view(a: np.ndarray) -> memoryview:
    """The bytes of a contiguous array, not copied (``rpc.pack`` writes them as one bin)."""
    return memoryview(cast(Any, a.reshape(-1).view(np.uint8)))


def _hits_field(
    fields: Mapping[str, Any], name: str, count: int, segment: ShmSegment | None = None
) -> np.ndarray:
    """The field ``name`` of an answer's ``fields``, ``count`` rows, checked (its data from ``segment``
    when it went through shared memory)."""
    spec = fields.get(name)
    if not isinstance(spec, Mapping):
        raise WireFormatError(f"rtLidarGetHits: field '{name}' is missing")
    dtype, shape, data = spec.get("dtype"), spec.get("shape"), spec.get("data")
    ref = spec.get("shm")
    if data is None and segment is not None and isinstance(ref, list) and len(ref) == 2:
        try:
            data = segment.read(ref[0], ref[1])
        except ValueError as exc:
            raise WireFormatError(f"rtLidarGetHits: field '{name}': {exc}") from None
    if dtype not in HITS_DTYPES or not isinstance(data, bytes | memoryview) or not isinstance(shape, list):
        raise WireFormatError(f"rtLidarGetHits: field '{name}' has dtype {dtype!r} / no bin data")
    if not shape or shape[0] != count or any(not isinstance(s, int) or s < 0 for s in shape):
        raise WireFormatError(f"rtLidarGetHits: field '{name}' has shape {shape}, expected ({count}, ...)")
    arr = np.frombuffer(data, dtype=np.dtype(dtype))
    if arr.size != math.prod(shape):  # (its entries are ints: checked above)
        raise WireFormatError(f"rtLidarGetHits: field '{name}' holds {arr.size} values for shape {shape}")
    return arr.reshape(shape)


_CORE_FIELDS = frozenset({"point", "normal", "segmentation", "ring", "time", "range", "miss"})


def decode_hits(
    answer: Any, segment: ShmSegment | None = None, omit: frozenset[str] = frozenset()
) -> LidarHits:
    """Read an ``rtLidarGetHits`` answer (see docs/extension-call.md) into project-frame arrays; fields
    sent through shared memory (``"shm": [offset, nbytes]``) are copied out of ``segment``. ``omit``:
    the fields the call asked the server to leave out (``points`` / ``normals``, ``ring`` / ``time``
    come back zero when it did, a left-out ``direction`` is absent from the extras; the answer's
    ``omitted`` says which); an answer that leaves out anything else is refused."""
    if not isinstance(answer, Mapping) or answer.get("version") != 1:
        raise WireFormatError("rtLidarGetHits: not a version-1 answer")
    count = answer.get("count")
    fields = answer.get("fields")
    if not isinstance(count, int) or count < 0 or not isinstance(fields, Mapping):
        raise WireFormatError("rtLidarGetHits: bad 'count' or 'fields'")
    omitted = answer.get("omitted", [])
    if (
        not isinstance(omitted, list)
        or not all(isinstance(f, str) for f in omitted)
        or not set(omitted) <= omit
    ):
        raise WireFormatError(f"rtLidarGetHits: the answer leaves out {omitted!r:.80}, not asked for")

    def vectors(name: str) -> np.ndarray:
        if name in omitted:
            return np.zeros((count, 3), np.float32)
        return ned_to_flu_points(_hits_field(fields, name, count, segment).reshape(count, 3))

    def scalars(name: str, dtype: type[np.generic]) -> np.ndarray:
        if name in omitted:
            return np.zeros(count, dtype)
        return _hits_field(fields, name, count, segment).astype(dtype)

    rows = _glass_rows(fields, count, segment)
    extras: dict[str, np.ndarray] = {}
    for name in fields:
        if name in _CORE_FIELDS or name == GLASS_ROWS or not isinstance(name, str):
            continue
        if rows is not None and name in GLASS_FIELDS:  # sent at the rows that crossed glass alone
            extras[name] = spread_glass(name, _hits_field(fields, name, rows.size, segment), rows, count)
            continue
        arr = _hits_field(fields, name, count, segment)
        extras[name] = ned_to_flu_points(arr) if arr.ndim == 2 and arr.shape[1] == 3 else arr
    raw_info = answer.get("info", {})
    info = dict(raw_info) if isinstance(raw_info, Mapping) else {}
    for key in INFO_VECTORS:
        if key in info:
            try:
                info[key] = ned_to_flu_vector(info[key])
            except (TypeError, ValueError):
                raise WireFormatError(f"rtLidarGetHits: info.{key} must be [x, y, z]") from None
    if INFO_POSE_SAMPLES in info:
        info[INFO_POSE_SAMPLES] = pose_samples_from_wire(info[INFO_POSE_SAMPLES])
    return LidarHits(
        points=vectors("point"),
        normals=vectors("normal"),
        segmentation=_hits_field(fields, "segmentation", count, segment).astype(np.int32),
        ring=scalars("ring", np.uint16),
        time=scalars("time", np.int64),
        range=_hits_field(fields, "range", count, segment).astype(np.float32),
        miss=_hits_field(fields, "miss", count, segment).astype(bool),
        pose=pose_ned_to_flu(Pose.from_msgpack(answer.get("pose", {}))),
        time_stamp=int(answer.get("time_stamp", 0)),
        extras=extras,
        info=info,
        omitted=frozenset(omitted),
    )


def _glass_rows(fields: Mapping[str, Any], count: int, segment: ShmSegment | None) -> np.ndarray | None:
    """The rows a compact answer sends its glass fields for (:mod:`rt_lidar.unreal_bridge.compact`), checked:
    ``<u4``, increasing, each below ``count``; None in a plain answer."""
    spec = fields.get(GLASS_ROWS)
    if spec is None:
        return None
    shape = spec.get("shape") if isinstance(spec, Mapping) else None
    k = shape[0] if isinstance(shape, list) and len(shape) == 1 else None
    if not isinstance(k, int) or not 0 <= k <= count or spec.get("dtype") != "<u4":
        raise WireFormatError(f"rtLidarGetHits: '{GLASS_ROWS}' must be up to {count} <u4 row numbers")
    rows = _hits_field(fields, GLASS_ROWS, k, segment).astype(np.int64)
    if rows.size and (rows[-1] >= count or not bool((rows[1:] > rows[:-1]).all())):
        raise WireFormatError(f"rtLidarGetHits: '{GLASS_ROWS}' must be increasing rows below {count}")
    return rows
