"""Closest-hit ray casting through BVHs (:mod:`kernels.bvh`) on a GPU: one thread per ray, one launch a batch.

One CUDA C source, also compiled for the CPU (:class:`kernels.cuda_host.HostKernel`) where tests hold it
to the Embree caster. A ray meets:

- the static mesh, in world coordinates (one BVH);
- each moving object (an instance: its own BVH in its object frame), at the pose the object has at the
  ray's own time: the instance's world box swept over the batch's times culls the rays that cannot meet
  it (the top level), and the others are moved into the object frame in double precision (as the CPU
  caster moves them) and traverse the instance's BVH with the distance found so far as their far limit.

Traversal: a stack of (node, entry distance), nearer child first; boxes by the slab test with the far
distance widened by ``1 + 2 gamma(3)`` (a hit on a box's face is never lost to rounding); triangles by the
watertight test of Woop, Benthin and Wald (JCGT 2013), so a ray through the shared edge of two triangles
meets one of them, and the distance from the triangle's plane in double precision. Each ray writes its
own outputs only: the CPU build computes what the GPU computes, up to the GPU's fused multiply-adds
(CuPy builds it with ``--fmad=false``, so none).

Outputs, one row per ray, as the CPU caster's ``RayHits``: distance (inf = miss), the hit face's unit
normal (world frame, turned to face the ray), segment id (0 = miss), material (-1 = miss), object index
(-1 = miss). CuPy is imported only when this module launches on a GPU.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.kernels.bvh import MAX_DEPTH
from rt_lidar.kernels.xp import array_module

__all__ = ["CUDA_SOURCE", "KERNEL_NAME", "SceneArrays", "cast_rays"]

KERNEL_NAME = "bvh_cast"

CUDA_SOURCE = r"""
#define STACK %(stack)d
#ifdef __CUDACC__
#define RT_INF __int_as_float(0x7f800000)
#else
#define RT_INF INFINITY
#endif

/* The ray; kx, ky, kz its axes ordered for the watertight test (kz: the largest direction component),
   px, py, pz its origin along them. The axes are chosen with selects, never by indexing an array with a
   run-time index (on a GPU that puts the array in local memory). */
struct Ray { float o[3]; float d[3]; float inv[3]; int kx, ky, kz; float sx, sy, sz, px, py, pz; };

__device__ __forceinline__ float pick(float x, float y, float z, int k) {
    return k == 0 ? x : (k == 1 ? y : z);
}

__device__ __forceinline__ void ray_setup(Ray& r) {
    for (int a = 0; a < 3; ++a) r.inv[a] = 1.0f / r.d[a];
    float ax = fabsf(r.d[0]), ay = fabsf(r.d[1]), az = fabsf(r.d[2]);
    r.kz = (ax >= ay && ax >= az) ? 0 : (ay >= az ? 1 : 2);
    r.kx = r.kz == 2 ? 0 : r.kz + 1;
    r.ky = r.kx == 2 ? 0 : r.kx + 1;
    float dz = pick(r.d[0], r.d[1], r.d[2], r.kz);
    if (dz < 0.0f) { int s = r.kx; r.kx = r.ky; r.ky = s; }
    r.sx = pick(r.d[0], r.d[1], r.d[2], r.kx) / dz;
    r.sy = pick(r.d[0], r.d[1], r.d[2], r.ky) / dz;
    r.sz = 1.0f / dz;
    r.px = pick(r.o[0], r.o[1], r.o[2], r.kx);
    r.py = pick(r.o[0], r.o[1], r.o[2], r.ky);
    r.pz = pick(r.o[0], r.o[1], r.o[2], r.kz);
}

/* Entry distance of the ray into box b (lo xyz, hi xyz) within [0, tmax], or -1 when it misses. */
__device__ __forceinline__ float box_enter(const float* b, const Ray& r, float tmax) {
    float tn = 0.0f, tf = tmax;
    for (int a = 0; a < 3; ++a) {
        float t1 = (b[a] - r.o[a]) * r.inv[a], t2 = (b[a + 3] - r.o[a]) * r.inv[a];
        tn = fmaxf(tn, fminf(t1, t2));  /* fminf / fmaxf pass over the NaN of a ray in a face's plane */
        tf = fminf(tf, fmaxf(t1, t2));
    }
    return tn <= tf * 1.0000003576f ? tn : -1.0f;
}

/* Watertight ray-triangle test; true (and *t) for a hit at 0 < t < tbest. */
__device__ __forceinline__ bool tri_hit(const Ray& r, const float* v, float tbest, float* t) {
    float az = pick(v[0], v[1], v[2], r.kz) - r.pz;
    float bz = pick(v[3], v[4], v[5], r.kz) - r.pz;
    float cz = pick(v[6], v[7], v[8], r.kz) - r.pz;
    float ax = (pick(v[0], v[1], v[2], r.kx) - r.px) - r.sx * az;
    float ay = (pick(v[0], v[1], v[2], r.ky) - r.py) - r.sy * az;
    float bx = (pick(v[3], v[4], v[5], r.kx) - r.px) - r.sx * bz;
    float by = (pick(v[3], v[4], v[5], r.ky) - r.py) - r.sy * bz;
    float cx = (pick(v[6], v[7], v[8], r.kx) - r.px) - r.sx * cz;
    float cy = (pick(v[6], v[7], v[8], r.ky) - r.py) - r.sy * cz;
    float u = cx * by - cy * bx, w1 = ax * cy - ay * cx, w2 = bx * ay - by * ax;
    if (u == 0.0f || w1 == 0.0f || w2 == 0.0f) {  /* on an edge in float: decide in double */
        u = (float)((double)cx * (double)by - (double)cy * (double)bx);
        w1 = (float)((double)ax * (double)cy - (double)ay * (double)cx);
        w2 = (float)((double)bx * (double)ay - (double)by * (double)ax);
    }
    if ((u < 0.0f || w1 < 0.0f || w2 < 0.0f) && (u > 0.0f || w1 > 0.0f || w2 > 0.0f)) return false;
    if (u + w1 + w2 == 0.0f) return false;
    /* the distance from the plane in double: the sheared form cancels badly on a long triangle (a road
       strip hundreds of metres long hit a few metres away) */
    double e1[3], e2[3], q[3];
    for (int a = 0; a < 3; ++a) {
        e1[a] = (double)v[3 + a] - (double)v[a];
        e2[a] = (double)v[6 + a] - (double)v[a];
        q[a] = (double)v[a] - (double)r.o[a];
    }
    double nx = e1[1] * e2[2] - e1[2] * e2[1], ny = e1[2] * e2[0] - e1[0] * e2[2];
    double nz = e1[0] * e2[1] - e1[1] * e2[0];
    double den = nx * (double)r.d[0] + ny * (double)r.d[1] + nz * (double)r.d[2];
    if (den == 0.0) return false;
    float tt = (float)((nx * q[0] + ny * q[1] + nz * q[2]) / den);
    if (!(tt > 0.0f) || !(tt < tbest)) return false;
    *t = tt;
    return true;
}

/* Closest hit within *tbest in one BVH: its leaf-order triangle (-1: none), *tbest lowered to it. */
__device__ int traverse(const Ray& r, const float* box, const int* meta, const float* tris, float* tbest) {
    int stack_node[STACK];
    float stack_t[STACK];
    int sp = 0, hit = -1, node = 0;
    if (box_enter(box, r, *tbest) < 0.0f) return -1;
    for (;;) {
        int a = meta[2 * node], cnt = meta[2 * node + 1];
        if (cnt > 0) {
            for (int k = a; k < a + cnt; ++k) {
                float t;
                if (tri_hit(r, tris + 9 * k, *tbest, &t)) { *tbest = t; hit = k; }
            }
        } else {
            float tl = box_enter(box + 6 * a, r, *tbest), tr = box_enter(box + 6 * (a + 1), r, *tbest);
            if (tl >= 0.0f && tr >= 0.0f) {
                int near = tl <= tr ? a : a + 1;
                stack_node[sp] = tl <= tr ? a + 1 : a;
                stack_t[sp++] = tl <= tr ? tr : tl;
                node = near;
                continue;
            }
            if (tl >= 0.0f) { node = a; continue; }
            if (tr >= 0.0f) { node = a + 1; continue; }
        }
        for (;;) {
            if (sp == 0) return hit;
            --sp;
            if (stack_t[sp] <= *tbest * 1.0000003576f) break;
        }
        node = stack_node[sp];
    }
}

/* v rotated by the unit quaternion (w, x, y, z), in double: v + w t + u x t with t = 2 u x v. */
__device__ __forceinline__ void quat_rotate(double w, double x, double y, double z,
                                            double vx, double vy, double vz, double* out) {
    double tx = 2.0 * (y * vz - z * vy);
    double ty = 2.0 * (z * vx - x * vz);
    double tz = 2.0 * (x * vy - y * vx);
    out[0] = vx + w * tx + (y * tz - z * ty);
    out[1] = vy + w * ty + (z * tx - x * tz);
    out[2] = vz + w * tz + (x * ty - y * tx);
}

extern "C" __global__ void bvh_cast(
    const float* org, const float* dir, int n, float max_range,
    const float* s_box, const int* s_meta, const float* s_tri, const int* s_id, int s_nodes,
    const float* s_normal, const short* s_material, const int* s_owner,
    int n_inst, const float* i_box, const int* i_node, const int* i_ref, const int* i_face,
    const int* i_object,
    const float* b_box, const int* b_meta, const float* b_tri, const int* b_id,
    const float* b_normal, const short* b_material,
    const double* poses, int n_times, const int* time_index,
    const unsigned int* segments, int n_objects,
    float* distance, float* normal, unsigned int* segment, short* material, int* object_index)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i >= n) return;
    Ray r;
    for (int a = 0; a < 3; ++a) { r.o[a] = org[3 * i + a]; r.d[a] = dir[3 * i + a]; }
    ray_setup(r);
    float tb = max_range;
    int face = -1, inst = -1;
    if (s_nodes > 0) {
        int h = traverse(r, s_box, s_meta, s_tri, &tb);
        if (h >= 0) face = s_id[h];
    }
    double qw = 1.0, qx = 0.0, qy = 0.0, qz = 0.0;
    for (int k = 0; k < n_inst; ++k) {
        if (box_enter(i_box + 6 * k, r, tb) < 0.0f) continue;  /* the box swept over the batch's times */
        const double* p = poses + 7 * ((long long)k * n_times + (n_times > 1 ? time_index[i] : 0));
        double ol[3], dl[3];
        quat_rotate(p[3], -p[4], -p[5], -p[6], (double)r.o[0] - p[0], (double)r.o[1] - p[1],
                    (double)r.o[2] - p[2], ol);
        quat_rotate(p[3], -p[4], -p[5], -p[6], (double)r.d[0], (double)r.d[1], (double)r.d[2], dl);
        Ray lr;
        for (int a = 0; a < 3; ++a) { lr.o[a] = (float)ol[a]; lr.d[a] = (float)dl[a]; }
        ray_setup(lr);
        float tl = tb;
        int nb = i_node[k], r0 = i_ref[k];
        int h = traverse(lr, b_box + 6 * nb, b_meta + 2 * nb, b_tri + 9 * (long long)r0, &tl);
        if (h >= 0 && tl < tb) {
            tb = tl;
            face = b_id[r0 + h];
            inst = k;
            qw = p[3]; qx = p[4]; qy = p[5]; qz = p[6];
        }
    }
    float nx = 0.0f, ny = 0.0f, nz = 0.0f;
    int obj = -1;
    short mat = -1;
    if (face >= 0 && inst < 0) {
        nx = s_normal[3 * face]; ny = s_normal[3 * face + 1]; nz = s_normal[3 * face + 2];
        mat = s_material[face];
        obj = s_owner[face];
    } else if (face >= 0) {
        int f = i_face[inst] + face;
        double nw[3];
        quat_rotate(qw, qx, qy, qz, (double)b_normal[3 * f], (double)b_normal[3 * f + 1],
                    (double)b_normal[3 * f + 2], nw);
        nx = (float)nw[0]; ny = (float)nw[1]; nz = (float)nw[2];
        mat = b_material[f];
        obj = i_object[inst];
    }
    float dot = nx * r.d[0];
    dot += ny * r.d[1];
    dot += nz * r.d[2];
    if (dot > 0.0f) { nx = -nx; ny = -ny; nz = -nz; }
    distance[i] = face >= 0 ? tb : RT_INF;
    normal[3 * i] = nx; normal[3 * i + 1] = ny; normal[3 * i + 2] = nz;
    material[i] = mat;
    object_index[i] = obj;
    segment[i] = segments[obj >= 0 ? obj : n_objects];
}
""".replace("%(stack)d", str(MAX_DEPTH))


@dataclass(frozen=True)
class SceneArrays:
    """A scene's BVHs and face tables as :func:`cast_rays` passes them to the kernel (NumPy or CuPy).

    Static mesh: ``s_*`` (its BVH's arrays; per input face: unit normal, material, owning object).
    Instances (moving objects), concatenated: per instance its first node and first reference in the
    ``b_*`` BVH arrays, its first face in ``b_normal`` / ``b_material`` and its object index; per
    instance face (object frame): normal and material."""

    s_box: Any
    s_meta: Any
    s_tri: Any
    s_id: Any
    s_normal: Any
    s_material: Any
    s_owner: Any
    i_node: Any
    i_ref: Any
    i_face: Any
    i_object: Any
    b_box: Any
    b_meta: Any
    b_tri: Any
    b_id: Any
    b_normal: Any
    b_material: Any

    @property
    def static_nodes(self) -> int:
        """Nodes of the static BVH (0: no static mesh)."""
        return int(self.s_box.shape[0])

    @property
    def instances(self) -> int:
        """Moving objects."""
        return int(self.i_node.shape[0])

    def to(self, asarray: Any) -> SceneArrays:
        """These arrays put on a backend by ``asarray`` (``cupy.asarray``: uploaded once)."""
        return SceneArrays(**{k: asarray(v) for k, v in self.__dict__.items()})


@functools.cache
def _cupy_kernel() -> Any:
    import cupy as cp

    return cp.RawKernel(CUDA_SOURCE, KERNEL_NAME, options=("--fmad=false",))


def cast_rays(
    scene: SceneArrays,
    origins: Any,
    directions: Any,
    max_range: float,
    instance_boxes: Any,
    poses: Any,
    time_index: Any,
    segments: Any,
    kernel: Any = None,
) -> tuple[Any, Any, Any, Any, Any]:
    """Closest hits of the rays ``origins`` / ``directions`` (N, 3) float32 (world frame, unit
    directions) within ``max_range``: (distance, normal, segment, material, object index) arrays of the
    rays' module (NumPy or CuPy).

    ``instance_boxes`` (M, 6) float32: each instance's world box over the batch's times; ``poses`` (M, U,
    7) float64: each instance's pose (position, then quaternion w x y z) at each of the batch's U
    distinct times; ``time_index`` (N,) int32: each ray's time among those U (ignored when U is 1);
    ``segments`` (objects + 1,) uint32: each object's segment id, then 0 for a miss. ``kernel``
    launches :data:`CUDA_SOURCE` (default: CuPy's ``RawKernel``; the CPU build with NumPy arrays).
    """
    xp = array_module(origins)
    n = int(origins.shape[0])
    distance = xp.empty(n, xp.float32)
    normal = xp.empty((n, 3), xp.float32)
    segment = xp.empty(n, xp.uint32)
    material = xp.empty(n, xp.int16)
    object_index = xp.empty(n, xp.int32)
    if n == 0:
        return distance, normal, segment, material, object_index
    limit = np.float32(min(float(max_range), 1e37))  # Embree's far limit of a ray with none
    i32 = np.int32
    args = (
        origins,
        directions,
        i32(n),
        limit,
        scene.s_box,
        scene.s_meta,
        scene.s_tri,
        scene.s_id,
        i32(scene.static_nodes),
        scene.s_normal,
        scene.s_material,
        scene.s_owner,
        i32(scene.instances),
        instance_boxes,
        scene.i_node,
        scene.i_ref,
        scene.i_face,
        scene.i_object,
        scene.b_box,
        scene.b_meta,
        scene.b_tri,
        scene.b_id,
        scene.b_normal,
        scene.b_material,
        poses,
        i32(poses.shape[1] if poses.ndim == 3 else 1),
        time_index,
        segments,
        i32(segments.shape[0] - 1),
        distance,
        normal,
        segment,
        material,
        object_index,
    )
    block = 128
    (kernel or _cupy_kernel())(((n + block - 1) // block,), (block,), args)
    return distance, normal, segment, material, object_index
