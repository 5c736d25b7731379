"""The device-resident frame (``--device cuda``, and its CPU twin ``cuda-source-on-cpu``; docs/gpu.md).

:class:`DeviceWorldSource` casts a frame's firings through the BVH kernel and leaves the hits where it
cast them: the rays go up in one copy (origins, world and sensor-frame directions, firing times, rings
and beam origins packed into one block of bytes), the moving objects' poses of the frame once, and the
first surfaces, the rays behind glass and the glass fields are computed there (:class:`DeviceHits`,
arrays of the frame's ``xp``). With ``--beam full`` the pulses that need the bundle are chosen there as
the host chooses them: the neighbour test (:func:`~rt_lidar.pipeline.beam_full.pair_steps`), then one
probe ray at the footprint's rim toward the marking neighbour
(:func:`~rt_lidar.pipeline.beam_probe.probe_marks`, a round beam on one slanted plane keeping one ray),
the same code on the device's arrays; the probes' (pulse, side) and the chosen pulses come down so the
host can build the probes' and the sub-rays' starts, which go up as one block each, and the probes and
bundles are cast there. With ``--sub-rays N`` every pulse is cast there as the bundle.
:class:`~rt_lidar.physics.device_physics.DeviceSensorPhysics` takes the hits from there to packed points
(with their echo pulse widths where asked for) that come back in one copy.

:func:`device_frame_parts` builds the pair for a sensor, or says (one line) why a configuration keeps
the host physics (none does now: sunlight, the wet road and a rig's crosstalk run on the device too).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.backend.device_arrays import PinnedPoints, TransferCounter
from rt_lidar.backend.source_ops import sun_cosines
from rt_lidar.pipeline.device_world import BvhWorld
from rt_lidar.pipeline.pose_samples import interpolate_pose_samples, sensor_pose_samples
from rt_lidar.pipeline.sources import (
    GLASS_MAX_CROSSINGS,
    ROAD_NORMAL_MIN_Z,
    Hits,
    WorldSource,
    _beam_starts,
    _rows_f32,
)
from rt_lidar.sensor.glazing import TABLE_STEPS
from rt_lidar.sensor.scan_pattern import Firings
from rt_lidar.unreal_bridge.world import Pose as MountPose
from rt_lidar.unreal_bridge.world.spray import PlumeRays, plume_rays, plume_segments

__all__ = [
    "UPLOADS_PER_FRAME",
    "DeviceHits",
    "DeviceWorldSource",
    "device_frame_parts",
    "device_frame_unsupported",
    "device_summary",
    "warn_host_physics",
]

_EPS_M = 1e-3
RAY_RECORD = np.dtype(
    [
        ("origin", "<f4", (3,)),
        ("world_dir", "<f4", (3,)),
        ("dir", "<f4", (3,)),
        ("t", "<i8"),
        ("ring", "<u2"),
        ("beam_origin", "<f4", (3,)),
    ]
)
"""One ray of a frame as it goes up to the device (58 bytes, packed)."""
BUNDLE_RECORD = np.dtype([("origin", "<f4", (3,)), ("world_dir", "<f4", (3,)), ("dir", "<f4", (3,))])
"""One sub-ray of a ``--beam full`` bundle as it goes up (36 bytes, packed)."""
UPLOADS_PER_FRAME = 4
"""Host->device copies a frame: its rays (one block of :data:`RAY_RECORD`), and the moving objects'
boxes, poses and each ray's time index (:meth:`BvhWorld.posed_batch`; the segment table stays there)."""


@dataclass
class DeviceHits(Hits):
    """:class:`Hits` whose per-ray arrays live on the device (``xp``): ``direction`` is the sensor-frame
    directions there; ``t_ns`` and ``ring`` the firings' times and rings there (``firings`` stays on the
    host for the frame loop)."""

    xp: Any = np
    t_ns: Any = None
    ring: Any = None
    beam_origin: Any = None
    """(N, 3) float32 each beam's origin in the sensor frame (:attr:`Firings.origin`), None = none."""
    pulse_direction: Any = None
    """(P, 3) float32 each pulse's nominal (central) direction in the sensor frame where the rows are a
    bundle's sub-rays (``subrays`` > 1, ``--sub-rays N``): where its points are placed, as on the host."""


def _columns(xp: Any, buf: Any, start: int, stop: int, dtype: Any, shape: tuple[int, ...]) -> Any:
    """Bytes ``start:stop`` of every row of the (N, record) uint8 ``buf`` as an array of ``dtype``."""
    return xp.ascontiguousarray(buf[:, start:stop]).view(dtype).reshape(shape)


class DeviceWorldSource(WorldSource):
    """A :class:`WorldSource` over a :class:`BvhWorld` whose hits stay on the device (module docstring).
    One ray a pulse; the first surface, glass and the rays behind it as the CPU caster computes them."""

    def __init__(
        self,
        world: BvhWorld,
        max_range_m: float,
        transmission: np.ndarray,
        exit_m_per_rad: tuple[float, float] = (0.0, 0.0),
        mount: MountPose | None = None,
        counter: TransferCounter | None = None,
    ) -> None:
        super().__init__(world, max_range_m, transmission, exit_m_per_rad, mount)
        self.bvh = world
        self.xp = world.xp
        self.counter = counter or TransferCounter()
        self._trans_dev = self.xp.asarray(self._transmission)
        self._angle_dev = self.xp.asarray(self._glass_angle)
        self._retro_dev: Any = None  # --beam full's retro-reflector table, once its plan is known
        self._volume_dev: Any = None  # and its volume materials' flags
        self._road_dev = self.xp.asarray(self._road_mat)  # the wet road's materials

    def use_beam(self, pattern: Any, sun: Any = None) -> Any:
        """:meth:`WorldSource.use_beam`; with the sun and one ray a pulse the central rays stay one ray
        each (no bundle), their sun cosines computed where they are cast."""
        grant = super().use_beam(pattern, sun)
        if len(pattern) == 1:
            self._beam = None
        return grant

    def use_full_beam(self, plan: Any, sun: Any = None) -> Any:
        """:meth:`WorldSource.use_full_beam`, its retro-reflector and volume tables put on the device."""
        grant = super().use_full_beam(plan, sun)
        self._retro_dev = self.xp.asarray(plan.retro)
        self._volume_dev = self.xp.asarray(plan.volume)
        return grant

    def hits(self, firings: Firings, t0_ns: int, t1_ns: int) -> Hits:
        """The hits of every firing's one ray, on the device (:class:`DeviceHits`)."""
        xp = self.xp
        n = len(firings)
        d_sensor = firings.directions()
        samples = sensor_pose_samples(self.world, firings.t_ns, self.mount)
        pos, quat = _beam_starts(self.ops, firings, *interpolate_pose_samples(firings.t_ns, samples))
        rec = np.empty(n, RAY_RECORD)
        rec["origin"] = pos
        rec["world_dir"] = self.ops.rotate_f32(_rows_f32(quat), d_sensor)
        rec["dir"] = d_sensor
        rec["t"] = firings.t_ns
        rec["ring"] = firings.ring
        rec["beam_origin"] = 0.0 if firings.origin is None else firings.origin
        buf = xp.asarray(rec.view(np.uint8).reshape(n, RAY_RECORD.itemsize))  # the frame's one copy up
        self.counter.up(UPLOADS_PER_FRAME)
        origins = _columns(xp, buf, 0, 12, xp.float32, (n, 3))
        dirs = _columns(xp, buf, 12, 24, xp.float32, (n, 3))
        posed = self.bvh.posed_batch(firings.t_ns.astype(np.float64) * 1e-9, n)
        if self._full is None and self._beam is not None:  # --sub-rays N: every pulse as the bundle
            return self._every_pulse_bundled(firings, buf, pos, quat, posed, t0_ns, t1_ns, samples)
        plumes = self._plumes_up(pos, rec["world_dir"], firings.t_ns)
        r, cos, mat, seg, g_r, g_cos, g_mat, g_seg, g_trans, ghost, extra = self._surfaces(
            origins, dirs, posed, plumes=plumes
        )
        hits = DeviceHits(
            firings=firings,
            direction=_columns(xp, buf, 24, 36, xp.float32, (n, 3)),
            range_m=r,
            cos_incidence=cos,
            material=mat,
            segment=seg,
            glass_range_m=g_r,
            glass_cos=g_cos,
            glass_material=g_mat,
            glass_segment=g_seg,
            glass_transmission=g_trans,
            xp=xp,
            t_ns=_columns(xp, buf, 36, 44, xp.int64, (n,)),
            ring=_columns(xp, buf, 44, 46, xp.uint16, (n,)),
            beam_origin=None if firings.origin is None else _columns(xp, buf, 46, 58, xp.float32, (n, 3)),
        )
        _set_glass_mirror(hits, ghost)
        _set_extras(hits, extra)
        self._with_poses(hits, t0_ns, t1_ns, samples)  # (sets the poses on ``hits`` itself)
        if self._full is not None:  # --beam full: the bundle where the footprint needs it
            self._bundle(hits, firings, pos, quat, posed)
        return hits

    def _every_pulse_bundled(
        self, f: Firings, buf: Any, pos: Any, quat: Any, posed: Any, t0_ns: int, t1_ns: int, samples: Any
    ) -> DeviceHits:
        """``--sub-rays N`` on the device (:meth:`WorldSource.beam_hits`): every pulse of ``f`` cast as the
        bundle of :meth:`use_beam` (the sub-rays' starts built on the host and sent up as one block, beside
        the pulses' record ``buf``), one row a sub-ray, pulse-major."""
        xp = self.xp
        n = len(f)
        pattern = self._beam
        assert pattern is not None
        k = len(pattern)
        d_sub, starts, q = self.ops.subray_starts(f.directions(), pattern, self.exit_m_per_rad, pos, quat)
        hits = self._rays_hits(
            f,
            xp.repeat(xp.arange(n, dtype=xp.int64), k),
            d_sub,
            starts,
            q,
            posed,
            _columns(xp, buf, 36, 44, xp.int64, (n,)),
            _columns(xp, buf, 44, 46, xp.uint16, (n,)),
            None if f.origin is None else _columns(xp, buf, 46, 58, xp.float32, (n, 3)),
            None,
        )
        hits.subrays = k
        hits.subray_weight = pattern.weights
        hits.pulse_direction = _columns(xp, buf, 24, 36, xp.float32, (n, 3))
        self._with_poses(hits, t0_ns, t1_ns, samples)
        return hits

    def _bundle(self, hits: DeviceHits, f: Firings, pos: Any, quat: Any, posed: Any) -> None:
        """``--beam full`` on the device (:func:`rt_lidar.pipeline.beam_full.full_beam_hits`): the pulses
        whose central rays mark an edge, glass or a retro-reflector with a neighbour's
        (:func:`~rt_lidar.pipeline.beam_full.pair_steps`, on the device; the neighbour pairs and the side
        each probes on from the firings, on the host), whose probe ray at the footprint's rim toward that
        neighbour sees the step (:func:`~rt_lidar.pipeline.beam_probe.probe_marks`, on the device; the
        probes' (pulse, side) come down, their starts go up), and those whose central ray ends in a
        volume (:func:`~rt_lidar.pipeline.beam_full.volume_marks`, on the device) or beside one
        (:func:`~rt_lidar.pipeline.beam_cabin.beside_volume`), and those behind glass whose cabin probe
        sees a step (:meth:`_cabin_probe`), cast again as the sub-ray bundle (their starts built on the
        host from the chosen pulses, which come down, and sent up as one block) into ``hits.bundle``; the
        frame's counts into ``hits.bundle_counts``."""
        from rt_lidar.pipeline.beam_cabin import behind_glass_marks, beside_volume
        from rt_lidar.pipeline.beam_full import (
            REASONS,
            BundleCounts,
            _neighbour_pairs,
            pair_separation,
            pair_steps,
            volume_marks,
        )
        from rt_lidar.pipeline.beam_openings import opening_keys, ring_gaps
        from rt_lidar.pipeline.beam_probe import probe_keys, probe_sides, seam_keys
        from rt_lidar.pipeline.sources import BeamBundle

        plan = self._full
        assert plan is not None
        xp = self.xp
        n = len(f)
        i, j = _neighbour_pairs(f)
        sep_h = pair_separation(f, i, j)
        ijs = xp.asarray(np.stack([i, j, probe_sides(f, i, j)]))  # up: the pairs, each one's probe side
        sep = xp.asarray(sep_h)  # up: their separations
        seam_h = seam_keys(f)
        seam = xp.asarray(seam_h)  # up: the probes toward a ring neighbour beyond the frame's seam
        gaps = xp.asarray(np.stack(ring_gaps(f)))  # up: each pulse's ring gaps (beam_openings)
        self.counter.up(4)
        rng, seg = hits.range_m, hits.segment
        glass = hits.glass_material >= 0
        glass_rng = xp.where(glass, hits.glass_range_m, np.float32(np.inf))
        hit = xp.isfinite(rng)
        retro = hit & (hits.material >= 0) & self._retro_dev[xp.maximum(hits.material, 0).astype(xp.int32)]
        chosen = xp.zeros(n, bool)
        counts = dict.fromkeys(REASONS, 0)
        unasked = xp.concatenate([seam, opening_keys(xp, rng, gaps[0], gaps[1])])
        if i.size or unasked.size:
            ii, jj, side = ijs[0], ijs[1], ijs[2]
            steps = pair_steps(xp, plan, sep, ii, jj, rng, seg, hit, glass, glass_rng, retro)
            marked = steps["edge"] | steps["glass"] | steps["retro"]
            keys = probe_keys(xp, n, ii[marked], jj[marked], side[marked], unasked)
            chosen = self._probe(hits, f, pos, quat, posed, keys, counts)
        volume = volume_marks(xp, self._volume_dev, rng, hits.material)  # in a crown: the bundle
        counts["volume"] = int(xp.count_nonzero(volume))
        chosen = chosen | volume
        if i.size and counts["volume"]:  # beside a pulse in a crown: perhaps through a gap between leaves
            beside = beside_volume(xp, volume, ijs[0], ijs[1])
            counts["beside_volume"] = int(xp.count_nonzero(beside))
            chosen |= beside
        # behind glass (a car's cabin, a window's reveal): where a cabin probe sees a step behind the pane
        cabin = behind_glass_marks(xp, rng, hits.glass_range_m, hits.glass_material) & ~chosen
        cabin = self._cabin_probe(hits, f, pos, quat, posed, cabin)
        counts["behind_glass"] = int(xp.count_nonzero(cabin))
        idx_dev = xp.flatnonzero(chosen | cabin)
        idx = np.asarray(idx_dev.get() if xp is not np else idx_dev, np.int64)  # down: the chosen pulses
        self.counter.down(idx.nbytes)
        hits.bundle_counts = BundleCounts(n, int(idx.size), counts)
        if not idx.size:
            return
        pattern = plan.pattern
        k = len(pattern)
        d_sensor, starts, q = self.ops.subray_starts(
            f.directions()[idx], pattern, self.exit_m_per_rad, pos[idx], quat[idx]
        )
        sub = self._rays_hits(
            _take_firings(f, idx),
            xp.repeat(idx_dev, k),
            d_sensor,
            starts,
            q,
            posed,
            hits.t_ns[idx_dev],
            hits.ring[idx_dev],
            None if hits.beam_origin is None else hits.beam_origin[idx_dev],
            hits.pose_start,
        )
        sub.subrays = k
        sub.subray_weight = pattern.weights
        hits.bundle = BeamBundle(idx_dev, sub)

    def _rays_hits(
        self,
        firings: Firings,
        rows: Any,
        d_sensor: np.ndarray,
        starts: np.ndarray,
        q: np.ndarray,
        posed: Any,
        t_ns: Any,
        ring: Any,
        beam_origin: Any,
        pose_start: Any,
        extras: bool = True,
    ) -> DeviceHits:
        """The rays (sensor-frame directions ``d_sensor``, world starts ``starts``, orientations ``q``) of
        the frame's pulses ``rows`` (on the device: whose poses they take) sent up as one block and cast
        there with glass, as :class:`DeviceHits` of ``firings`` (their times ``t_ns``, rings ``ring`` and
        beam origins ``beam_origin`` already on the device), one row a ray; ``extras``: with the sun
        cosines and the wet road's fields where asked for (as the host's bundles have them; False for
        ``--beam full``'s probes, which read neither)."""
        xp = self.xp
        rec = np.empty(len(starts), BUNDLE_RECORD)
        rec["origin"] = starts
        rec["world_dir"] = self.ops.rotate_f32(_rows_f32(q), d_sensor)
        rec["dir"] = d_sensor
        buf = xp.asarray(rec.view(np.uint8).reshape(-1, BUNDLE_RECORD.itemsize))  # up: the rays
        self.counter.up()
        m = len(starts)
        origins = _columns(xp, buf, 0, 12, xp.float32, (m, 3))
        dirs = _columns(xp, buf, 12, 24, xp.float32, (m, 3))
        plumes = self._plumes_up(starts, rec["world_dir"], firings.t_ns) if extras else None
        r, cos, mat_b, seg_b, g_r, g_cos, g_mat, g_seg, g_trans, ghost, extra = self._surfaces(
            origins, dirs, posed, rows, extras, plumes
        )
        sub = DeviceHits(
            firings=firings,
            direction=_columns(xp, buf, 24, 36, xp.float32, (m, 3)),
            range_m=r,
            cos_incidence=cos,
            material=mat_b,
            segment=seg_b,
            glass_range_m=g_r,
            glass_cos=g_cos,
            glass_material=g_mat,
            glass_segment=g_seg,
            glass_transmission=g_trans,
            pose_start=pose_start,
            xp=xp,
            t_ns=t_ns,
            ring=ring,
            beam_origin=beam_origin,
        )
        _set_glass_mirror(sub, ghost)
        _set_extras(sub, extra)
        return sub

    def _probe(
        self,
        hits: DeviceHits,
        f: Firings,
        pos: Any,
        quat: Any,
        posed: Any,
        keys: Any,
        counts: dict[str, int],
    ) -> Any:
        """(P,) bool on the device: the pulses whose probe (``keys``: ``side * P + pulse`` on the device,
        :func:`~rt_lidar.pipeline.beam_probe.probe_keys`) sees the step its pair saw
        (:func:`~rt_lidar.pipeline.beam_probe.probe_marks`, the host's code on the device's arrays);
        ``counts`` takes how many pulses each reason kept. The keys come down once (the probes' starts
        are built on the host, as the bundle's are) and the probes go up as one block."""
        from rt_lidar.pipeline.beam_probe import (
            PROBE_SIDES,
            plane_tolerance_m,
            probe_marks,
            probe_pattern,
        )

        plan = self._full
        assert plan is not None
        xp = self.xp
        n = len(f)
        chosen = xp.zeros(n, bool)
        key = np.asarray(keys.get() if xp is not np else keys, np.int64)  # down: the probes
        self.counter.down(key.nbytes)
        if not key.size:
            return chosen
        pulse, side = key % n, key // n
        probes = probe_pattern(plan.pattern)
        in_use = np.zeros(n, bool)
        in_use[pulse] = True
        pulses = np.flatnonzero(in_use)
        d, starts, q = self.ops.subray_starts(
            f.directions()[pulses], probes, self.exit_m_per_rad, pos[pulses], quat[pulses]
        )
        rows = np.searchsorted(pulses, pulse) * PROBE_SIDES + side
        pulse_dev = keys % n
        probe = self._probe_hits(hits, f, pulse, pulse_dev, (d[rows], starts[rows], q[rows]), posed)
        tol = plane_tolerance_m(self.exit_m_per_rad, probes)
        marks = probe_marks(hits, pulse_dev, probe, self._retro_dev, plan, tol, xp=xp)
        for name, m in marks.items():
            by = xp.zeros(n, bool)
            by[pulse_dev[m]] = True
            counts[name] = int(xp.count_nonzero(by))
            chosen |= by
        return chosen

    def _probe_hits(
        self,
        hits: DeviceHits,
        f: Firings,
        pulses: np.ndarray,
        pulse_dev: Any,
        rays: tuple[Any, Any, Any],
        posed: Any,
    ) -> Any:
        """The hits of probe rays ``rays`` (directions, starts, orientations; a row a probe) fired with the
        pulses ``pulses`` (host indices; ``pulse_dev`` the same on the device), at their pulses' times."""
        d, starts, q = rays
        return self._rays_hits(
            _take_firings(f, pulses),
            pulse_dev,
            d,
            starts,
            q,
            posed,
            hits.t_ns[pulse_dev],
            hits.ring[pulse_dev],
            None,
            hits.pose_start,
            extras=False,
        )

    def _cabin_probe(self, hits: DeviceHits, f: Firings, pos: Any, quat: Any, posed: Any, cabin: Any) -> Any:
        """(P,) bool on the device: of the pulses ``cabin`` (behind glass, no other reason), those whose
        cabin probe (:func:`~rt_lidar.pipeline.beam_cabin.cabin_pattern`) sees a step behind the pane
        (:func:`~rt_lidar.pipeline.beam_cabin.cabin_probe_marks`, the host's code on the device's
        arrays). The pulses come down once, the probes' starts are built on the host and go up as one
        block, as :meth:`_probe`'s do."""
        from rt_lidar.pipeline.beam_cabin import CABIN_SIDES, cabin_pattern, cabin_probe_marks

        plan = self._full
        assert plan is not None
        xp = self.xp
        chosen = xp.zeros(len(f), bool)
        dev = xp.flatnonzero(cabin)
        pulses = np.asarray(dev.get() if xp is not np else dev, np.int64)  # down: the pulses to probe
        self.counter.down(pulses.nbytes)
        if not pulses.size:
            return chosen
        d, starts, q = self.ops.subray_starts(
            f.directions()[pulses],
            cabin_pattern(plan.pattern),
            self.exit_m_per_rad,
            pos[pulses],
            quat[pulses],
        )
        pulse_dev = xp.repeat(dev, CABIN_SIDES)  # the rows of subray_starts: pulse by pulse, each side
        probe = self._probe_hits(hits, f, np.repeat(pulses, CABIN_SIDES), pulse_dev, (d, starts, q), posed)
        chosen[pulse_dev[cabin_probe_marks(hits, pulse_dev, probe, xp=xp)]] = True
        return chosen

    def _slant(self, g_trans: Any, rows: Any, material: Any, cos_i: Any) -> None:
        """:meth:`WorldSource._slant_loss` on the device."""
        xp = self.xp
        if rows.size:
            c = xp.clip(cos_i, np.float32(0), np.float32(1))
            idx = (c * np.float32(TABLE_STEPS) + np.float32(0.5)).astype(xp.int32)
            f = self._angle_dev[xp.maximum(material, 0).astype(xp.int32), idx]
            g_trans[rows] *= f * f

    def _surfaces(
        self,
        origins: Any,
        dirs: Any,
        posed: tuple[Any, Any, Any, Any],
        rows: Any = None,
        extras: bool = True,
        plumes: PlumeRays | None = None,
    ) -> tuple[Any, ...]:
        """(range, cos, material, segment, glass range, glass cos, glass material, glass segment, glass
        transmission, mirror rays off the first pane or None, the extra fields) of every ray (``rows``:
        the frame's pulses they are, None = one ray each): the first surfaces, the mirror rays of the
        rays whose first surface is glass (:meth:`_glass_mirror_device`), and the rays that pass glass
        cast on behind it. With ``extras``, the extra fields (a dict of :class:`Hits` fields) hold the
        sun cosines (:func:`sun_cosines`, of the opaque surface each ray ends on, and of the ray itself)
        where the sun is asked for, and on a wet road (:meth:`use_wet_road`) the road hits, their mirror
        rays off the film cast here (as the panes' are) and each ray's segment through the nearest tyre
        spray plume (:func:`plume_segments` of ``plumes``, the rays near a plume sent up by the host)."""
        xp = self.xp
        sun = self._sun if extras else None
        extra: dict[str, Any] = {}
        rh = self.bvh.cast_posed(origins, dirs, self.max_range_m, posed, rows, self.cast_threads)
        hit = xp.isfinite(rh.distance)
        trans_all = xp.take(self._trans_dev, xp.maximum(rh.material, 0).astype(xp.int32))
        passes = hit & (trans_all > 0)
        opaque = hit & ~passes
        cosi = xp.abs(xp.sum(rh.normal * dirs, axis=1, dtype=xp.float32))
        inf, zero = np.float32(np.inf), np.float32(0)
        range_m = xp.where(passes, inf, rh.distance).astype(xp.float32)
        cos_inc = xp.where(opaque, cosi, zero).astype(xp.float32)
        material = xp.where(passes, np.int16(-1), rh.material).astype(xp.int16)
        segment = xp.where(passes, np.uint32(0), rh.segment).astype(xp.uint32)
        g_range = xp.where(passes, rh.distance, inf).astype(xp.float32)
        g_cos = xp.where(passes, cosi, zero).astype(xp.float32)
        g_mat = xp.where(passes, rh.material, np.int16(-1)).astype(xp.int16)
        g_seg = xp.where(passes, rh.segment, np.uint32(0)).astype(xp.uint32)
        g_trans = xp.where(passes, trans_all * trans_all, np.float32(1)).astype(xp.float32)
        sun_cos = None if sun is None else sun_cosines(rh.normal, dirs, opaque, sun)
        if self.wet_road and extras:  # road hits facing up are wet; each casts its mirror ray off the film
            wet = opaque & xp.isin(rh.material, self._road_dev) & (rh.normal[:, 2] >= ROAD_NORMAL_MIN_Z)
            extra["wet"] = wet
            wi = xp.flatnonzero(wet)
            film = self._glass_mirror_device(origins, dirs, rh, wi, posed, rows) if wi.size else None
            extra["mirror"] = film if film is not None else _no_mirror(xp, int(origins.shape[0]))
        active = xp.flatnonzero(passes)
        self._slant(g_trans, active, g_mat[active], g_cos[active])
        ghost = self._glass_mirror_device(origins, dirs, rh, active, posed, rows) if active.size else None
        travelled = rh.distance[active] + np.float32(_EPS_M)
        org = origins[active] + dirs[active] * travelled[:, None]
        for _ in range(GLASS_MAX_CROSSINGS):
            if active.size == 0:
                break
            d_act = dirs[active]
            at = active if rows is None else rows[active]  # the pulses whose poses these rays take
            rh = self.bvh.cast_posed(org, d_act, self.max_range_m, posed, at, self.cast_threads)
            dist = rh.distance + travelled
            ok = xp.isfinite(rh.distance) & (dist <= self.max_range_m)
            trans = xp.where(ok, xp.take(self._trans_dev, xp.maximum(rh.material, 0).astype(xp.int32)), zero)
            more = ok & (trans > 0)
            stop = ok & ~more
            idx = active[stop]
            range_m[idx] = dist[stop]
            cos_inc[idx] = xp.abs(xp.sum(rh.normal[stop] * d_act[stop], axis=1, dtype=xp.float32))
            material[idx] = rh.material[stop]
            segment[idx] = rh.segment[stop]
            if sun_cos is not None and sun is not None:  # the sunlit side of the surface behind the glass
                sun_cos[idx] = sun_cosines(rh.normal[stop], d_act[stop], xp.ones(idx.shape[0], bool), sun)
            g_trans[active[more]] *= trans[more] * trans[more]
            step = rh.distance[more] + np.float32(_EPS_M)
            cos_i = xp.abs(xp.sum(rh.normal[more] * d_act[more], axis=1, dtype=xp.float32))
            org, travelled, active = (
                org[more] + d_act[more] * step[:, None],
                travelled[more] + step,
                active[more],
            )
            self._slant(g_trans, active, rh.material[more], cos_i)
        if sun_cos is not None:
            extra["sun_cos"] = sun_cos
            extra["beam_sun_cos"] = (dirs.astype(xp.float64) @ xp.asarray(sun, xp.float64)).astype(xp.float32)
        if "wet" in extra:  # the tyre spray up to the surface each ray ends on
            none = PlumeRays(*(xp.zeros((0, 3) if k in (1, 2) else 0) for k in range(5)))
            extra["spray"] = plume_segments(plumes if plumes is not None else none, range_m)
        return range_m, cos_inc, material, segment, g_range, g_cos, g_mat, g_seg, g_trans, ghost, extra

    def _plumes_up(self, starts: np.ndarray, world_dirs: np.ndarray, t_ns: np.ndarray) -> PlumeRays | None:
        """On a wet road, the rays (world ``starts`` and ``world_dirs`` on the host, their pulses' times
        ``t_ns``) that may cross a car's spray plume, in the car's frame at each ray's time
        (:func:`plume_rays`, on the host where the trajectories are), sent up as one block; None on a
        dry road. The device clips them at the surfaces the rays hit (:func:`plume_segments`)."""
        if not self.wet_road:
            return None
        t_ray = t_ns.astype(np.float64) * 1e-9
        if t_ray.shape[0] != starts.shape[0]:  # a bundle: its pulses' sub-rays, pulse-major
            t_ray = np.repeat(t_ray, starts.shape[0] // max(t_ray.shape[0], 1))
        host = plume_rays(self._moving_objects(), np.asarray(starts, np.float32), world_dirs, t_ray)
        block = np.column_stack(
            [host.ray.astype(np.float64), host.origin, host.direction, host.length, host.density]
        )
        dev = self.xp.asarray(block)  # up: the rays near a plume
        self.counter.up()
        return PlumeRays(dev[:, 0].astype(self.xp.int64), dev[:, 1:4], dev[:, 4:7], dev[:, 7], dev[:, 8])

    def _glass_mirror_device(
        self, origins: Any, dirs: Any, rh: Any, active: Any, posed: tuple[Any, Any, Any, Any], rows: Any
    ) -> tuple[Any, Any, Any, Any]:
        """:meth:`WorldSource._glass_mirror` on the device: (whole path, incidence cosine, material,
        segment) of the mirror rays off the first pane of rays ``active`` (their first hits ``rh`` are
        glass), cast by the BVH kernel against the frame's poses; every other ray none. The wet road's
        mirror rays off the film are the same rays off the road's hits (:meth:`WorldSource._wet_fields`:
        the normal faces the ray, so they start on its side)."""
        xp = self.xp
        f32 = xp.float32
        n = int(origins.shape[0])
        m_range, m_cos, m_mat, m_seg = _no_mirror(xp, n)
        d = dirs[active]
        nrm = rh.normal[active].astype(f32)
        nrm /= xp.sqrt(xp.sum(nrm * nrm, axis=1, dtype=f32))[:, None]
        dn = xp.sum(d * nrm, axis=1, dtype=f32)
        mdir = (d - (np.float32(2.0) * dn)[:, None] * nrm).astype(f32)
        mdir /= xp.sqrt(xp.sum(mdir * mdir, axis=1, dtype=f32))[:, None]
        dist = rh.distance[active]
        side = np.float32(1.0) - np.float32(2.0) * (dn > 0).astype(f32)  # -1 where d leaves by the back
        back = side[:, None] * nrm  # the sensor's side of the pane
        org = (origins[active] + d * dist[:, None] + back * np.float32(_EPS_M)).astype(f32)
        at = active if rows is None else rows[active]  # the pulses whose poses the mirror rays take
        mh = self.bvh.cast_posed(org, mdir, self.max_range_m, posed, at, self.cast_threads)
        total = dist + mh.distance
        ok = xp.isfinite(mh.distance) & (total <= self.max_range_m)
        k = active[ok]
        m_range[k] = total[ok]
        m_cos[k] = xp.abs(xp.sum(mh.normal[ok] * mdir[ok], axis=1, dtype=f32))
        m_mat[k] = mh.material[ok]
        m_seg[k] = mh.segment[ok]
        return m_range, m_cos, m_mat, m_seg


def _set_glass_mirror(hits: DeviceHits, ghost: tuple[Any, Any, Any, Any] | None) -> None:
    """The mirror rays off each ray's first pane onto ``hits`` (left None where no ray met glass)."""
    if ghost is not None:
        (
            hits.glass_mirror_range_m,
            hits.glass_mirror_cos,
            hits.glass_mirror_material,
            hits.glass_mirror_segment,
        ) = ghost


def _no_mirror(xp: Any, n: int) -> tuple[Any, Any, Any, Any]:
    """(whole path, incidence cosine, material, segment) of ``n`` rays without a mirror ray."""
    f32 = xp.float32
    return xp.full(n, np.inf, f32), xp.zeros(n, f32), xp.full(n, -1, xp.int16), xp.zeros(n, xp.uint32)


def _set_extras(hits: DeviceHits, extra: dict[str, Any]) -> None:
    """The rays' sun cosines and wet road fields (:meth:`DeviceWorldSource._surfaces`) onto ``hits``
    (left None where not asked for)."""
    if "sun_cos" in extra:
        hits.sun_cos, hits.beam_sun_cos = extra["sun_cos"], extra["beam_sun_cos"]
    if "wet" in extra:
        hits.wet = extra["wet"]
        hits.mirror_range_m, hits.mirror_cos, hits.mirror_material, hits.mirror_segment = extra["mirror"]
        hits.spray_in_m, hits.spray_out_m, hits.spray_density = extra["spray"]


def _take_firings(f: Firings, idx: np.ndarray) -> Firings:
    """The firings ``idx`` of ``f`` (:func:`rt_lidar.pipeline.beam_full.take_firings`)."""
    from rt_lidar.pipeline.beam_full import take_firings

    return take_firings(f, idx)


def device_frame_unsupported(physics: Any, crosstalk: bool = False) -> str | None:
    """Why the physics configuration ``physics`` (as negotiated: a :class:`SensorPhysics`) keeps the
    host physics, or None when the whole frame runs on the device: every configuration does now
    (sunlight, a wet road and a rig's crosstalk moved there too; docs/gpu.md). Kept as the one place
    that names a configuration the device frame cannot run, should one come."""
    del physics, crosstalk
    return None


def device_frame_parts(
    world: BvhWorld,
    preset: Any,
    arrays: Any,
    config: Any,
    mount: MountPose | None = None,
    crosstalk: bool = False,
) -> tuple[WorldSource, Any, str | None]:
    """(source, physics, why not) of ``preset`` in ``world`` cast by the BVH kernel: the device-resident
    pair where ``config`` runs there, else a host :class:`WorldSource` and :class:`SensorPhysics` (the
    cast on the device, the physics on the host) and the one-line reason."""
    from rt_lidar.physics.device_physics import DeviceSensorPhysics
    from rt_lidar.physics.model import SensorPhysics
    from rt_lidar.pipeline.builder import negotiate
    from rt_lidar.sensor.beam import exit_m_per_rad

    host = WorldSource(world, preset.range.max_m, arrays.transmission, exit_m_per_rad(preset), mount=mount)
    host.retro_gain, host.volume = arrays.retro_gain, arrays.volume
    phys = SensorPhysics(preset, arrays, negotiate(host, preset, config))
    why = device_frame_unsupported(phys, crosstalk)
    if why is not None:
        return host, phys, why
    counter = TransferCounter()
    source = DeviceWorldSource(
        world, preset.range.max_m, arrays.transmission, exit_m_per_rad(preset), mount, counter
    )
    source.retro_gain, source.volume = arrays.retro_gain, arrays.volume
    source.use_wet_road(1.0 if host.wet_road else 0.0)  # as negotiated above
    sun = host._sun  # the sun negotiated above (a unit vector towards it), None = no sunlight
    if host.full_beam is not None:  # --beam full: the plan negotiated above, its bundles on the device
        source.use_full_beam(host.full_beam, sun)
    elif phys.sub_rays > 1 or sun is not None:  # --sub-rays N: every pulse as the bundle, on the device
        source.use_beam(phys.pattern, sun)
    dev = DeviceSensorPhysics(preset, arrays, phys.config, PinnedPoints(world.xp, counter))
    return source, dev, None


def warn_host_physics(why: str) -> None:
    """The one-line warning of a ``--device`` run whose physics stays on the host."""
    warnings.warn(
        f"--device: {why} run on the host; the cast stays on the device, the physics after it does not "
        "(docs/gpu.md)",
        stacklevel=3,
    )


def device_summary(source: Any, physics: Any) -> dict[str, Any]:
    """The summary.json ``device`` section of a pipeline's ``source`` and ``physics``: where the rays were
    cast, where the physics ran (and why on the host, where a device was asked for), the copies made."""
    world = getattr(source, "world", None)
    if isinstance(source, DeviceWorldSource):
        c = source.counter
        return {
            "cast": source.bvh.backend,
            "physics": "device",
            "copies_to_host": c.to_host,
            "copies_to_device": c.to_device,
            "bytes_to_host": c.bytes_to_host,
        }
    if isinstance(world, BvhWorld):
        return {"cast": world.backend, "physics": "host", "why": device_frame_unsupported(physics)}
    return {"cast": "cpu", "physics": "host"}
