"""The moving objects of a World: each with its own BVH in its object frame, cast by moving the candidate
rays (those that may meet the object's bounding sphere) into that frame instead of moving the mesh."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from .pose import Pose, quat_conjugate, quat_rotate
from .raycast import RayCaster
from .scene import Scene

__all__ = ["MovingObjects"]

F64 = NDArray[np.float64]
F32 = NDArray[np.float32]

try:  # compiled twins of steps of the cast (an optional extension; the NumPy versions otherwise)
    from . import _cast_steps as _steps
except ImportError:  # built without a C compiler: the NumPy versions give the same bits
    _steps = None  # type: ignore[assignment]
if os.environ.get("RT_LIDAR_NO_TWINS"):  # the NumPy versions, for comparing whole runs
    _steps = None  # type: ignore[assignment]

#: Cast times whose moving-object poses are kept (a frame, its prefetched successor, a camera's time).
_POSE_CACHE = 8
_SWEEP_SAMPLES = 17
"""Samples of a moving object's path over a batch of per-ray times, for its culling sphere."""
_SWEEP_FRACTIONS = np.arange(_SWEEP_SAMPLES, dtype=np.float64) / (_SWEEP_SAMPLES - 1)


_Sweep = tuple[tuple[F64, float], tuple[F64, F64] | None]
"""An object's (swept sphere, swept box or None) over a span of times: :meth:`MovingObjects._sweep`."""


def _swept_sphere(p: F64, q: F64, center: F64, radius: float) -> tuple[F64, float]:
    """The sphere (centre, radius) that holds a bounding sphere (``center`` in the object frame,
    ``radius``) at every pose ``p`` (S, 3), ``q`` (S, 4) sampled over a span, and between them (see
    :meth:`MovingObjects._sweep`); the compiled ``swept_sphere`` gives the same bits."""
    c = p + quat_rotate(q, center)
    mid = 0.5 * (c.min(axis=0) + c.max(axis=0))
    far = float(np.sqrt(((c - mid) ** 2).sum(axis=1)).max())
    step = float(np.sqrt((np.diff(c, axis=0) ** 2).sum(axis=1)).max()) if len(c) > 1 else 0.0
    return mid, radius + far + step + 1e-3


class _Moving:
    """A moving object: its caster in the object frame and its bounding sphere."""

    def __init__(self, index: int, caster: RayCaster, vertices: NDArray[np.float32]) -> None:
        self.index = index
        self.caster = caster
        lo, hi = vertices.min(axis=0).astype(np.float64), vertices.max(axis=0).astype(np.float64)
        self.box = (lo.astype(np.float32) - 1e-3, hi.astype(np.float32) + 1e-3)
        """The object-frame bounding box, a millimetre wider."""
        self.center = 0.5 * (lo + hi)
        self.radius = float(np.linalg.norm(vertices.astype(np.float64) - self.center, axis=1).max()) + 1e-3
        blo, bhi = self.box[0].astype(np.float64), self.box[1].astype(np.float64)
        self.corners = np.array([[(blo, bhi)[(c >> a) & 1][a] for a in range(3)] for c in range(8)])
        """The eight corners of :attr:`box` (8, 3), float64."""


def _spread(o: F32, c0: F64) -> float:
    """A bound on how far the origins ``o`` lie from ``c0``: the farthest corner of their bounding box
    (per-axis min/max over strided views: a reduction over axis 0 of (N, 3) rows, or the distance of
    every origin, costs several times as much). Never less than the farthest origin, so the culls it
    feeds stay conservative."""
    if _steps is not None and o.flags.c_contiguous and o.dtype == np.float32:  # one pass, the same values
        b = _steps.bounds(o)
        lo, hi = np.array(b[:3], np.float64), np.array(b[3:], np.float64)
    else:
        flat = o.reshape(-1)
        lo = np.array([flat[k::3].min() for k in range(3)], np.float64)
        hi = np.array([flat[k::3].max() for k in range(3)], np.float64)
    reach = np.maximum(hi - c0, c0 - lo)
    return float(np.sqrt(reach @ reach)) * 1.0001 + 1e-6


def _meets_box(o: F32, d: F32, lo: F32, hi: F32) -> NDArray[np.intp]:
    """Rays (object frame) whose forward half meets the box [lo, hi] (slab test, axis by axis: a
    reduction over the short axis of (N, 3) rows is many times slower)."""
    near = np.zeros(o.shape[0], np.float32)
    far = np.full(o.shape[0], np.inf, np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in range(3):
            inv = np.float32(1.0) / d[:, k]
            t1, t2 = (lo[k] - o[:, k]) * inv, (hi[k] - o[:, k]) * inv
            np.fmax(near, np.fmin(t1, t2), out=near)  # fmin/fmax skip the NaN of a ray in a slab's plane
            np.fmin(far, np.fmax(t1, t2), out=far)
    return np.flatnonzero(far >= near)


def _object_frame_rays(
    o: F32,
    d: F32,
    cand: NDArray[np.intp],
    p: F64,
    q: F64,
    box: tuple[F32, F32],
    compiled: bool | None = None,
) -> tuple[NDArray[np.intp], F32, F32]:
    """The candidate rays ``cand`` of ``o`` / ``d`` (world frame) in a moving object's frame, each at its
    own pose (``p`` (K, 3), ``q`` (K, 4) wxyz: the object's position and rotation at that ray's time),
    element-wise in float64 then float32, and of those the ones whose forward half meets the object-frame
    ``box``: (their positions in ``cand``, their origins, their directions). The compiled twin
    (``_cast_steps``) gives the same bits in one pass; ``compiled`` forces either (None: the compiled
    one where it was built)."""
    use_c = _steps is not None if compiled is None else compiled
    contiguous = all(a.dtype == np.float32 and a.flags.c_contiguous for a in (o, d))
    if use_c and _steps is not None and contiguous:
        k = cand.shape[0]
        ol, dl = np.empty((k, 3), np.float32), np.empty((k, 3), np.float32)
        keep = np.empty(k, np.int64)
        m = _steps.object_frame_rays(
            o,
            d,
            np.ascontiguousarray(cand, np.int64),
            np.ascontiguousarray(p, np.float64),
            np.ascontiguousarray(q, np.float64),
            np.ascontiguousarray(box[0], np.float32),
            np.ascontiguousarray(box[1], np.float32),
            ol,
            dl,
            keep,
        )
        return keep[:m].astype(np.intp, copy=False), ol[:m], dl[:m]
    qi = quat_conjugate(q)
    ol = quat_rotate(qi, np.take(o, cand, axis=0).astype(np.float64) - p).astype(np.float32)
    dl = quat_rotate(qi, np.take(d, cand, axis=0).astype(np.float64)).astype(np.float32)
    inside = _meets_box(ol, dl, *box)
    return inside, np.take(ol, inside, axis=0), np.take(dl, inside, axis=0)


class MovingObjects:
    """A scene's moving objects (those with triangles whose trajectory is not static), their casters
    made by ``make`` in the object frame, and the poses and swept spheres a cast reuses."""

    box_cull = True
    """Cull the rays of a batch cast at per-ray times by the objects' swept boxes too (where the compiled
    steps were built): fewer rays to take into an object's frame, the same hits."""

    def __init__(self, scene: Scene, make: Callable[[np.ndarray, np.ndarray], RayCaster]) -> None:
        self._objects = scene.objects
        self.items: list[_Moving] = []
        self._face_material: dict[int, NDArray[np.int16]] = {}
        for i, obj in enumerate(scene.objects):
            if obj.triangle_count and not obj.is_static:
                self.items.append(_Moving(i, make(obj.vertices, obj.faces), obj.vertices))
                self._face_material[i] = obj.face_material
        self._pose_cache: dict[float, list[Pose]] = {}
        self._sweep_cache: dict[tuple[float, float], list[_Sweep]] = {}
        self._pose_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.items)

    def poses_at(self, t: float) -> list[Pose]:
        """Poses of the moving objects at ``t`` (a lidar frame casts at one t two or three times)."""
        with self._pose_lock:
            poses = self._pose_cache.get(t)
            if poses is None:
                poses = [self._objects[mv.index].trajectory.pose_at(t) for mv in self.items]
                if len(self._pose_cache) >= _POSE_CACHE:
                    self._pose_cache.pop(next(iter(self._pose_cache)))
                self._pose_cache[t] = poses
            return poses

    def swept_spheres(self, lo: float, hi: float) -> list[tuple[F64, float]]:
        """The spheres swept by the moving objects over the batch's times [``lo``, ``hi``], once for
        every slice; a batch whose times lie within those of an earlier one (the rays that go on behind
        glass) takes that batch's spheres: larger than its own, so its cull keeps every ray that can meet
        an object, and each ray's hit is the same."""
        return [sphere for sphere, _ in self._sweeps(lo, hi)]

    def swept_boxes(self, lo: float, hi: float) -> list[tuple[F64, F64]]:
        """World-frame boxes (low, high corners) that hold the moving objects' boxes at every time in
        [``lo``, ``hi``], cached as :meth:`swept_spheres` are (the compiled steps' only: they alone cull
        by boxes)."""
        boxes = [box for _, box in self._sweeps(lo, hi)]
        if any(box is None for box in boxes):
            raise RuntimeError("swept boxes need the compiled cast steps (unreal_bridge.world._cast_steps)")
        return boxes  # type: ignore[return-value]

    def _sweeps(self, lo: float, hi: float) -> list[_Sweep]:
        """:meth:`_sweep` of every moving object, or what the cache holds for a span that contains
        [``lo``, ``hi``] (the oldest entry dropped once it holds :data:`_POSE_CACHE`)."""
        with self._pose_lock:
            for (a, b), got in self._sweep_cache.items():
                if a <= lo and hi <= b:
                    return got
        made = [self._sweep(mv, lo, hi) for mv in self.items]
        with self._pose_lock:
            if len(self._sweep_cache) >= _POSE_CACHE:
                self._sweep_cache.pop(next(iter(self._sweep_cache)))
            self._sweep_cache[(lo, hi)] = made
        return made

    def _sweep(self, mv: _Moving, lo: float, hi: float) -> _Sweep:
        """The object's pose at 17 times over [``lo``, ``hi``], once, and from them:

        - a sphere holding its bounding sphere at every time in the span: its centre sampled at those
          times, the radius grown by the farthest sample and the longest step between samples (the path
          between two samples stays within a step of them);
        - with the compiled steps, a box holding its box: the corners at those times, their world bounds
          grown by the longest step of a corner between samples and a centimetre."""
        ts = lo + (hi - lo) * _SWEEP_FRACTIONS  # np.linspace's values at a tenth of its cost
        ts[-1] = hi
        p, q = self._objects[mv.index].trajectory.positions_rotations(ts)
        if _steps is None:
            return _swept_sphere(p, q, mv.center, mv.radius), None
        p, q = np.ascontiguousarray(p, np.float64), np.ascontiguousarray(q, np.float64)
        got = np.empty(5)
        _steps.swept_sphere(p, q, mv.center, got)  # the twin of _swept_sphere's lines, bit for bit
        box = np.empty(6)
        _steps.swept_box(p, q, mv.corners, box)
        return (got[:3], mv.radius + float(got[3]) + float(got[4]) + 1e-3), (box[:3], box[3:])

    def cast(
        self,
        o: F32,
        d: F32,
        poses: list[Pose] | F64,
        max_range: float,
        hits: tuple[F32, F32, NDArray[np.int16], NDArray[np.int32]],
        span: tuple[float, float] | None = None,
    ) -> None:
        """Cast the batch against the moving objects, keeping each ray's nearer hits in ``hits`` (the
        batch's distances, normals, materials and object indices, as the static cast left them);
        ``poses`` are the objects' poses at the batch's one time, or the (N,) per-ray times at which each
        ray meets them, culled by the spheres (and boxes) that hold each object over ``span``, those
        times' min and max (computed here when not given)."""
        c0 = o[0].astype(np.float64)
        spread = _spread(o, c0)
        od = oo = None
        per_ray = not isinstance(poses, list)
        spheres: list[tuple[F64, float]] | None = None
        boxes: list[tuple[F64, F64]] | None = None
        if per_ray:
            if span is None:
                times = np.asarray(poses)
                span = float(times.min()), float(times.max())
            sweeps = self._sweeps(*span)
            spheres = [sphere for sphere, _ in sweeps]
            if (
                self.box_cull
                and _steps is not None  # then every sweep has its box
                and all(a.dtype == np.float32 and a.flags.c_contiguous for a in (o, d))
            ):
                boxes = [box for _, box in sweeps if box is not None]
        for k, mv in enumerate(self.items):
            if per_ray:
                assert spheres is not None
                # the sphere swept over the batch's times (a superset of where the object is)
                center, radius = spheres[k]
            else:
                pose = poses[k]
                center, radius = pose.transform_points(mv.center), mv.radius
            if spread <= 0.25 * radius:  # origins close together (a lidar's or a camera's)
                cand = self._cull_cone(radius, center, c0, spread, d)
                if boxes is not None and (cand is None or cand.size):  # None: every ray (an origin near it)
                    every = np.arange(d.shape[0], dtype=np.int64) if cand is None else cand
                    cand = self._cull_box(boxes[k], d, every, o)
            elif _steps is not None:  # scattered origins (behind glass): one pass, no temporaries
                cand = np.empty(o.shape[0], np.int64)
                r2 = np.array([radius * radius * 1.01 + 0.05])  # the slack of _cull_rays
                cand = cand[: _steps.sphere_candidates(o, d, np.asarray(center, np.float64), r2, cand)]
                if boxes is not None and cand.size:
                    cand = self._cull_box(boxes[k], d, cand, o)
            else:
                if od is None or oo is None:
                    od, oo = np.einsum("ij,ij->i", o, d), np.einsum("ij,ij->i", o, o)
                cand = self._cull_rays(radius, center, o, d, od, oo)
            if cand is not None and not cand.size:
                continue
            if per_ray:
                self._cast_moving_at(mv, np.asarray(poses), cand, o, d, max_range, hits)
            else:
                self._cast_moving(mv, pose, cand, o, d, max_range, hits)

    @staticmethod
    def _cull_cone(radius: float, center: F64, c0: F64, spread: float, d: F32) -> NDArray[np.intp] | None:
        """Rays that may meet the object's bounding sphere (None: all of them), their origins lying
        within ``spread`` of ``c0``: a ray from there that meets the sphere of radius r runs parallel to a
        ray from ``c0`` that meets the sphere of radius r + spread, so this is a cone test."""
        u = center - c0
        length = float(np.linalg.norm(u))
        reach = radius + spread
        if length <= reach * 1.001 + 1e-3:
            return None  # an origin may lie inside the sphere: every direction can meet it
        cos_max = np.sqrt(max(0.0, 1.0 - (reach / length) ** 2))
        axis = (u / length).astype(np.float32)
        if _steps is not None and d.flags.c_contiguous:  # one pass, and no BLAS threads woken
            out = np.empty(d.shape[0], np.int64)
            m = _steps.cone_candidates(d, axis, np.array([cos_max - 1e-4], np.float32), out)
            return out[:m]
        return np.flatnonzero(d @ axis >= np.float32(cos_max - 1e-4))

    @staticmethod
    def _cull_box(box: tuple[F64, F64], d: F32, cand: NDArray[np.intp], o: F32) -> NDArray[np.intp]:
        """Of the candidates ``cand``, the rays whose forward half from their own origin meets the
        object's swept ``box`` (:meth:`swept_boxes`, a centimetre of slack in it). The object-frame
        test follows, so this only drops rays that cannot meet the object and each ray's hit stays the
        same; it leaves fewer rays to take into the object's frame (a car's box is far thinner than its
        bounding sphere)."""
        assert _steps is not None
        out = np.empty(cand.shape[0], np.int64)
        m = _steps.box_candidates(o, d, np.ascontiguousarray(cand, np.int64), box[0], box[1], out)
        return out[:m]

    @staticmethod
    def _cull_rays(radius: float, center: F64, o: F32, d: F32, od: F32, oo: F32) -> NDArray[np.intp]:
        """Rays that meet the object's bounding sphere, one by one, from precomputed o.d and o.o."""
        cf = center.astype(np.float32)
        tca = d @ cf - od
        d2 = float(center @ center) - 2.0 * (o @ cf) + oo - tca * tca
        r2 = np.float32(radius * radius * 1.01 + 0.05)  # slack for float32 cancellation
        cand = np.flatnonzero(d2 <= r2)
        return cand[tca[cand] + np.sqrt(r2 - d2[cand]) >= 0.0]

    def _cast_moving(
        self,
        mv: _Moving,
        pose: Pose,
        cand: NDArray[np.intp] | None,
        o: F32,
        d: F32,
        max_range: float,
        hits: tuple[F32, F32, NDArray[np.int16], NDArray[np.int32]],
    ) -> None:
        """Cast the candidate rays (None: all) in the object frame; keep the hits nearer than what each
        ray met so far (that distance is the ray's far limit, so Embree stops early): ``hits`` as
        :meth:`cast` takes them."""
        dist, normal, material, obj_index = hits
        rot = pose.rotation_matrix().astype(np.float32)  # object -> world; row vectors v_obj = v_world @ R
        oc, dc = (o, d) if cand is None else (np.take(o, cand, axis=0), np.take(d, cand, axis=0))
        ol = (oc - pose.position.astype(np.float32)) @ rot
        dl = dc @ rot
        if cand is None:  # no cull so far (an origin near the object): keep the rays that meet its box
            cand = _meets_box(ol, dl, *mv.box)
            ol, dl = np.take(ol, cand, axis=0), np.take(dl, cand, axis=0)
        limit = np.minimum(dist[cand], np.float32(max_range))
        hd, hf, hn = mv.caster.intersect(ol, dl, limit, threads=1)
        got = np.flatnonzero((hf >= 0) & (hd < limit))
        rows = cand[got]
        dist[rows] = hd[got]
        normal[rows] = hn[got] @ rot.T
        material[rows] = self._face_material[mv.index][hf[got]]
        obj_index[rows] = mv.index

    def _cast_moving_at(
        self,
        mv: _Moving,
        t: F64,
        cand: NDArray[np.intp] | None,
        o: F32,
        d: F32,
        max_range: float,
        hits: tuple[F32, F32, NDArray[np.int16], NDArray[np.int32]],
    ) -> None:
        """:meth:`_cast_moving` with each candidate ray in the object frame of its own time ``t``:
        element-wise float64 transforms, so a ray's hit does not depend on the other rays."""
        dist, normal, material, obj_index = hits
        if cand is None:
            cand = np.arange(o.shape[0])
        p, q = self._objects[mv.index].trajectory.positions_rotations(t[cand])
        inside, ol, dl = _object_frame_rays(o, d, cand, p, q, mv.box)
        if not inside.size:  # (the rays behind glass near an object often all pass its box by)
            return
        cand, q = cand[inside], np.take(q, inside, axis=0)
        limit = np.minimum(dist[cand], np.float32(max_range))
        hd, hf, hn = mv.caster.intersect(ol, dl, limit, threads=1)
        if _steps is not None and all(a.flags.c_contiguous for a in (normal, hn, q)) and hf.dtype == np.int64:
            _steps.merge_hits(  # the twin of the lines below, in one pass
                np.ascontiguousarray(cand, np.int64),
                q,
                hd,
                hf,
                hn,
                limit,
                self._face_material[mv.index],
                mv.index,
                dist,
                normal,
                material,
                obj_index,
            )
            return
        got = np.flatnonzero((hf >= 0) & (hd < limit))
        rows = cand[got]
        dist[rows] = hd[got]
        normal[rows] = quat_rotate(
            np.take(q, got, axis=0), np.take(hn, got, axis=0).astype(np.float64)
        ).astype(np.float32)
        material[rows] = self._face_material[mv.index][hf[got]]
        obj_index[rows] = mv.index
