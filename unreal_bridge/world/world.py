"""The embedded world: a scene with one static BVH, one BVH per moving object, and queries at time t."""

from __future__ import annotations

import copy
import math
import re
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import WorldError
from .moving import (
    MovingObjects,
    _steps,  # the compiled steps of the cast (None where they were not built)
)
from .pose import Pose, quat_multiply, quat_rotate
from .raycast import (
    _N_THREADS,
    RAY_CASTERS,
    EmbreeCaster,
    RayCaster,
    check_rays,
    parallel_map,
    split,
    thread_count,
)
from .scene import Scene

if TYPE_CHECKING:
    from .camera import CameraImages, CameraSpec
    from .trajectory import Trajectory

__all__ = ["RayHits", "World"]

F64 = NDArray[np.float64]
F32 = NDArray[np.float32]


class RayHits(NamedTuple):
    """Nearest hits of a ray batch, world frame.

    distance (N,) float32 (inf = miss); normal (N, 3) float32 unit, facing the ray (dot(n, d) <= 0);
    segment (N,) uint32 (0 = miss); material (N,) int16 (-1 = miss); object_index (N,) int32 (-1 = miss).
    """

    distance: NDArray[np.float32]
    normal: NDArray[np.float32]
    segment: NDArray[np.uint32]
    material: NDArray[np.int16]
    object_index: NDArray[np.int32]


class World:
    """A :class:`Scene` ready for ray casts and camera renders at any time t.

    All static objects share one BVH built once, in world coordinates. Each moving object gets its own
    BVH in its object frame; a cast at time t moves the candidate rays (those that meet the object's
    bounding sphere) into that frame instead of moving the mesh.
    """

    def __init__(self, scene: Scene, caster: str = "embree") -> None:
        if caster not in RAY_CASTERS:
            raise WorldError(f"World: unknown caster {caster!r}; choose one of {sorted(RAY_CASTERS)}")
        self.scene = scene
        self.caster_name = caster
        make = RAY_CASTERS[caster]
        objs = scene.objects
        self._segments = np.array([o.segment_id for o in objs] + [0], dtype=np.uint32)
        verts: list[NDArray[np.float32]] = []
        faces: list[NDArray[np.int32]] = []
        mats: list[NDArray[np.int16]] = []
        owner: list[NDArray[np.int32]] = []
        offset = 0
        self._moving = MovingObjects(scene, make)
        for i, obj in enumerate(objs):
            if obj.triangle_count and obj.is_static:
                pose = obj.trajectory.pose_at(0.0)
                verts.append(pose.transform_points(obj.vertices).astype(np.float32))
                faces.append(obj.faces + offset)
                mats.append(obj.face_material)
                owner.append(np.full(obj.triangle_count, i, dtype=np.int32))
                offset += obj.vertices.shape[0]
        if faces:
            self._static: RayCaster | None = make(np.concatenate(verts), np.concatenate(faces))
            self._static_material = np.concatenate([*mats, np.array([-1], np.int16)])
            self._static_owner = np.concatenate([*owner, np.array([-1], np.int32)])
        else:
            self._static = None
            self._static_material = np.array([-1], np.int16)
            self._static_owner = np.array([-1], np.int32)
        self._index = {o.name: i for i, o in enumerate(objs)}

    # -- scene queries -------------------------------------------------------------------------

    @property
    def material_names(self) -> list[str]:
        """The material table that RayHits.material indexes."""
        return list(self.scene.material_names)

    @property
    def objects(self) -> list[str]:
        """Object names, in scene order (RayHits.object_index indexes this list)."""
        return [o.name for o in self.scene.objects]

    @property
    def triangle_count(self) -> int:
        """Total faces in the scene."""
        return self.scene.triangle_count

    def ego_pose(self, t: float) -> Pose:
        """The ego vehicle's pose at time t."""
        return self.scene.ego.pose_at(float(t))

    def ego_poses(self, t: ArrayLike) -> tuple[F64, F64]:
        """Ego positions (K, 3) and quaternions (K, 4) at times t (K,)."""
        return self.scene.ego.positions_rotations(np.atleast_1d(np.asarray(t, dtype=np.float64)))

    def sensor_poses(self, t: ArrayLike, mount: Pose | None = None) -> tuple[F64, F64]:
        """Sensor positions (K, 3) and quaternions (K, 4) in the world: ego pose * sensor_mount (or
        ``mount``: one of several sensors on the ego)."""
        pos, quat = self.ego_poses(t)
        mount = self.scene.sensor_mount if mount is None else mount
        return pos + quat_rotate(quat, mount.position), quat_multiply(quat, mount.rotation)

    def sensor_pose(self, t: float) -> Pose:
        """The sensor's world pose at one time."""
        return self.ego_pose(t).compose(self.scene.sensor_mount)

    def object_pose(self, name: str, t: float) -> Pose:
        """The world pose of the named object at time t."""
        try:
            obj = self.scene.objects[self._index[name]]
        except KeyError:
            raise WorldError(f"World: no object named {name!r}") from None
        return obj.trajectory.pose_at(float(t))

    def segment_ids(self) -> dict[str, int]:
        """Current segment id of every object."""
        return {o.name: int(self._segments[i]) for i, o in enumerate(self.scene.objects)}

    def with_ego(self, ego: Trajectory) -> World:
        """A view of this world with ``ego`` as the ego trajectory and the segment ids as they are now.

        It shares the meshes, BVHs and moving objects (read-only in casts), so it costs a few small
        copies: a cast into it outside a lock answers as this world would have at the time of the call,
        whatever ``set_segment_id`` or a new ego do to this world meanwhile.
        """
        view = copy.copy(self)
        view.scene = copy.copy(self.scene)
        view.scene.ego = ego
        view._segments = self._segments.copy()
        return view

    def set_segment_id(self, name: str, segment_id: int, is_regex: bool = False) -> bool:
        """Set the segment id (0..255) of the named object, or of every object whose name fully matches
        the regex (case-insensitive, as AirSim's simSetSegmentationObjectID). False when nothing matched."""
        if not 0 <= int(segment_id) <= 255:
            raise WorldError(f"World.set_segment_id: segment_id must be 0..255, got {segment_id}")
        if is_regex:
            try:
                pattern = re.compile(name, re.IGNORECASE)
            except re.error as exc:
                raise WorldError(f"World.set_segment_id: bad regex {name!r}: {exc}") from None
            hits = [i for i, o in enumerate(self.scene.objects) if pattern.fullmatch(o.name)]
        else:
            hits = [self._index[name]] if name in self._index else []
        for i in hits:
            self._segments[i] = segment_id
        return bool(hits)

    # -- ray casting ---------------------------------------------------------------------------

    def cast(
        self,
        origins: ArrayLike,
        directions: ArrayLike,
        t: float | ArrayLike,
        max_range: float = np.inf,
        threads: int | None = None,
    ) -> RayHits:
        """Nearest hits of rays (world frame, unit directions) with every object posed at time t.

        ``t`` is one time for all rays, or (N,) times, one per ray: each ray then meets the moving objects
        posed at its own time (a lidar's firing times), and its hit depends on that time alone, not on
        the rest of the batch. Hits farther than ``max_range`` are misses. Large batches are split over
        two threads (``threads`` = 1: all in the calling thread, at its priority).
        """
        o, d = check_rays(origins, directions, "World.cast")
        n = o.shape[0]
        if self._static is not None:  # every row of every field is written by the static cast
            out = RayHits(
                np.empty(n, np.float32),
                np.empty((n, 3), np.float32),
                np.empty(n, np.uint32),
                np.empty(n, np.int16),
                np.empty(n, np.int32),
            )
        else:
            out = RayHits(
                np.full(n, np.inf, dtype=np.float32),
                np.zeros((n, 3), dtype=np.float32),
                np.zeros(n, dtype=np.uint32),
                np.full(n, -1, dtype=np.int16),
                np.full(n, -1, dtype=np.int32),
            )
        if n == 0:
            return out
        tt = np.asarray(t, dtype=np.float64)
        slices = split(n, min(thread_count(n, threads), _N_THREADS))
        span: tuple[float, float] | None = None
        if tt.ndim == 0:
            moving_at: list[Pose] | F64 = self._moving.poses_at(float(tt))
        else:
            tt = tt.reshape(-1)
            lo, hi = (float(tt.min()), float(tt.max())) if tt.shape == (n,) else (np.nan, np.nan)
            if not (math.isfinite(lo) and math.isfinite(hi)):  # min and max carry a NaN through
                raise WorldError(
                    f"World.cast: t must be one time or {n} finite per-ray times, got shape {tt.shape}"
                )
            moving_at, span = tt, (lo, hi)
        if self._static is not None:
            parallel_map(lambda sl: self._cast_static(o[sl], d[sl], float(max_range), out, sl), slices)
        # The moving objects once over the whole batch (each ray's hit depends on that ray alone, so
        # not per slice: that would double their culls and per-call costs for a few per cent of the rays).
        if self._moving:
            hits = (out.distance, out.normal, out.material, out.object_index)
            self._moving.cast(o, d, moving_at, float(max_range), hits, span)
        self._face_the_rays(out, d)
        return out

    def _cast_static(self, o: F32, d: F32, max_range: float, out: RayHits, sl: slice) -> None:
        """Cast one slice of the batch against the static BVH, every field of its rows written."""
        assert self._static is not None
        dist, normal = out.distance[sl], out.normal[sl]
        material, obj_index = out.material[sl], out.object_index[sl]
        normals_ext = None  # the static faces' normals, when they are still to be gathered
        sf: NDArray[np.integer]
        if isinstance(self._static, EmbreeCaster):  # Embree writes its hit distances into the slice
            sf = self._static.faces_into(o, d, max_range, dist)
            normals_ext = self._static.normals_ext
        else:
            sd, sf, sn = self._static.intersect(o, d, max_range, threads=1)
            dist[:] = sd
            normal[:] = sn
        if normals_ext is not None and _steps is not None and sf.dtype == np.int32:  # one pass
            _steps.gather_faces(
                sf, normals_ext, self._static_material, self._static_owner, normal, material, obj_index
            )
        else:  # face -1 reads each table's trailing row (zero normal, material -1, owner -1)
            if normals_ext is not None:
                np.take(normals_ext, sf, axis=0, out=normal, mode="wrap")
            np.take(self._static_material, sf, out=material, mode="wrap")
            np.take(self._static_owner, sf, out=obj_index, mode="wrap")

    def _face_the_rays(self, out: RayHits, d: F32) -> None:
        """Turn the normals to face their rays and give each hit its object's segment id."""
        normal, obj_index = out.normal, out.object_index
        if _steps is not None and normal.flags.c_contiguous and d.flags.c_contiguous:  # the twin of below
            _steps.face_the_rays(normal, d, obj_index, self._segments, out.segment)
            return
        # normals face the ray: the few that point away are negated (the dot product component-wise,
        # in einsum's order, and only the flipped rows written: several times cheaper than einsum + where)
        dot = normal[:, 0] * d[:, 0]
        dot += normal[:, 1] * d[:, 1]
        dot += normal[:, 2] * d[:, 2]
        flip = np.flatnonzero(dot > 0)
        normal[flip] = -normal[flip]
        out.segment[:] = self._segments[obj_index]  # index -1 reads the trailing 0

    # -- camera ----------------------------------------------------------------------------------

    def render_camera(self, camera: CameraSpec, t: float, threads: int | None = None) -> CameraImages:
        """Ray-cast RGB, depth and segmentation images of ``camera`` (mounted on the ego) at time t."""
        from .camera import render

        return render(self, camera, float(t), threads=threads)
