"""Ray casters over one static triangle mesh: Embree (embreex) and a NumPy reference."""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import WorldError

__all__ = [
    "PARALLEL_MIN_RAYS",
    "RAY_CASTERS",
    "EmbreeCaster",
    "NumpyCaster",
    "RayCaster",
    "check_rays",
    "face_normals",
    "parallel_map",
    "split",
]

F32 = NDArray[np.float32]
T = TypeVar("T")
CastResult = tuple[NDArray[np.float32], NDArray[np.int64], NDArray[np.float32]]
MaxDistance = float | NDArray[np.float32]
"""One far limit for every ray, or one per ray."""

PARALLEL_MIN_RAYS = 16_384
"""Rays in a batch below which one Embree call does all the work (no split over threads)."""
_N_THREADS = 2
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class RayCaster(Protocol):
    """Nearest-hit ray casting against one fixed triangle mesh."""

    def intersect(
        self, origins: F32, directions: F32, max_distance: MaxDistance = np.inf, threads: int | None = None
    ) -> CastResult:
        """Nearest hits within ``max_distance`` (a number, or one per ray): distance (N,) float32
        (inf = miss), face (N,) int64 (-1 = miss), normal (N, 3)."""
        ...


def face_normals(vertices: F32, faces: NDArray[np.int32]) -> F32:
    """Unit geometric normals (F, 3) float32, (v1 - v0) x (v2 - v0); degenerate faces get +z."""
    v = vertices.astype(np.float64)
    n = np.cross(v[faces[:, 1]] - v[faces[:, 0]], v[faces[:, 2]] - v[faces[:, 0]])
    length = np.linalg.norm(n, axis=1, keepdims=True)
    out = np.where(length > 0, n / np.where(length > 0, length, 1.0), np.array([0.0, 0.0, 1.0]))
    return out.astype(np.float32)


def _check_mesh(vertices: np.ndarray, faces: np.ndarray) -> tuple[F32, NDArray[np.int32]]:
    v = np.ascontiguousarray(vertices, dtype=np.float32)
    f = np.ascontiguousarray(faces, dtype=np.int32)
    if v.ndim != 2 or v.shape[1] != 3 or f.ndim != 2 or f.shape[1] != 3:
        raise WorldError(f"ray caster: need vertices (V, 3) and faces (F, 3), got {v.shape} and {f.shape}")
    if f.size and (f.min() < 0 or f.max() >= v.shape[0]):
        raise WorldError("ray caster: faces index vertices out of range")
    return v, f


def check_rays(origins: ArrayLike, directions: ArrayLike, who: str = "ray caster") -> tuple[F32, F32]:
    """Rays as contiguous float32 (N, 3) origins and directions; WorldError (naming ``who``) when their
    shapes differ."""
    o = np.ascontiguousarray(origins, dtype=np.float32).reshape(-1, 3)
    d = np.ascontiguousarray(directions, dtype=np.float32).reshape(-1, 3)
    if o.shape != d.shape:
        raise WorldError(f"{who}: origins {o.shape} and directions {d.shape} differ")
    return o, d


def _limits(max_distance: MaxDistance, n: int) -> NDArray[np.float32] | None:
    """Per-ray far limits (float32, a fresh array Embree may write into), or None for no limit at all."""
    limit = _one_limit(max_distance)
    if limit is not None:
        return None if limit == math.inf else np.full(n, limit, dtype=np.float32)
    lim = np.array(max_distance, dtype=np.float32).reshape(-1)
    if lim.shape[0] != n:
        raise WorldError(f"ray caster: {lim.shape[0]} max_distance values for {n} rays")
    if np.isnan(lim).any():
        raise WorldError("ray caster: max_distance has NaN")
    return lim


def _one_limit(max_distance: MaxDistance) -> float | None:
    """The one far limit ``max_distance`` gives every ray (inf: none), or None for per-ray limits (NaN
    refused); :func:`_limits` fills its array with it (``np.float32(limit)`` is the rounding
    ``np.full`` gives)."""
    if isinstance(max_distance, float | int) or np.ndim(max_distance) == 0:  # (a Python number: no ndim)
        limit = float(max_distance)
        if math.isnan(limit):
            raise WorldError("ray caster: max_distance is NaN")
        return limit
    return None


def _empty(n: int) -> CastResult:
    return (
        np.full(n, np.inf, dtype=np.float32),
        np.full(n, -1, dtype=np.int64),
        np.zeros((n, 3), dtype=np.float32),
    )


_device: object | None = None


def _embree_device() -> object:
    """One Embree device for every scene (a device per scene costs a millisecond more per build)."""
    global _device
    with _pool_lock:
        if _device is None:
            from embreex import rtcore

            _device = rtcore.EmbreeDevice()
        return _device


def _thread_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_N_THREADS, thread_name_prefix="rt-lidar-embree")
        return _pool


_UNLIMITED = np.float32(1e37)
"""The far limit of a ray with none (what embreex's run() starts such a ray with)."""
_packets_module: Any = None
_packets_tried = False


def embree_packets() -> Any:
    """The compiled packet caster (``unreal_bridge.world._embree_packets``) opened on the libembree4 that
    embreex loads, or None where either is missing (then :class:`EmbreeCaster` casts through embreex)."""
    global _packets_module, _packets_tried
    with _pool_lock:
        if not _packets_tried:
            _packets_tried = True
            _packets_module = _open_packets()
        return _packets_module


def embree_library() -> Path | None:
    """The libembree4 that the embreex wheel bundles (and embreex loads), or None where embreex is
    missing or not laid out as a manylinux wheel."""
    try:
        import embreex
    except ImportError:
        return None
    libs = sorted((Path(embreex.__file__).parent.parent / "embreex.libs").glob("libembree4*"))
    return libs[0] if libs else None


def _open_packets() -> Any:
    try:
        from . import _embree_packets  # type: ignore[attr-defined]
    except ImportError:
        return None
    lib = embree_library()
    if lib is None:
        return None
    try:
        _embree_packets.open_library(str(lib))
        # one ray at a triangle: a library that cannot cast packets here is not used
        tri = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32)
        scene = _embree_packets.new_scene(tri, 3, np.array([[0, 1, 2]], np.uint32), 1)
        distance, face = np.full(1, 10.0, np.float32), np.empty(1, np.int32)
        origin, direction = np.array([[0.2, 0.2, 1.0]], np.float32), np.array([[0.0, 0.0, -1.0]], np.float32)
        _embree_packets.intersect(scene, origin, direction, distance, face)
    except (OSError, RuntimeError, ValueError):
        return None
    return _embree_packets if face[0] == 0 and abs(float(distance[0]) - 1.0) < 1e-4 else None


class EmbreeCaster:
    """Embree 4 BVH, robust mode unless ``robust`` is False; rays are split over two threads when there
    are many.

    Rays go eight at a time through Embree's ``rtcIntersect8`` (:func:`embree_packets`), over a BVH built
    at Embree's high quality, where the compiled packet caster is there, else one at a time through
    embreex: the same distances and faces bit for bit, the packets and the better BVH together 15-25 %
    cheaper on lidar rays (tools/bench/bench_casters.py). ``packets``: None takes them where they are,
    False never, True insists (raising :class:`WorldError` where they are missing).

    ``robust=False`` is Embree's fast mode (the ``embree-fast`` caster): about a quarter cheaper again,
    but 15-18 % of the hit distances differ from the robust mode's in their last bits, and a few rays per
    million slip through the shared edge of two triangles. In that mode the packets and embreex's one ray
    at a time are not bit for bit the same either (0.04 % of the distances differ in their last bits), so
    its scans are reproducible on one install, not between one with the compiled packets and one
    without."""

    def __init__(
        self, vertices: np.ndarray, faces: np.ndarray, packets: bool | None = None, robust: bool = True
    ) -> None:
        v, f = _check_mesh(vertices, faces)
        self.robust = robust
        self.n_faces = int(f.shape[0])
        normals = face_normals(v, f) if self.n_faces else np.zeros((0, 3), np.float32)
        self._normals_ext = np.concatenate([normals, np.zeros((1, 3), np.float32)])
        self._scene: Any = None
        self._packets: Any = None
        self._module: Any = embree_packets() if packets is not False else None
        if packets and self._module is None:
            raise WorldError("ray caster: Embree's packet queries are not available here")
        if not self.n_faces:
            return
        if self._module is not None:
            self._packets = self._module.new_scene(v, v.shape[0], f.view(np.uint32), f.shape[0], robust, True)
            return
        from embreex import rtcore_scene
        from embreex.mesh_construction import TriangleMesh

        self._scene = rtcore_scene.EmbreeScene(robust=robust)
        TriangleMesh(self._scene, v, f)
        # Commit now (the first run() builds the BVH) so that threads never race on it.
        self._scene.run(np.zeros((1, 3), np.float32), np.array([[0.0, 0.0, 1.0]], np.float32))

    @property
    def uses_packets(self) -> bool:
        """Whether this caster casts through Embree's packet queries."""
        return self._packets is not None

    def _faces_into(self, o: F32, d: F32, distance: F32) -> NDArray[np.int32]:
        """Faces hit (-1: none) by rays ``o``/``d`` whose far limits are in ``distance``, which gets
        their hit distances (inf: none)."""
        if self._packets is not None:
            packed = np.empty(o.shape[0], np.int32)
            self._module.intersect(self._packets, o, d, distance, packed)
            return packed
        assert self._scene is not None
        face: NDArray[np.int32] = self._scene.run(o, d, dists=distance, output=1)["primID"]
        distance[face < 0] = np.inf
        return face

    def _run(self, o: F32, d: F32, tfar: NDArray[np.float32] | None) -> CastResult:
        distance = np.full(o.shape[0], _UNLIMITED, np.float32) if tfar is None else tfar
        face = self._faces_into(o, d, distance).astype(np.int64)
        normal = self._normals_ext[face]  # face -1 reads the trailing zero row
        return distance, face, normal

    def intersect_into(
        self, origins: F32, directions: F32, max_distance: MaxDistance, distance: F32, normal: F32
    ) -> NDArray[np.int32]:
        """:meth:`intersect` in the calling thread, written into the caller's ``distance`` (N,) and
        ``normal`` (N, 3) (contiguous float32): Embree writes its hit distances straight into
        ``distance`` and the normals are gathered into ``normal``, with no array of the batch's size
        allocated but the faces, returned as int32 (-1 = miss). The same values as :meth:`intersect`."""
        face = self.faces_into(origins, directions, max_distance, distance)
        np.take(self._normals_ext, face, axis=0, out=normal, mode="wrap")  # face -1: the trailing zero row
        return face

    @property
    def normals_ext(self) -> F32:
        """The faces' unit normals (F, 3), then a zero row (what face -1, a miss, reads)."""
        return self._normals_ext

    def faces_into(
        self, origins: F32, directions: F32, max_distance: MaxDistance, distance: F32
    ) -> NDArray[np.int32]:
        """The faces hit (int32, -1 = miss) by rays cast in the calling thread, their hit distances
        written into the caller's ``distance`` (N,) (inf: none): :meth:`intersect_into` without the
        normals."""
        o, d = check_rays(origins, directions)
        n = o.shape[0]
        limit = _one_limit(max_distance)  # one far limit (a world cast's): filled in, no array of it
        tfar = None if limit is not None else _limits(max_distance, n)
        if not self.n_faces or n == 0:
            distance.fill(np.inf)
            return np.full(n, -1, dtype=np.int32)
        if tfar is not None:
            distance[:] = tfar
        else:  # one limit: tfar is None only then (per-ray limits always give an array)
            distance.fill(_UNLIMITED if limit == math.inf else np.float32(limit))
        return self._faces_into(o, d, distance)

    def intersect(
        self, origins: F32, directions: F32, max_distance: MaxDistance = np.inf, threads: int | None = None
    ) -> CastResult:
        """Nearest hits within ``max_distance`` (a number, or one per ray): distance, face (-1 = miss),
        unit face normal.

        ``threads``: how many threads share the rays (None: 2 when there are many rays, else 1).
        """
        o, d = check_rays(origins, directions)
        n = o.shape[0]
        tfar = _limits(max_distance, n)
        if not self.n_faces or n == 0:
            return _empty(n)
        n_threads = thread_count(n, threads)
        if n_threads <= 1:
            return self._run(o, d, tfar)
        parts = parallel_map(
            lambda s: self._run(o[s], d[s], None if tfar is None else tfar[s]), split(n, n_threads)
        )
        return (
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
        )


def thread_count(n: int, threads: int | None = None) -> int:
    """Threads that share ``n`` rays: ``threads`` when given, else 2 when there are many rays, else 1."""
    if threads is not None:
        return max(1, threads)
    return _N_THREADS if n >= PARALLEL_MIN_RAYS else 1


def split(n: int, parts: int) -> list[slice]:
    """``parts`` contiguous slices covering range(n)."""
    if parts == 1:  # one slice (a cast in the calling thread): no linspace, a sizeable share of a small cast
        return [slice(0, n)]
    bounds = np.linspace(0, n, parts + 1).astype(int)
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds)]


def parallel_map(fn: Callable[[slice], T], slices: list[slice]) -> list[T]:
    """Run ``fn`` on each slice in the shared 2-thread pool (NumPy and Embree release the GIL)."""
    if len(slices) == 1:
        return [fn(slices[0])]
    return list(_thread_pool().map(fn, slices))


class NumpyCaster:
    """Vectorised Möller–Trumbore over every face, in chunks: a slow reference for small meshes."""

    def __init__(self, vertices: np.ndarray, faces: np.ndarray, chunk_elements: int = 2_000_000) -> None:
        v, f = _check_mesh(vertices, faces)
        vd = v.astype(np.float64)
        self.n_faces = int(f.shape[0])
        self._v0 = vd[f[:, 0]]
        self._e1 = vd[f[:, 1]] - self._v0
        self._e2 = vd[f[:, 2]] - self._v0
        self._normals = face_normals(v, f) if self.n_faces else np.zeros((0, 3), np.float32)
        self._chunk = max(1, chunk_elements // max(self.n_faces, 1))

    def intersect(
        self, origins: F32, directions: F32, max_distance: MaxDistance = np.inf, threads: int | None = None
    ) -> CastResult:
        """Nearest hits within ``max_distance`` (a number, or one per ray): distance, face (-1 = miss),
        unit normal; one thread."""
        o, d = check_rays(origins, directions)
        n = o.shape[0]
        tfar = _limits(max_distance, n)
        limit = np.full(n, np.inf) if tfar is None else tfar.astype(np.float64)
        distance, face, normal = _empty(n)
        if self.n_faces == 0:
            return distance, face, normal
        eps = 1e-12
        for start in range(0, n, self._chunk):
            sl = slice(start, min(n, start + self._chunk))
            oc = o[sl].astype(np.float64)[:, None, :]
            dc = d[sl].astype(np.float64)[:, None, :]
            p = np.cross(dc, self._e2[None])
            det = np.einsum("rfk,fk->rf", p, self._e1)
            ok = np.abs(det) > eps
            inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
            s = oc - self._v0[None]
            u = np.einsum("rfk,rfk->rf", s, p) * inv
            q = np.cross(s, self._e1[None])
            v = np.einsum("rfk,rk->rf", q, dc[:, 0, :]) * inv
            t = np.einsum("rfk,fk->rf", q, self._e2) * inv
            hit = ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0) & (t <= limit[sl, None])
            t = np.where(hit, t, np.inf)
            best = np.argmin(t, axis=1)
            tbest = t[np.arange(t.shape[0]), best]
            got = np.isfinite(tbest)
            distance[sl] = np.where(got, tbest, np.inf).astype(np.float32)
            face[sl] = np.where(got, best, -1)
        hit_rows = face >= 0
        normal[hit_rows] = self._normals[face[hit_rows]]
        return distance, face, normal


def fast_embree_caster(vertices: np.ndarray, faces: np.ndarray) -> EmbreeCaster:
    """Embree in its fast (non-robust) mode: the ``embree-fast`` caster (:class:`EmbreeCaster`)."""
    return EmbreeCaster(vertices, faces, robust=False)


RAY_CASTERS: dict[str, Callable[[np.ndarray, np.ndarray], RayCaster]] = {
    "embree": EmbreeCaster,
    "embree-fast": fast_embree_caster,
    "numpy": NumpyCaster,
}
"""The casters a World can cast with, by name. ``embree`` is the default and what every scan is made
with unless a run asks otherwise; ``embree-fast`` trades the robust mode's last bits for speed;
``numpy`` is a slow reference for small meshes."""
