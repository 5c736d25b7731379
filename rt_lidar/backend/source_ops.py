"""The operations of the in-process caster and the sweep, one implementation per backend, chosen once.

:class:`~rt_lidar.pipeline.sources.WorldSource` turns its ray hits into the fields of
:class:`~rt_lidar.pipeline.sources.Hits` and :class:`~rt_lidar.pipeline.assembler.ScanAssembler` joins a
scan's parts with these operations: :class:`NumpySourceOps` is the reference; :class:`CompiledSourceOps`
runs the compiled twins (:mod:`rt_lidar.pipeline.source_steps`), bit for bit the NumPy values, and the
NumPy operation where a twin does not take its inputs or the twins are off. :func:`select_source_ops`
makes the choice (docs/determinism.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rt_lidar.kernels.xp import array_module
from rt_lidar.pipeline import beam_steps, source_steps
from rt_lidar.pipeline.source_steps import FirstSurfaces
from rt_lidar.points import concat_points
from rt_lidar.sensor.beam import SubRayPattern, exit_offsets, subray_directions
from rt_lidar.unreal_bridge.world import RayHits
from rt_lidar.unreal_bridge.world.pose import quat_rotate

if TYPE_CHECKING:
    from rt_lidar.pipeline.beam_full import FullBeamPlan
    from rt_lidar.sensor.scan_pattern import Firings

__all__ = [
    "CompiledSourceOps",
    "NumpySourceOps",
    "dot_f32",
    "select_source_ops",
    "sun_cosines",
]

GlassRays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""(travelled, active, directions, origins) of the rays cast on behind glass."""
GlassFields = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""(range, cos_incidence, material, segment, glass transmission) of the frame, written in place."""
CentralRays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""(range, segment, passes glass, glass range, ends on a retro-reflector) of every pulse's central ray."""


def dot_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products of (N, 3) arrays, as float32."""
    return (a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2]).astype(np.float32)


def sun_cosines(normal: np.ndarray, dirs: np.ndarray, valid: np.ndarray, sun: np.ndarray) -> np.ndarray:
    """max(0, n . s) of normals turned to face the ray (the lit side seen by the sensor), 0 where invalid
    (normals need not be normalised; shadowing by other objects is not cast). Arrays of any module."""
    xp = array_module(normal)  # NumPy, or CuPy on the device frame (the same operations)
    n = normal.astype(xp.float64)
    norm = xp.maximum(xp.linalg.norm(n, axis=1), 1e-12)
    facing = -xp.sign(xp.einsum("ij,ij->i", n, dirs.astype(xp.float64)))
    c = facing * (n @ xp.asarray(sun, xp.float64)) / norm
    return xp.where(valid, xp.maximum(c, 0.0), 0.0).astype(xp.float32)


def _with_rows(arr: np.ndarray, rows: np.ndarray, values: Any) -> np.ndarray:
    """``arr`` (a fresh array) with ``values`` written into ``rows``."""
    arr[rows] = values
    return arr


class NumpySourceOps:
    """The caster's and the sweep's operations in NumPy (the reference)."""

    name = "numpy"

    def rotate_f32(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Rotate (N,3) float32 vectors by (N,4) wxyz unit quaternions, component-wise (no np.cross), on
        contiguous components (a quaternion broadcast to every row: its four scalars; the same float32
        products either way)."""
        if q.shape[0] > 1 and q.strides[0] == 0:
            w, x, y, z = q[0]
        else:
            w, x, y, z = (np.ascontiguousarray(q[:, i]) for i in range(4))
        vx, vy, vz = (np.ascontiguousarray(v[:, i]) for i in range(3))
        tx = 2.0 * (y * vz - z * vy)
        ty = 2.0 * (z * vx - x * vz)
        tz = 2.0 * (x * vy - y * vx)
        out = np.empty(v.shape, dtype=np.float32)
        out[:, 0] = vx + w * tx + (y * tz - z * ty)
        out[:, 1] = vy + w * ty + (z * tx - x * tz)
        out[:, 2] = vz + w * tz + (x * ty - y * tx)
        return out

    def subray_starts(
        self,
        directions: np.ndarray,
        pattern: SubRayPattern,
        exit_m_per_rad: tuple[float, float],
        pos: np.ndarray,
        quat: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sensor-frame directions, start positions, orientations) of every sub-ray of ``pattern``
        (pulse by pulse) around the pulses' ``directions`` fired from ``pos`` / ``quat``: each sub-ray
        started across the exit aperture (``exit_m_per_rad``)."""
        n = len(pattern)
        d_sensor = subray_directions(directions, pattern)
        if n > 1:
            pos, quat = np.repeat(pos, n, axis=0), np.repeat(quat, n, axis=0)
            if any(exit_m_per_rad):  # sub-rays start across the exit aperture
                pos = pos + quat_rotate(quat, exit_offsets(directions, pattern, exit_m_per_rad))
        return d_sensor, pos, quat

    def subray_rows(
        self,
        directions: np.ndarray,
        pattern: SubRayPattern,
        exit_m_per_rad: tuple[float, float],
        pos: np.ndarray,
        quat: np.ndarray,
        pulse: np.ndarray,
        sub: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows ``pulse * len(pattern) + sub`` of :meth:`subray_starts` (sub-ray ``sub`` of pulse
        ``pulse``, (R,) int64 each): the probes' start points, one or two of four sides a pulse."""
        rows = pulse * len(pattern) + sub
        d, p, q = self.subray_starts(directions, pattern, exit_m_per_rad, pos, quat)
        return np.take(d, rows, axis=0), np.take(p, rows, axis=0), np.take(q, rows, axis=0)

    def bundle_marks(self, f: Firings, central: CentralRays, plan: FullBeamPlan) -> dict[str, np.ndarray]:
        """Per reason (``edge``, ``glass``, ``retro``), the (P,) bool pulses of firings ``f`` that reason
        marks for the ``--beam full`` bundle from their ``central`` rays
        (:func:`rt_lidar.pipeline.beam_full.neighbour_marks`)."""
        from rt_lidar.pipeline.beam_full import neighbour_marks

        return neighbour_marks(f, *central, plan)

    def bundle_steps(
        self, f: Firings, central: CentralRays, plan: FullBeamPlan
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """:meth:`bundle_marks`, and the (i, j) pairs of neighbouring pulses that marked them
        (:func:`rt_lidar.pipeline.beam_full.neighbour_steps`)."""
        from rt_lidar.pipeline.beam_full import neighbour_steps

        return neighbour_steps(f, *central, plan)

    def first_surfaces(
        self, rh: RayHits, dirs: np.ndarray, transmission: np.ndarray, need_opaque: bool
    ) -> tuple[FirstSurfaces, np.ndarray, np.ndarray | None]:
        """The per-ray fields of the first surfaces ``rh`` of rays ``dirs``, the rows that passed a
        transmissive surface (to be cast on behind it) and, when ``need_opaque``, which rays ended on
        an opaque one (for the sun and the wet road; None otherwise, where the compiled twin runs)."""
        hit = np.isfinite(rh.distance)
        trans_all = np.take(transmission, np.maximum(rh.material, 0))
        passes = hit & (trans_all > 0)
        opaque = hit & ~passes
        cosi = np.abs(dot_f32(rh.normal, dirs))
        # A miss already reads inf / -1 / 0 (RayHits): of the first surfaces, only those of the rays
        # that pass a transmissive one (a few per cent) change, and only they fill the glass fields.
        active = np.flatnonzero(passes)
        n = rh.distance.shape[0]
        fields = (
            _with_rows(rh.distance.astype(np.float32), active, np.inf),
            np.where(opaque, cosi, np.float32(0)).astype(np.float32, copy=False),
            _with_rows(rh.material.astype(np.int16), active, -1),
            _with_rows(rh.segment.astype(np.uint32), active, 0),
            _with_rows(np.full(n, np.inf, np.float32), active, rh.distance[active]),
            _with_rows(np.zeros(n, np.float32), active, cosi[active]),
            _with_rows(np.full(n, -1, np.int16), active, rh.material[active]),
            _with_rows(np.zeros(n, np.uint32), active, rh.segment[active]),
            _with_rows(np.ones(n, np.float32), active, trans_all[active] ** 2),
        )
        return fields, active, opaque

    def glass_step(
        self,
        rh: RayHits,
        rays: GlassRays,
        transmission: np.ndarray,
        max_range_m: float,
        eps_m: np.float32,
        fields: GlassFields,
        normal: np.ndarray | None = None,
        sun_cos: np.ndarray | None = None,
        sun: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One round of the rays behind glass: ``rh`` the hits of ``rays``; the opaque surfaces they end
        on written into ``fields`` (and ``normal`` / ``sun_cos`` when kept); the (origins, travelled,
        active) of the rays that pass glass again returned."""
        travelled, active, d_act, org = rays
        range_m, cos_inc, material, segment, g_trans = fields
        dist = rh.distance + travelled
        hit = np.isfinite(rh.distance) & (dist <= max_range_m)
        trans = np.where(hit, transmission[np.maximum(rh.material, 0)], 0.0)
        more = hit & (trans > 0)
        opaque = hit & ~more
        idx = active[opaque]
        range_m[idx] = dist[opaque]
        cos_inc[idx] = np.abs(dot_f32(rh.normal[opaque], d_act[opaque]))
        material[idx] = rh.material[opaque]
        segment[idx] = rh.segment[opaque]
        if normal is not None:
            normal[idx] = rh.normal[opaque]
        if sun_cos is not None and sun is not None:
            sun_cos[idx] = sun_cosines(rh.normal[opaque], d_act[opaque], np.ones(idx.size, bool), sun)
        g_trans[active[more]] *= trans[more] ** 2
        step = rh.distance[more] + eps_m
        return org[more] + d_act[more] * step[:, None], travelled[more] + step, active[more]

    def glass_mirror_rays(
        self,
        origins: np.ndarray,
        dirs: np.ndarray,
        rows: np.ndarray,
        distance: np.ndarray,
        normal: np.ndarray,
        eps_m: np.float32,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start points, unit directions, distances to the pane) of the mirror rays off the first pane
        of rays ``rows`` (``distance`` and ``normal``: every ray's first hit, a pane for ``rows``): the
        pane's normal made unit, each ray mirrored on it and started ``eps_m`` off the pane on the
        sensor's side."""
        d = np.take(dirs, rows, axis=0)
        nrm = np.take(normal, rows, axis=0).astype(np.float32)
        nrm /= np.sqrt(np.einsum("ij,ij->i", nrm, nrm))[:, None]
        dn = dot_f32(d, nrm)
        back = np.where(dn > 0, np.float32(-1.0), np.float32(1.0))[:, None] * nrm  # the sensor's side
        dist = np.take(distance, rows)
        org, mdir = self.mirror_rays(origins, rows, dist, d, nrm, dn, back, eps_m)
        return org, mdir, dist

    def mirror_rays(
        self,
        origins: np.ndarray,
        rows: np.ndarray,
        dist: np.ndarray,
        d: np.ndarray,
        nrm: np.ndarray,
        dn: np.ndarray,
        off: np.ndarray,
        eps_m: np.float32,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(start points, unit directions) of the mirror rays of rays ``rows`` (directions ``d``) off the
        surfaces of normals ``nrm`` (``dn`` = d . n) they met ``dist`` away, each started ``off`` (a unit
        normal, its side) by ``eps_m`` from the hit."""
        mdir = (d - (np.float32(2.0) * dn)[:, None] * nrm).astype(np.float32)
        mdir /= np.sqrt(np.einsum("ij,ij->i", mdir, mdir))[:, None]
        org = (np.take(origins, rows, axis=0) + d * dist[:, None] + off * eps_m).astype(np.float32)
        return org, mdir

    def mirror_hits(
        self, n: int, rows: np.ndarray, dist: np.ndarray, mh: RayHits, mdir: np.ndarray, max_range_m: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(whole path, incidence cosine, material, segment) of every one of ``n`` rays: those of the
        mirror rays ``mdir`` of rays ``rows`` (started ``dist`` along them) that met ``mh`` within
        ``max_range_m`` in all; every other ray none (inf, 0, -1, 0)."""
        m_range = np.full(n, np.inf, np.float32)
        m_cos = np.zeros(n, np.float32)
        m_mat = np.full(n, -1, np.int16)
        m_seg = np.zeros(n, np.uint32)
        total = dist + mh.distance
        ok = np.isfinite(mh.distance) & (total <= max_range_m)
        k = rows[ok]
        m_range[k] = total[ok]
        m_cos[k] = np.abs(dot_f32(mh.normal[ok], mdir[ok]))
        m_mat[k] = mh.material[ok]
        m_seg[k] = mh.segment[ok]
        return m_range, m_cos, m_mat, m_seg

    def join_scan(self, parts: list[np.ndarray], start_ns: int) -> tuple[np.ndarray, int]:
        """A scan's ``parts`` one after another with their ``t`` less ``start_ns``, and how many points
        have return id 0 (one first return per returning pulse). A single part is a slice of one frame's
        physics output, which nothing else holds: shifted in place."""
        pts = concat_points(parts)
        pts["t"] -= start_ns
        return pts, int(np.count_nonzero(pts["return_id"] == 0))


class CompiledSourceOps(NumpySourceOps):
    """The compiled twins (:mod:`rt_lidar.pipeline.source_steps`), bit for bit the NumPy values; the
    NumPy operation where a twin does not take the inputs or the twins are off."""

    name = "compiled"

    def rotate_f32(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        got = source_steps.rotate_f32(q, v)
        return got if got is not None else super().rotate_f32(q, v)

    def subray_starts(
        self,
        directions: np.ndarray,
        pattern: SubRayPattern,
        exit_m_per_rad: tuple[float, float],
        pos: np.ndarray,
        quat: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        args = (directions, pattern, exit_m_per_rad, pos, quat)
        got = beam_steps.bundle_rays(*args)
        return got if got is not None else super().subray_starts(*args)

    def subray_rows(
        self,
        directions: np.ndarray,
        pattern: SubRayPattern,
        exit_m_per_rad: tuple[float, float],
        pos: np.ndarray,
        quat: np.ndarray,
        pulse: np.ndarray,
        sub: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        got = beam_steps.bundle_rows(directions, pattern, exit_m_per_rad, pos, quat, pulse, sub)
        if got is None:
            return super().subray_rows(directions, pattern, exit_m_per_rad, pos, quat, pulse, sub)
        return got

    def bundle_marks(self, f: Firings, central: CentralRays, plan: FullBeamPlan) -> dict[str, np.ndarray]:
        from rt_lidar.pipeline.beam_full import NEIGHBOUR_MAX_DEG, ring_ranks

        limits = (NEIGHBOUR_MAX_DEG, plan.footprint_rad, plan.spread_m, plan.edge_m)
        got = beam_steps.choose_bundles(ring_ranks(f), f.azimuth_deg, f.elevation_deg, *central, limits)
        if got is None:
            return super().bundle_marks(f, central, plan)
        assert isinstance(got, dict)
        return got

    def bundle_steps(
        self, f: Firings, central: CentralRays, plan: FullBeamPlan
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        from rt_lidar.pipeline.beam_full import NEIGHBOUR_MAX_DEG, ring_ranks

        limits = (NEIGHBOUR_MAX_DEG, plan.footprint_rad, plan.spread_m, plan.edge_m)
        got = beam_steps.choose_bundles(
            ring_ranks(f), f.azimuth_deg, f.elevation_deg, *central, limits, with_pairs=True
        )
        if got is None:
            return super().bundle_steps(f, central, plan)
        assert isinstance(got, tuple)
        return got

    def first_surfaces(
        self, rh: RayHits, dirs: np.ndarray, transmission: np.ndarray, need_opaque: bool
    ) -> tuple[FirstSurfaces, np.ndarray, np.ndarray | None]:
        got = None if need_opaque else source_steps.first_surfaces(rh, dirs, transmission)
        if got is None:
            return super().first_surfaces(rh, dirs, transmission, need_opaque)
        return got[0], got[1], None

    def glass_step(
        self,
        rh: RayHits,
        rays: GlassRays,
        transmission: np.ndarray,
        max_range_m: float,
        eps_m: np.float32,
        fields: GlassFields,
        normal: np.ndarray | None = None,
        sun_cos: np.ndarray | None = None,
        sun: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if sun_cos is None and normal is None:
            got = source_steps.glass_step(rh, rays, transmission, max_range_m, eps_m, fields)
            if got is not None:
                return got
        return super().glass_step(rh, rays, transmission, max_range_m, eps_m, fields, normal, sun_cos, sun)

    def glass_mirror_rays(
        self,
        origins: np.ndarray,
        dirs: np.ndarray,
        rows: np.ndarray,
        distance: np.ndarray,
        normal: np.ndarray,
        eps_m: np.float32,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        got = source_steps.glass_mirror_rays(origins, dirs, rows, distance, normal, eps_m)
        return (
            got
            if got is not None
            else super().glass_mirror_rays(origins, dirs, rows, distance, normal, eps_m)
        )

    def mirror_hits(
        self, n: int, rows: np.ndarray, dist: np.ndarray, mh: RayHits, mdir: np.ndarray, max_range_m: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        got = source_steps.mirror_hits(n, rows, dist, mh, mdir, max_range_m)
        return got if got is not None else super().mirror_hits(n, rows, dist, mh, mdir, max_range_m)

    def join_scan(self, parts: list[np.ndarray], start_ns: int) -> tuple[np.ndarray, int]:
        got = source_steps.join_scan(parts, start_ns)
        return got if got is not None else super().join_scan(parts, start_ns)


def select_source_ops(twins: bool | None = None) -> NumpySourceOps:
    """The caster's and sweep's operations: the compiled twins where they were built (``twins`` None)
    and are on, else NumPy."""
    use = source_steps.available() if twins is None else twins
    return CompiledSourceOps() if use else NumpySourceOps()
