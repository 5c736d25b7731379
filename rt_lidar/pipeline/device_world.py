"""The embedded world cast by the BVH kernel (:mod:`rt_lidar.kernels.bvh_cuda`): on a GPU, or its CUDA
source compiled for the CPU.

:class:`BvhWorld` is a :class:`~rt_lidar.unreal_bridge.world.World` whose :meth:`~BvhWorld.cast` answers
with the same :class:`RayHits` fields from one kernel launch a batch: the static mesh's BVH in world
coordinates, and each moving object's BVH in its object frame, met by every ray at the object's pose
at that ray's own time (the poses are the trajectories' own at the batch's distinct times, the values
the CPU caster takes). Everything else (poses, segment ids, cameras) is the World's, so a
:class:`~rt_lidar.pipeline.sources.WorldSource` casts into it unchanged.

Backends (:data:`BVH_BACKENDS`): ``cuda`` (CuPy on a GPU: the BVHs uploaded once, each batch's rays up
and the hits back into page-locked host buffers) and ``cuda-source-on-cpu`` (the same source built for
the CPU by :class:`~rt_lidar.kernels.cuda_host.HostKernel`, split over the world's threads: what the
tests hold to Embree, and what runs where no GPU is).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rt_lidar.errors import ConfigError
from rt_lidar.kernels.bvh import Bvh, build_bvh
from rt_lidar.kernels.bvh_cuda import CUDA_SOURCE, KERNEL_NAME, SceneArrays, cast_rays
from rt_lidar.kernels.xp import cupy_available
from rt_lidar.unreal_bridge.world import RayHits, World
from rt_lidar.unreal_bridge.world.errors import WorldError
from rt_lidar.unreal_bridge.world.raycast import check_rays, face_normals, parallel_map, split, thread_count

__all__ = [
    "BVH_BACKENDS",
    "FRAME_DEVICES",
    "BvhWorld",
    "bvh_backend_unavailable_reason",
    "frame_device_unavailable_reason",
    "kernels_device_for",
    "scene_arrays",
    "world_on_device",
]

BVH_BACKENDS = ("cuda", "cuda-source-on-cpu")
FRAME_DEVICES = ("cpu", *BVH_BACKENDS)
"""Where a frame runs (``--device``): ``cpu`` (Embree and the NumPy physics: the default); ``cuda`` (the
BVH kernel on a GPU, and the physics after it there too: the device-resident frame,
:mod:`rt_lidar.pipeline.device_frame`); ``cuda-source-on-cpu`` (the same kernel's CUDA source built for
the CPU, the device frame's code on NumPy: slow, for tests and for trying the GPU path on a machine
without one)."""
_BOX_SLACK_M = 1e-2
"""How much wider than the swept bounding sphere an instance's world box is (a cull only)."""


def bvh_backend_unavailable_reason(backend: str) -> str | None:
    """Why ``backend`` cannot cast here, or None when it can."""
    if backend == "cuda":
        return None if cupy_available() else "needs CuPy and a CUDA device (pip install 'rt-lidar[gpu]')"
    if backend == "cuda-source-on-cpu":
        from rt_lidar.kernels.cuda_host import host_compiler

        return None if host_compiler() is not None else "needs a C++ compiler (g++) to build the kernel"
    return f"unknown BVH backend {backend!r}; known: {', '.join(BVH_BACKENDS)}"


def scene_arrays(world: World) -> tuple[SceneArrays, list[int]]:
    """The kernel's arrays of ``world``'s scene (static mesh in world coordinates as the World builds it,
    each moving object in its object frame) and the moving objects' indices."""
    objs = world.scene.objects
    verts, faces, mats, owner = [], [], [], []
    offset = 0
    for i, obj in enumerate(objs):
        if obj.triangle_count and obj.is_static:
            verts.append(obj.trajectory.pose_at(0.0).transform_points(obj.vertices).astype(np.float32))
            faces.append(obj.faces + offset)
            mats.append(obj.face_material)
            owner.append(np.full(obj.triangle_count, i, np.int32))
            offset += obj.vertices.shape[0]
    v = np.concatenate(verts) if verts else np.zeros((0, 3), np.float32)
    f = np.concatenate(faces).astype(np.int32) if faces else np.zeros((0, 3), np.int32)
    static = build_bvh(v, f)
    s_normal = face_normals(v, f) if f.shape[0] else np.zeros((0, 3), np.float32)
    moving = [i for i, o in enumerate(objs) if o.triangle_count and not o.is_static]
    blas: list[Bvh] = [build_bvh(objs[i].vertices, objs[i].faces) for i in moving]
    node_off = np.cumsum([0] + [b.node_count for b in blas])[:-1]
    ref_off = np.cumsum([0] + [b.tri_index.shape[0] for b in blas])[:-1]
    face_off = np.cumsum([0] + [objs[i].triangle_count for i in moving])[:-1]

    def cat(parts: list[np.ndarray], width: int, dtype: Any) -> np.ndarray:
        if not parts:
            return np.zeros((0, width) if width else 0, dtype)
        return np.ascontiguousarray(np.concatenate(parts), dtype)

    arrays = SceneArrays(
        s_box=static.node_box,
        s_meta=static.node_meta,
        s_tri=static.tri_vertices,
        s_id=static.tri_index,
        s_normal=s_normal,
        s_material=cat(mats, 0, np.int16),
        s_owner=cat(owner, 0, np.int32),
        i_node=np.asarray(node_off, np.int32),
        i_ref=np.asarray(ref_off, np.int32),
        i_face=np.asarray(face_off, np.int32),
        i_object=np.asarray(moving, np.int32),
        b_box=cat([b.node_box for b in blas], 6, np.float32),
        b_meta=cat([b.node_meta for b in blas], 2, np.int32),
        b_tri=cat([b.tri_vertices for b in blas], 9, np.float32),
        b_id=cat([b.tri_index for b in blas], 0, np.int32),
        b_normal=cat([face_normals(objs[i].vertices, objs[i].faces) for i in moving], 3, np.float32),
        b_material=cat([objs[i].face_material for i in moving], 0, np.int16),
    )
    return arrays, moving


def frame_device_unavailable_reason(device: str) -> str | None:
    """Why a frame cannot run on ``device`` here (one line), or None when it can."""
    if device == "cpu":
        return None
    return bvh_backend_unavailable_reason(device)


def world_on_device(world: World, device: str) -> World:
    """``world`` cast where ``device`` casts: itself on ``cpu``, else a :class:`BvhWorld` on the device
    (:class:`~rt_lidar.errors.ConfigError` naming what is missing where the device cannot run here)."""
    return world if device == "cpu" else BvhWorld(world, device)


def kernels_device_for(device: str, kernels_device: str) -> str:
    """Where the weather and echo-waveform kernels run for a frame on ``device``: on the GPU with
    ``cuda``, else where ``kernels_device`` puts them."""
    return "cuda" if device == "cuda" else kernels_device


def _distinct_times(t: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int32]]:
    """The distinct times of ``t`` (ascending) and each element's index among them: one pass for times in
    order (a frame's firings, its sub-ray bundles, the rays that go on behind glass), else a sort."""
    if t.shape[0] and bool((t[1:] >= t[:-1]).all()):
        new = np.empty(t.shape[0], bool)
        new[0] = True
        np.not_equal(t[1:], t[:-1], out=new[1:])
        index = np.cumsum(new, dtype=np.int32) - 1
        return t[new], index
    times, inverse = np.unique(t, return_inverse=True)
    return times, inverse.astype(np.int32).reshape(-1)


class BvhWorld(World):
    """``world`` (its scene, poses and segment ids) cast by the BVH kernel on ``backend``."""

    def __init__(self, world: World, backend: str = "cuda-source-on-cpu") -> None:
        why = bvh_backend_unavailable_reason(backend)
        if why is not None:
            raise ConfigError(f"--device {backend}: {why}")
        self.__dict__.update(world.__dict__)  # the World's scene, tables and casters (shared, read-only)
        self.backend = backend
        host, self._moving_indices = scene_arrays(world)
        if [mv.index for mv in self._moving.items] != self._moving_indices:
            raise WorldError("BvhWorld: the world's moving objects are not the scene's")
        self._host_arrays = host
        self._kernel: Any = None
        self._cp: Any = None
        self._lock = threading.Lock()
        self._segments_host: np.ndarray = np.zeros(0, np.uint32)
        self._segments_dev: Any = None
        if backend == "cuda":
            from rt_lidar.backend.device_arrays import import_cupy

            cupy = import_cupy(f"--device {backend}", check_device=False)  # (checked above)
            self._cp = cupy
            self._arrays = host.to(cupy.asarray)
        else:
            from rt_lidar.kernels.cuda_host import HostKernel

            self._kernel = HostKernel(CUDA_SOURCE, KERNEL_NAME)
            self._arrays = host

    @property
    def scene_arrays(self) -> SceneArrays:
        """The kernel's arrays on the host (node counts, triangles, tables)."""
        return self._host_arrays

    def instance_poses(
        self, t: float | ArrayLike, n: int
    ) -> tuple[NDArray[np.float32], NDArray[np.float64], NDArray[np.int32]]:
        """The moving objects' (world boxes over the times (M, 6), poses (M, U, 7) at the U distinct
        times, each of the ``n`` rays' time index (N,)) for one time or per-ray times ``t``."""
        tt = np.asarray(t, np.float64)
        if tt.ndim == 0:
            times, index = tt.reshape(1), np.zeros(n, np.int32)
        else:
            tt = tt.reshape(-1)
            if tt.shape != (n,) or not np.isfinite(tt).all():
                raise WorldError(
                    f"World.cast: t must be one time or {n} finite per-ray times, got shape {tt.shape}"
                )
            times, index = _distinct_times(tt)
        m = len(self._moving_indices)
        poses = np.empty((m, times.shape[0], 7), np.float64)
        boxes = np.empty((m, 6), np.float32)
        if not m:
            return boxes, poses, index
        # the spheres that hold each object over the batch's times (the CPU caster's own cull, cached)
        spheres = self._moving.swept_spheres(float(times[0]), float(times[-1]))
        for k, i in enumerate(self._moving_indices):
            p, q = self.scene.objects[i].trajectory.positions_rotations(times)
            poses[k, :, :3], poses[k, :, 3:] = p, q
            center, radius = spheres[k]
            boxes[k, :3], boxes[k, 3:] = center - radius - _BOX_SLACK_M, center + radius + _BOX_SLACK_M
        return boxes, poses, index

    def cast(
        self,
        origins: ArrayLike,
        directions: ArrayLike,
        t: float | ArrayLike,
        max_range: float = np.inf,
        threads: int | None = None,
    ) -> RayHits:
        """:meth:`World.cast` through the BVH kernel: the same fields, each ray's hit depending on that
        ray (and its time) alone."""
        o, d = check_rays(origins, directions, "World.cast")
        n = o.shape[0]
        if self._cp is not None:
            return self._cast_cuda(o, d, t, float(max_range))
        boxes, poses, index = self.instance_poses(t, n)
        segments = np.ascontiguousarray(self._segments, np.uint32)
        if n == 0:
            return RayHits(
                *cast_rays(self._arrays, o, d, max_range, boxes, poses, index, segments, self._kernel)
            )
        out = RayHits(
            np.empty(n, np.float32),
            np.empty((n, 3), np.float32),
            np.empty(n, np.uint32),
            np.empty(n, np.int16),
            np.empty(n, np.int32),
        )

        def run(sl: slice) -> None:
            got = cast_rays(
                self._arrays, o[sl], d[sl], max_range, boxes, poses, index[sl], segments, self._kernel
            )
            for field, src in zip(RayHits._fields, got, strict=True):
                getattr(out, field)[sl] = src

        parallel_map(run, split(n, thread_count(n, threads)))
        return out

    def cast_device(
        self, origins: Any, directions: Any, t: float | ArrayLike, max_range: float = np.inf
    ) -> RayHits:
        """The hits of rays already where the backend casts (CuPy (N, 3) float32 on ``cuda``, NumPy on
        the CPU build), left there: :class:`RayHits` of that backend's arrays, for a consumer that stays
        on the device. ``t``: one time or the rays' times, on the host (their poses are looked up there)."""
        xp: Any = self._cp if self._cp is not None else np
        n = int(origins.shape[0])
        boxes, poses, index = self.instance_poses(t, n)
        segments = np.ascontiguousarray(self._segments, np.uint32)
        got = cast_rays(
            self._arrays,
            xp.ascontiguousarray(origins, dtype=xp.float32).reshape(-1, 3),
            xp.ascontiguousarray(directions, dtype=xp.float32).reshape(-1, 3),
            max_range,
            xp.asarray(boxes),
            xp.asarray(poses),
            xp.asarray(index),
            xp.asarray(segments),
            self._kernel,
        )
        return RayHits(*got)

    @property
    def xp(self) -> Any:
        """The array module of the backend's arrays: CuPy on ``cuda``, NumPy on the CPU build."""
        return self._cp if self._cp is not None else np

    def posed_batch(self, t: float | ArrayLike, n: int) -> tuple[Any, Any, Any, Any]:
        """(instance boxes, poses, each ray's time index, segment table) of ``n`` rays at times ``t``
        (host), put where the backend casts: computed and copied once for a frame's rays, then shared
        by every :meth:`cast_posed` of that frame (the rays behind glass take their rows' indices)."""
        xp = self.xp
        boxes, poses, index = self.instance_poses(t, n)
        segments = np.ascontiguousarray(self._segments, np.uint32)
        if self._segments_dev is None or self._segments_host.tobytes() != segments.tobytes():
            self._segments_host, self._segments_dev = segments, xp.asarray(segments)
        return xp.asarray(boxes), xp.asarray(poses), xp.asarray(index), self._segments_dev

    def cast_posed(
        self,
        origins: Any,
        directions: Any,
        max_range: float,
        posed: tuple[Any, Any, Any, Any],
        rows: Any = None,
        threads: int | None = None,
    ) -> RayHits:
        """The hits of device rays ``origins`` / ``directions`` (N, 3) float32 against a frame's
        :meth:`posed_batch` (``rows``: the frame's rays these are, None = all), left on the device; the
        CPU build splits a large batch over ``threads`` (None: the world's choice), as :meth:`cast` does."""
        boxes, poses, index, segments = posed
        idx = index if rows is None else index[rows]
        if self._cp is not None:
            with self._lock:  # one batch at a time on the device's stream
                got = cast_rays(
                    self._arrays, origins, directions, max_range, boxes, poses, idx, segments, self._kernel
                )
            return RayHits(*got)
        n = int(origins.shape[0])
        out = RayHits(
            np.empty(n, np.float32),
            np.empty((n, 3), np.float32),
            np.empty(n, np.uint32),
            np.empty(n, np.int16),
            np.empty(n, np.int32),
        )

        def run(sl: slice) -> None:
            got = cast_rays(
                self._arrays,
                origins[sl],
                directions[sl],
                max_range,
                boxes,
                poses,
                idx[sl],
                segments,
                self._kernel,
            )
            for field, src in zip(RayHits._fields, got, strict=True):
                getattr(out, field)[sl] = src

        if n:
            parallel_map(run, split(n, thread_count(n, threads)))
        return out

    def _cast_cuda(self, o: NDArray[np.float32], d: NDArray[np.float32], t: Any, max_range: float) -> RayHits:
        """:meth:`cast_device` of host rays on the GPU, the hits copied back into page-locked memory."""
        cp = self._cp
        with self._lock:  # one batch at a time on the device's stream
            got = self.cast_device(cp.asarray(o), cp.asarray(d), t, max_range)
            return RayHits(*(_to_pinned(cp, g) for g in got))


def _to_pinned(cp: Any, a: Any) -> np.ndarray:
    """A device array copied into page-locked host memory (the DMA engine's direct path), as NumPy."""
    import cupyx

    host: np.ndarray = cupyx.empty_pinned(a.shape, a.dtype)
    cp.asnumpy(a, out=host)
    return host
