"""Copying the fields of one structured array into another's: fields that lie side by side in both, with
the same types, as one block of bytes (one pass over the arrays instead of one a field). The sinks'
packers (:func:`rt_lidar.sinks.rosbag.fill_cloud`, :func:`rt_lidar.sinks.pcd.with_intensity_type`)
write the same bytes with fewer passes. Where the compiled twin (``_field_copy``) was built,
:func:`copy_same_fields` copies every run of every record in one pass over the records instead (the
same bytes: ``tests/rt_lidar/sinks/test_field_copy.py``); ``RT_LIDAR_NO_TWINS=1`` or :data:`enabled`
switch it off.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

try:
    from rt_lidar.sinks import _field_copy as _c
except ImportError:  # built without a C compiler: the NumPy code runs
    _c = None  # type: ignore[assignment]

__all__ = [
    "copied_runs",
    "copy_fields",
    "copy_runs_compiled",
    "copy_same_fields",
    "intensity_uint_compiled",
    "seconds_compiled",
]

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled copy off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` switches every twin off)."""


def copied_runs(dst: np.dtype, src: np.dtype, names: list[str]) -> list[list[str]]:
    """``names`` (fields of ``dst`` copied unchanged from the field of that name in ``src``), grouped in
    runs of fields that lie side by side in both types with the same types: each run is one block of
    bytes in either, copied at once (:func:`copy_fields`)."""
    runs: list[list[str]] = []
    dst_f: dict[str, Any] = dict(dst.fields or {})
    src_f: dict[str, Any] = dict(src.fields or {})
    for name in names:
        if runs:
            prev = runs[-1][-1]
            d0, s0 = dst_f[prev], src_f[prev]
            if (
                dst_f[name][0] == src_f[name][0]
                and d0[0] == s0[0]
                and dst_f[name][1] == d0[1] + d0[0].itemsize
                and src_f[name][1] == s0[1] + s0[0].itemsize
            ):
                runs[-1].append(name)
                continue
        runs.append([name])
    return runs


def copy_fields(out: np.ndarray, points: np.ndarray, run: list[str]) -> None:
    """``out[name] = points[name]`` for every field of ``run`` (:func:`copied_runs`), the run's bytes as
    one block when it has several fields: the same bytes, fewer passes over the arrays."""
    if len(run) == 1:
        out[run[0]] = points[run[0]]
        return
    dst_f: dict[str, Any] = dict(out.dtype.fields or {})
    src_f: dict[str, Any] = dict(points.dtype.fields or {})
    size = dst_f[run[-1]][1] + dst_f[run[-1]][0].itemsize - dst_f[run[0]][1]

    def block(array: np.ndarray, offset: int) -> np.ndarray:
        itemsize = array.dtype.itemsize
        spec = {"names": ["b"], "formats": [f"V{size}"], "offsets": [offset], "itemsize": itemsize}
        return array.view(np.dtype(spec))["b"]  # type: ignore[call-overload]

    block(out, dst_f[run[0]][1])[...] = block(points, src_f[run[0]][1])


def _compiled_can_take(out: np.ndarray, points: np.ndarray) -> bool:
    """Whether the compiled twin is on and can take these arrays: no Python objects, 1-D, of one
    length, C-contiguous, ``out`` writable."""
    if _c is None or not enabled or out.dtype.hasobject or points.dtype.hasobject:
        return False
    if out.ndim != 1 or points.ndim != 1 or out.shape != points.shape:
        return False
    return bool(out.flags.c_contiguous and points.flags.c_contiguous and out.flags.writeable)


def _records(out: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """The compiled twins' first five arguments: both arrays' bytes, the record count and both record
    sizes."""
    return (
        out.view(np.uint8).reshape(-1),
        points.view(np.uint8).reshape(-1),
        points.size,
        out.dtype.itemsize,
        points.dtype.itemsize,
    )


def copy_runs_compiled(out: np.ndarray, points: np.ndarray, runs: list[list[str]]) -> bool:
    """:func:`copy_fields` of every run in ``runs`` by the compiled twin, each record once; False (and
    nothing copied) where it is off or not built, a field's type differs between the arrays (NumPy
    casts it) or holds Python objects, or the arrays are not 1-D, C-contiguous, of one length (``out``
    writable): the NumPy code runs then."""
    if not runs or not _compiled_can_take(out, points):
        return False
    spec = _run_spec(out, points, runs)
    if spec is None:
        return False
    if points.size:
        _c.copy_runs(*_records(out, points), spec)
    return True


def copy_same_fields(out: np.ndarray, points: np.ndarray, names: list[str]) -> None:
    """``out[name] = points[name]`` for each of ``names`` (fields of the same type in both), in runs
    (every record in one pass where the compiled twin runs, :func:`copy_runs_compiled`)."""
    runs = copied_runs(out.dtype, points.dtype, names)
    if copy_runs_compiled(out, points, runs):
        return
    for run in runs:
        copy_fields(out, points, run)


def seconds_compiled(out: np.ndarray, name: str, points: np.ndarray, t_name: str) -> bool:
    """``out[name] = points[t_name].astype(np.float64) * 1e-9`` (int64 ns as float32 seconds, the
    Velodyne driver's ``time``) by the compiled twin in one pass, the same bits; False (nothing written)
    where it is off or not built, the fields are not float32 and little-endian int64, or the arrays are
    not 1-D, C-contiguous, of one length (``out`` writable): the NumPy line runs then."""
    if not _compiled_can_take(out, points):
        return False
    dst_f: dict[str, Any] = dict(out.dtype.fields or {})
    src_f: dict[str, Any] = dict(points.dtype.fields or {})
    if name not in dst_f or t_name not in src_f:
        return False
    if dst_f[name][0] != np.dtype("<f4") or src_f[t_name][0] != np.dtype("<i8"):
        return False
    if points.size:
        _c.seconds_f32(*_records(out, points), dst_f[name][1], src_f[t_name][1])
    return True


def _run_spec(out: np.ndarray, points: np.ndarray, runs: list[list[str]]) -> np.ndarray | None:
    """The (dst offset, src offset, size) int64 triples of ``runs`` for the compiled twin; None where a
    field's type differs between the arrays (NumPy casts it) or there are more than 32 runs."""
    dst_f: dict[str, Any] = dict(out.dtype.fields or {})
    src_f: dict[str, Any] = dict(points.dtype.fields or {})
    if any(dst_f[n][0] != src_f[n][0] for run in runs for n in run) or len(runs) > 32:
        return None
    spec = []
    for run in runs:
        first, last = run[0], run[-1]
        size = dst_f[last][1] + dst_f[last][0].itemsize - dst_f[first][1]
        spec.append((dst_f[first][1], src_f[first][1], size))
    return np.asarray(spec, np.int64).reshape(-1)


def intensity_uint_compiled(
    out: np.ndarray, points: np.ndarray, names: list[str], name: str = "intensity"
) -> bool:
    """``out[name]``, a uint8 or uint16 field, from ``points[name]``, a float32 one, as
    :func:`rt_lidar.sinks.pcd.with_intensity_type` converts it (NaN and +-inf to 0, rounded to the
    nearest whole number, ties to even, clipped to the type's range), and ``names`` copied as
    :func:`copy_same_fields` copies them, by the compiled twin in one pass over the records, the same
    bytes; False (nothing written) where it is off or not built, the fields are not of those
    little-endian types, a copied field's type differs, or the arrays are not 1-D, C-contiguous, of one
    length (``out`` writable): the NumPy lines run then."""
    if not _compiled_can_take(out, points):
        return False
    dst_f: dict[str, Any] = dict(out.dtype.fields or {})
    src_f: dict[str, Any] = dict(points.dtype.fields or {})
    if name not in dst_f or name not in src_f or src_f[name][0] != np.dtype("<f4") or name in names:
        return False
    kind = dst_f[name][0]
    if kind not in (np.dtype("u1"), np.dtype("<u2")):
        return False
    runs = copied_runs(out.dtype, points.dtype, names)
    spec = _run_spec(out, points, runs) if runs else np.empty(0, np.int64)
    if spec is None:
        return False
    if points.size:
        _c.intensity_uint(
            *_records(out, points),
            dst_f[name][1],
            src_f[name][1],
            kind.itemsize,
            int(np.iinfo(kind).max),
            spec,
        )
    return True
