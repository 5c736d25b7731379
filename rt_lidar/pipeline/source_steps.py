"""Steps of WorldSource in one compiled pass each (``_source_steps``), where it was built.

Each function gives what the NumPy code it stands for gives, bit for bit
(``tests/rt_lidar/test_source_steps.py`` holds them to it), or None when off or given arrays it does not
take; the caller then runs the NumPy code.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from rt_lidar.unreal_bridge.world import RayHits

try:
    from rt_lidar.pipeline import _source_steps as _c
except ImportError:  # built without a C compiler: the NumPy code runs
    _c = None  # type: ignore[assignment]

__all__ = [
    "FirstSurfaces",
    "available",
    "first_surfaces",
    "glass_mirror_rays",
    "glass_step",
    "join_scan",
    "mirror_hits",
    "rotate_f32",
]

FirstSurfaces = tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]
"""(range, cos_incidence, material, segment, glass range, glass cos, glass material, glass segment,
glass transmission): the per-ray fields of :class:`~rt_lidar.pipeline.sources.Hits` after the first
surfaces."""

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled steps off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` in the environment starts
every process with the NumPy code, for comparing whole runs)."""


def available() -> bool:
    """Whether the compiled step runs."""
    return _c is not None and enabled


def _contiguous(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.ascontiguousarray(a) for a in arrays]


def _is(a: Any, dtype: Any, shape: tuple[int, ...]) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == dtype and a.shape == shape


def first_surfaces(
    rh: RayHits, dirs: np.ndarray, transmission: np.ndarray
) -> tuple[FirstSurfaces, np.ndarray] | None:
    """The per-ray fields after the first surfaces of ``rh`` (rays ``dirs``) and the rays that pass a
    transmissive one (``transmission[material] > 0``, in order), as ``WorldSource._cast`` makes them.
    None when off or the arrays are not of the types it takes."""
    n = rh.distance.shape[0]
    if not (
        available()
        and _is(rh.distance, np.float32, (n,))
        and _is(rh.normal, np.float32, (n, 3))
        and _is(rh.segment, np.uint32, (n,))
        and _is(rh.material, np.int16, (n,))
        and _is(dirs, np.float32, (n, 3))
        and isinstance(transmission, np.ndarray)
        and transmission.dtype == np.float32
        and transmission.ndim == 1
    ):
        return None
    f32, i16, u32 = np.float32, np.int16, np.uint32
    fields: FirstSurfaces = (
        np.empty(n, f32),
        np.empty(n, f32),
        np.empty(n, i16),
        np.empty(n, u32),
        np.empty(n, f32),
        np.empty(n, f32),
        np.empty(n, i16),
        np.empty(n, u32),
        np.empty(n, f32),
    )
    active = np.empty(n, np.int64)
    rays = _contiguous(rh.distance, rh.normal, rh.segment, rh.material, dirs, transmission)
    m = _c.first_surfaces(*rays, *fields, active)
    return fields, active[:m]


def glass_step(
    rh: RayHits,
    rays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    transmission: np.ndarray,
    max_range_m: float,
    eps_m: np.float32,
    fields: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """One round of ``WorldSource._cast``'s rays behind glass (without sun): ``rh`` the hits of the
    ``rays`` (travelled, active, directions, origins: their distances so far, their rows of the frame,
    and where they were cast from along what); the surfaces they end on written into ``fields`` (range,
    cos_incidence, material, segment, glass transmission of the frame), and the (origins, travelled,
    active) of the rays that pass glass again returned. None when off or the arrays are not of the
    types it takes (nothing written then)."""
    travelled, active, d_act, org = rays
    a = active.shape[0]
    n = fields[0].shape[0]
    if not (
        available()
        and type(max_range_m) is float
        and _is(rh.distance, np.float32, (a,))
        and _is(rh.normal, np.float32, (a, 3))
        and _is(rh.material, np.int16, (a,))
        and _is(rh.segment, np.uint32, (a,))
        and _is(travelled, np.float32, (a,))
        and _is(active, np.int64, (a,))
        and _is(d_act, np.float32, (a, 3))
        and _is(org, np.float32, (a, 3))
        and isinstance(transmission, np.ndarray)
        and transmission.dtype == np.float32
        and transmission.ndim == 1
        and all(f.flags.c_contiguous for f in fields)
        and [f.dtype for f in fields] == [np.float32, np.float32, np.int16, np.uint32, np.float32]
        and all(f.shape == (n,) for f in fields)
    ):
        return None
    org_out, travelled_out = np.empty((a, 3), np.float32), np.empty(a, np.float32)
    active_out = np.empty(a, np.int64)
    hit_fields = (rh.distance, rh.normal, rh.material, rh.segment)
    arrays = _contiguous(*hit_fields, travelled, active, d_act, org, transmission)
    m = _c.glass_step(*arrays, max_range_m, float(eps_m), *fields, org_out, travelled_out, active_out)
    return org_out[:m], travelled_out[:m], active_out[:m]


def glass_mirror_rays(
    origins: np.ndarray,
    dirs: np.ndarray,
    rows: np.ndarray,
    distance: np.ndarray,
    normal: np.ndarray,
    eps_m: np.float32,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(start points, unit directions, distances to the pane) of the mirror rays off the first pane of
    rays ``rows`` (origins and directions of every ray, the panes' ``distance`` and ``normal`` of every
    ray's first hit), as ``NumpySourceOps.glass_mirror_rays`` makes them. None when off or the arrays
    are not of the types it takes."""
    n, m = distance.shape[0], rows.shape[0]
    if not (
        available()
        and _is(origins, np.float32, (n, 3))
        and _is(dirs, np.float32, (n, 3))
        and _is(rows, np.int64, (m,))
        and _is(distance, np.float32, (n,))
        and _is(normal, np.float32, (n, 3))
    ):
        return None
    org, mdir, dist = np.empty((m, 3), np.float32), np.empty((m, 3), np.float32), np.empty(m, np.float32)
    arrays = _contiguous(origins, dirs, rows, distance, normal)
    _c.glass_mirror_rays(*arrays, float(eps_m), org, mdir, dist)
    return org, mdir, dist


def mirror_hits(
    n: int, rows: np.ndarray, dist: np.ndarray, mh: RayHits, mdir: np.ndarray, max_range_m: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Every one of ``n`` rays' (whole path, incidence cosine, material, segment) of the mirror rays
    ``mdir`` of rays ``rows`` (``dist`` to where they started) that met ``mh``, as
    ``NumpySourceOps.mirror_hits`` gives them. None when off or the arrays are not of the types it takes."""
    m = rows.shape[0]
    if not (
        available()
        and type(max_range_m) is float
        and _is(rows, np.int64, (m,))
        and _is(dist, np.float32, (m,))
        and _is(mh.distance, np.float32, (m,))
        and _is(mh.normal, np.float32, (m, 3))
        and _is(mh.material, np.int16, (m,))
        and _is(mh.segment, np.uint32, (m,))
        and _is(mdir, np.float32, (m, 3))
    ):
        return None
    out = (np.empty(n, np.float32), np.empty(n, np.float32), np.empty(n, np.int16), np.empty(n, np.uint32))
    arrays = _contiguous(rows, dist, mh.distance, mh.normal, mh.material, mh.segment, mdir)
    _c.mirror_hits(*arrays[:7], max_range_m, *out)
    return out


def rotate_f32(q: np.ndarray, v: np.ndarray) -> np.ndarray | None:
    """``v`` (N, 3) float32 rotated by the wxyz quaternions ``q`` (N, 4) float32 (a row broadcast to
    every row: one), as ``sources._rotate_f32`` computes it. None when off."""
    n = v.shape[0]
    if not (available() and _is(v, np.float32, (n, 3)) and q.dtype == np.float32 and q.shape == (n, 4)):
        return None
    one = n > 1 and q.strides[0] == 0
    out = np.empty((n, 3), np.float32)
    _c.rotate_f32(np.ascontiguousarray(q[:1] if one else q), np.ascontiguousarray(v), out)
    return out


def join_scan(parts: list[np.ndarray], start_ns: int) -> tuple[np.ndarray, int] | None:
    """``ScanAssembler._finish``'s join of a scan's ``parts`` in one pass: the records one after another
    with their ``t`` less ``start_ns`` (int64, wrapping as NumPy's does), and how many have ``return_id``
    0. None when off, for fewer than two parts, or parts that are not contiguous records of one type
    with an int64 ``t`` and a uint8 ``return_id``."""
    if not available() or len(parts) < 2:
        return None
    dtype = parts[0].dtype
    fields: dict[str, Any] = dict(dtype.fields or {})
    t, rid = fields.get("t"), fields.get("return_id")
    if t is None or rid is None or t[0] != np.dtype("<i8") or rid[0] != np.dtype(np.uint8):
        return None
    if any(p.dtype != dtype or p.ndim != 1 or not p.flags.c_contiguous for p in parts):
        return None
    out = np.empty(sum(p.size for p in parts), dtype)
    bytes_ = [p.view(np.uint8) for p in parts]
    returned = _c.join_scan(bytes_, out.view(np.uint8), dtype.itemsize, t[1], rid[1], int(start_ns))
    return out, returned
