"""The physics of a device-resident frame: from :class:`~rt_lidar.pipeline.device_frame.DeviceHits` to
points, every step on the frame's array module ``xp`` (CuPy on ``--device cuda``, NumPy on the CPU twin),
the points packed there and copied to the host once (docs/gpu.md).

The steps are those of the host's one-ray physics (:meth:`SensorPhysics.apply`), written once for both
array modules: the echo of each ray's opaque surface and of the glass it crossed (the radar equation,
:mod:`rt_lidar.kernels.intensity`) with the surface's texture (:mod:`rt_lidar.kernels.texture`); the
weather (the fused weather kernel: CUDA on the GPU, its CUDA source built for the host on the twin); the
candidate echoes of a pulse (the surface, the glass, the weather's clutter) merged within the preset's
return separation; detection against the receiver's noise floor; the return choice (strongest, last, or
the preset's dual pair); the false alarms of pulses left empty; the range walk and range noise; the
intensity chain (:mod:`rt_lidar.physics.intensity_chain`). Its draws come from the device's own generator
seeded by one draw of the frame's stream, so a device frame is the same bytes run after run on one
device, and the same statistics as the host's frame (not its bytes: the host draws differently, and its
waveform merges close echoes by their summed pulse shapes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rt_lidar.kernels import apply_range_noise, effective_reflectance, leading_edge_walk_m, received_power
from rt_lidar.kernels.ambient import false_alarm_probability, receiver_sigma_w
from rt_lidar.kernels.intensity import SPEED_OF_LIGHT, two_way_transmission
from rt_lidar.kernels.texture import texture_factor
from rt_lidar.kernels.waveform import pulse_sigma_ns
from rt_lidar.physics.intensity_chain import measure
from rt_lidar.physics.model import PhysicsConfig, PhysicsResult, SensorPhysics
from rt_lidar.physics.receiver_range import range_exponent
from rt_lidar.physics.texture import material_seeds
from rt_lidar.physics.weather import weather_model
from rt_lidar.pipeline.sources import Hits
from rt_lidar.points import POINT_DTYPE, PointFlag
from rt_lidar.sensor.materials import MaterialArrays
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.unreal_bridge.world.pose import quat_rotate

__all__ = ["DEVICE_RECORD", "DeviceSensorPhysics"]

_POINT_FIELDS = tuple((name, POINT_DTYPE[name]) for name in POINT_DTYPE.names or ())
DEVICE_RECORD = np.dtype([*_POINT_FIELDS, ("power_w", np.dtype("<f4"))])
"""A point as it leaves the device: :data:`POINT_DTYPE`'s fields, packed, and its received power."""
_NO = -np.inf


def _index(xp: Any, material: Any) -> Any:
    """Materials (int16, -1 = none) as table indices (int32, 0 for none)."""
    return xp.maximum(material, 0).astype(xp.int32)


class DeviceSensorPhysics(SensorPhysics):
    """:class:`SensorPhysics` whose :meth:`apply` runs on the device for :class:`DeviceHits` (any other
    hits take the host physics). ``pinned`` receives each frame's points (one copy)."""

    def __init__(
        self, preset: SensorPreset, materials: MaterialArrays, config: PhysicsConfig | None, pinned: Any
    ) -> None:
        super().__init__(preset, materials, config)
        self.pinned = pinned
        xp = pinned.xp
        self.xp = xp
        m = materials
        self._tables = tuple(
            xp.asarray(a)
            for a in (m.diffuse, m.retro_gain, m.retro_exponent, m.specular_gain, m.specular_exponent)
        )
        self._texture_tables: tuple[Any, Any, Any] | None = None
        self._gain = (
            None if range_exponent(preset) == 2.0 else (range_exponent(preset), preset.range.range_10pct_m)
        )

    def _path(self, range_m: Any) -> Any:
        """:meth:`EchoModel.path_factor` on the device."""
        xp = self.xp
        trans = two_way_transmission(range_m, self.config.extinction_per_m)
        if self._gain is None:
            return trans
        n, r10 = self._gain
        g = (xp.maximum(range_m.astype(xp.float64), 1e-3) / r10) ** (2.0 - n)
        return trans * xp.where(xp.isfinite(g), g, 0.0).astype(xp.float32)

    def _power(self, range_m: Any, cos_inc: Any, mat: Any, extra_t: Any) -> tuple[Any, Any]:
        """(received power W, effective reflectance) (:meth:`EchoModel.power`) on the device."""
        p = self.preset
        refl = effective_reflectance(cos_inc.astype(self.xp.float32), mat, *self._tables)
        power = received_power(
            range_m,
            refl,
            self._path(range_m) * extra_t,
            p.pulse.peak_power_w,
            p.optics.receiver_aperture_m,
            p.optics.system_efficiency,
        )
        return power, refl

    def _reflectivity(self, power_w: Any, range_m: Any) -> Any:
        """:meth:`EchoModel.measured_reflectivity` on the device."""
        p = self.preset
        unit = received_power(
            range_m,
            1.0,
            self._path(range_m),
            p.pulse.peak_power_w,
            p.optics.receiver_aperture_m,
            p.optics.system_efficiency,
        ).astype(self.xp.float32)
        return (power_w / self.xp.maximum(unit, 1e-30)).astype(self.xp.float32)

    def _texture(self, hits: Any, power: Any, refl: Any) -> None:
        """:func:`rt_lidar.physics.texture.texture_apply` on the device: ``power`` and ``refl`` scaled in
        place by the texture of each hit (its world point from the slice's start pose, as on the host)."""
        xp, m = self.xp, self.materials
        if m.texture_sigma is None or m.texture_cell_m is None or not (m.texture_sigma > 0).any():
            return
        if self._texture_tables is None:
            self._texture_tables = (
                xp.asarray(m.texture_sigma),
                xp.asarray(m.texture_cell_m.astype(np.float64)),
                xp.asarray(material_seeds(m)),
            )
        sigma, cell, seeds = self._texture_tables
        mat = _index(xp, hits.material)
        rays = xp.flatnonzero((hits.material >= 0) & (sigma[mat] > 0) & xp.isfinite(hits.range_m))
        if rays.size == 0:
            return
        local = hits.direction[rays].astype(xp.float64) * hits.range_m[rays, None].astype(xp.float64)
        if hits.pose_start is not None:
            p0, q0 = (np.asarray(v, np.float32).astype(np.float64) for v in hits.pose_start)
            rot = quat_rotate(q0 / np.linalg.norm(q0), np.eye(3))  # the rotated basis vectors, as rows
            local = local @ xp.asarray(rot) + xp.asarray(p0)
        mr = mat[rays]
        f = texture_factor(local, seeds[mr], cell[mr], sigma[mr])
        power[rays] *= f
        refl[rays] *= f

    def apply(self, hits: Hits, rng: np.random.Generator) -> PhysicsResult:
        """The detected points of ``hits``: on the device for :class:`DeviceHits`, else the host's."""
        from rt_lidar.pipeline.device_frame import DeviceHits

        if not isinstance(hits, DeviceHits):
            return super().apply(hits, rng)
        return self._apply_device(hits, rng)

    def _candidates(self, hits: Any, rng: np.random.Generator) -> tuple[Any, Any, Any, Any, Any]:
        """(range, power, effective reflectance, segment, flags), each (N, C): every pulse's candidate
        echoes (its surface, the glass it crossed, the weather's clutter), an absent one at power 0."""
        xp, p = self.xp, self.preset
        thr = p.pulse.detection_threshold_w
        f32 = xp.float32
        obj = hits.material >= 0
        with np.errstate(invalid="ignore", over="ignore"):
            power, refl = self._power(
                hits.range_m, hits.cos_incidence, _index(xp, hits.material), hits.glass_transmission
            )
            glass = hits.glass_material >= 0
            gp, grefl = self._power(
                hits.glass_range_m, hits.glass_cos, _index(xp, hits.glass_material), np.float32(1)
            )
        power = xp.where(obj, power, np.float32(0)).astype(f32)
        refl = xp.asarray(refl, dtype=f32).copy()
        self._texture(hits, power, refl)
        gp = xp.where(glass, gp, np.float32(0)).astype(f32)
        flags = xp.where(glass & obj, np.uint8(PointFlag.THROUGH_GLASS), np.uint8(0)).astype(xp.uint8)
        rng_m, seg = hits.range_m.copy(), hits.segment.copy()
        g_rng, g_seg, g_refl = hits.glass_range_m, hits.glass_segment, xp.asarray(grefl, dtype=f32)
        single = self.return_mode == "strongest"
        if single:  # the stronger of glass and surface, as the host's one-ray physics chooses
            take = gp > power
            power, refl = xp.where(take, gp, power).astype(f32), xp.where(take, g_refl, refl).astype(f32)
            rng_m = xp.where(take, g_rng, rng_m).astype(f32)
            seg = xp.where(take, g_seg, seg).astype(xp.uint32)
            flags = xp.where(take, np.uint8(0), flags).astype(xp.uint8)
        n = rng_m.shape[0]
        clutter = (xp.full(n, np.inf, f32), xp.zeros(n, f32), xp.zeros(n, xp.uint8))
        weather = self.config.weather
        if weather is not None:
            model = weather_model(weather)
            kw: dict[str, Any] = {"clear_air_per_m": self.config.extinction_per_m, "reflectivity": refl}
            if single:
                kw["segment"] = seg
            else:
                kw["echoes"] = clutter
            if xp is np:  # the CPU twin runs the weather kernel's CUDA source built for the host
                from rt_lidar.kernels import weather_cuda
                from rt_lidar.physics.device import _host_kernel

                kw["kernel"] = _host_kernel(weather_cuda.CUDA_SOURCE, "weather_kernel")
            model.apply(rng_m, power, flags, None, p, thr, rng, **kw)
        if single:
            return (rng_m[:, None], power[:, None], refl[:, None], seg[:, None], flags[:, None])
        zero_u32 = xp.zeros(n, xp.uint32)
        cols = (
            xp.stack([rng_m, g_rng, clutter[0]], axis=1),
            xp.stack([power, gp, clutter[1]], axis=1),
            xp.stack([refl, g_refl, xp.zeros(n, f32)], axis=1),
            xp.stack([seg, g_seg, zero_u32], axis=1),
            xp.stack([flags, xp.zeros(n, xp.uint8), clutter[2]], axis=1),
        )
        return cols

    def _apply_device(self, hits: Any, rng: np.random.Generator) -> PhysicsResult:
        xp, p, cfg = self.xp, self.preset, self.config
        thr = p.pulse.detection_threshold_w
        rx = p.receiver
        n = len(hits)
        draws = xp.random.RandomState(int(rng.integers(0, 2**32 - 1)))
        r, pw, _eff, seg, fl = self._candidates(hits, rng)
        c = r.shape[1]
        # close echoes merge: a weaker one within the return separation of a stronger one is not seen
        for i in range(c):
            for j in range(c):  # (inf - inf: two absent echoes, never close)
                if i != j:
                    with np.errstate(invalid="ignore"):
                        close = xp.abs(r[:, i] - r[:, j]) < p.returns.min_separation_m
                    weaker = (pw[:, j] < pw[:, i]) | ((pw[:, j] == pw[:, i]) & (j > i))
                    pw[:, j] = xp.where(close & weaker & (pw[:, i] > 0), np.float32(0), pw[:, j])
        sigma = float(receiver_sigma_w(rx.dark_sigma_w(thr), rx.shot_w, np.zeros(1))[0])
        noisy = cfg.receiver_noise
        if noisy:
            z = draws.standard_normal(size=(n, c)).astype(xp.float64)
            s = receiver_sigma_w(sigma, rx.shot_w, pw.astype(xp.float64))
            seen = pw + s * z >= thr
        else:
            seen = pw >= thr
        seen &= (pw > 0) & (r >= p.range.min_m) & (r <= p.range.max_m)
        p_rank = xp.where(seen, pw, _NO)
        first = xp.argmax(p_rank, axis=1)
        any_seen = xp.max(p_rank, axis=1) > _NO
        rows = xp.arange(n)
        if self.return_mode == "last":
            first = xp.argmax(xp.where(seen, r, _NO), axis=1)
        picks = [(first, any_seen)]
        if self.return_mode == "dual" and c > 1:
            rest = p_rank.copy()
            rest[rows, first] = _NO
            second = xp.argmax(rest, axis=1)
            has2 = xp.max(rest, axis=1) > _NO
            if p.returns.dual == "strongest_last":
                last = xp.argmax(xp.where(seen, r, _NO), axis=1)
                other = xp.where(last != first, last, second)
                has_other = xp.where(last != first, any_seen, has2)
            else:  # two strongest
                other, has_other = second, has2
            picks.append((other, has_other))
        pulse_parts, col_parts, rid_parts = [], [], []
        for rid, (col, ok) in enumerate(picks):
            idx = xp.flatnonzero(ok)
            pulse_parts.append(idx)
            col_parts.append(col[idx])
            rid_parts.append(xp.full(idx.shape[0], rid, xp.uint8))
        pulse = xp.concatenate(pulse_parts)
        col = xp.concatenate(col_parts)
        rid = xp.concatenate(rid_parts)
        order = xp.argsort(pulse * 4 + rid)
        pulse, col, rid = pulse[order], col[order], rid[order]
        d_r, d_p = r[pulse, col], pw[pulse, col]
        d_seg, d_fl = seg[pulse, col], fl[pulse, col].astype(xp.uint8)
        d_refl = self._reflectivity(d_p, d_r)
        return self._measure(hits, draws, pulse, rid, d_r, d_p, d_refl, d_seg, d_fl, sigma, any_seen)

    def _measure(
        self,
        hits: Any,
        draws: Any,
        pulse: Any,
        rid: Any,
        rng_m: Any,
        pw: Any,
        refl: Any,
        seg: Any,
        fl: Any,
        sigma: float,
        any_seen: Any,
    ) -> PhysicsResult:
        """Range walk, range noise, false alarms, the intensity chain and the packed points (one copy)."""
        xp, p, cfg = self.xp, self.preset, self.config
        thr = p.pulse.detection_threshold_w
        n = len(hits)
        if cfg.range_walk:
            sat = p.receiver.saturation(thr)
            walk = leading_edge_walk_m(pw.astype(xp.float64), thr, pulse_sigma_ns(p.pulse.width_ns), sat)
            rng_m = xp.where(pw > sat, xp.maximum(rng_m + walk, 0.0), rng_m).astype(xp.float32)
        measured = rng_m
        if cfg.range_noise:
            z = draws.standard_normal(size=pulse.shape[0]).astype(xp.float32)
            s_tot = receiver_sigma_w(sigma, p.receiver.shot_w, pw.astype(xp.float64))
            psig = pulse_sigma_ns(p.pulse.width_ns)
            measured = apply_range_noise(rng_m, z, p.range.accuracy_m, pw, s_tot, psig)
            measured = xp.maximum(measured, 0.0).astype(xp.float32)
        if cfg.receiver_noise:  # false alarms of the noise floor in pulses left without a return
            n_cells = (p.range.max_m - p.range.min_m) / (SPEED_OF_LIGHT * p.pulse.width_ns * 0.5e-9)
            p_fa = float(false_alarm_probability(thr, np.array([sigma]), n_cells)[0])
            fa = xp.flatnonzero(~any_seen & (draws.random_sample(size=n) < p_fa))
            k = fa.shape[0]
            fa_r = draws.uniform(p.range.min_m, p.range.max_m, size=k).astype(xp.float32)
            fa_p = (thr + xp.abs(draws.standard_normal(size=k)) * max(sigma, thr * 0.1)).astype(xp.float32)
            order = xp.argsort(xp.concatenate([pulse * 4 + rid, fa * 4]))
            pulse = xp.concatenate([pulse, fa])[order]
            rid = xp.concatenate([rid, xp.zeros(k, xp.uint8)])[order]
            measured = xp.concatenate([measured, fa_r])[order]
            pw = xp.concatenate([pw, fa_p])[order]
            refl = xp.concatenate([refl, self._reflectivity(fa_p, fa_r)])[order]
            seg = xp.concatenate([seg, xp.zeros(k, xp.uint32)])[order]
            fl = xp.concatenate([fl, xp.full(k, np.uint8(PointFlag.AMBIENT_NOISE), xp.uint8)])[order]
        amp_sigma = xp.full(n, sigma, xp.float64) if cfg.receiver_noise else None
        amp_z = (
            draws.standard_normal(size=pulse.shape[0]) if amp_sigma is not None else xp.zeros(pulse.shape[0])
        )
        refl, intensity, fl = measure(p, pw, amp_sigma, pulse, amp_z, refl, measured, fl)
        packed = self._pack(hits, pulse, measured, intensity, refl, rid, fl, seg, pw)
        rec = self.pinned.receive(packed, DEVICE_RECORD)
        points = np.empty(rec.shape[0], POINT_DTYPE)
        for name, _ in _POINT_FIELDS:
            points[name] = rec[name]
        with_return = int(np.count_nonzero(points["return_id"] == 0))
        return PhysicsResult(
            points=points,
            power_w=rec["power_w"].copy(),
            fired=hits.pulses,
            dropped=hits.pulses - with_return,
        )

    def _pack(
        self,
        hits: Any,
        pulse: Any,
        measured: Any,
        intensity: Any,
        refl: Any,
        rid: Any,
        fl: Any,
        seg: Any,
        pw: Any,
    ) -> Any:
        """(K, :data:`DEVICE_RECORD` itemsize) uint8 rows of the points, built on the device."""
        xp = self.xp
        k = int(pulse.shape[0])
        out = xp.empty((k, DEVICE_RECORD.itemsize), xp.uint8)
        d = hits.direction[pulse]
        xyz = d * measured.astype(xp.float32)[:, None]
        if hits.beam_origin is not None:
            xyz = xyz + hits.beam_origin[pulse]
        cols = {
            "x": xyz[:, 0],
            "y": xyz[:, 1],
            "z": xyz[:, 2],
            "intensity": intensity,
            "reflectivity": refl,
            "ring": hits.ring[pulse],
            "t": hits.t_ns[pulse],
            "return_id": rid,
            "flags": fl,
            "segment": seg,
            "power_w": pw,
        }
        offset = 0  # the record is packed: each field right after the one before
        for name in DEVICE_RECORD.names or ():
            dtype = DEVICE_RECORD[name]
            col = xp.ascontiguousarray(xp.asarray(cols[name]).astype(dtype))
            out[:, offset : offset + dtype.itemsize] = col.view(xp.uint8).reshape(k, dtype.itemsize)
            offset += dtype.itemsize
        return out
