"""The physics of a device-resident frame: from :class:`~rt_lidar.pipeline.device_frame.DeviceHits` to
points, every step on the frame's array module ``xp`` (CuPy on ``--device cuda``, NumPy on the CPU twin),
the points packed there and copied to the host once (docs/gpu.md).

The steps are those of the host's one-ray physics (:meth:`SensorPhysics.apply`), written once for both
array modules: the echo of each ray's opaque surface and of the glass it crossed (the radar equation,
:mod:`rt_lidar.kernels.intensity`) with the surface's texture (:mod:`rt_lidar.kernels.texture`); the
weather (the fused weather kernel: CUDA on the GPU, its CUDA source built for the host on the twin);
``strongest``: the stronger of glass and surface, detection against the receiver's noise floor;
``last`` and ``dual``: the surface's, the clutter's and the glass's echoes summed in time and
peak-picked by the waveform kernel (:func:`rt_lidar.kernels.waveform.waveform_returns`, as
:func:`rt_lidar.physics.returns.waveform_detections` does on the host); then the false alarms of pulses
left empty, the range walk and range noise, the intensity chain
(:mod:`rt_lidar.physics.intensity_chain`). Its draws come from the device's own generator seeded by one
draw of the frame's stream (the weather kernel's key is drawn from that stream as on the host), so a
device frame is the same bytes run after run on one device, and the same statistics as the host's
frame, not its bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rt_lidar.kernels import apply_range_noise, effective_reflectance, leading_edge_walk_m, received_power
from rt_lidar.kernels.ambient import receiver_sigma_w
from rt_lidar.kernels.intensity import SPEED_OF_LIGHT, two_way_transmission
from rt_lidar.kernels.texture import texture_factor
from rt_lidar.kernels.waveform import Noise, pulse_sigma_ns, single_echo_epw_ns, waveform_returns
from rt_lidar.physics.clear_coat import coat_lookup, coat_table, paint_params
from rt_lidar.physics.device_sun import at_pulses, blinded_pulses, false_alarm_chance, noise_floor, per_pulse
from rt_lidar.physics.device_wet import spray_device, wet_columns, wet_road_device, wetness_of
from rt_lidar.physics.glass_ghost import ghost_echoes, mirror_r0
from rt_lidar.physics.grazing_lobe import grazing_apply
from rt_lidar.physics.intensity_chain import measure
from rt_lidar.physics.laser_gain import ring_gains
from rt_lidar.physics.model import PhysicsConfig, PhysicsResult, SensorPhysics
from rt_lidar.physics.pulse_spread import peak_factor
from rt_lidar.physics.receiver_focus import beam_focus_ratio, beam_focus_table, focus_gain, focus_parameters
from rt_lidar.physics.receiver_range import range_exponent
from rt_lidar.physics.returns import _C_M_PER_NS as C_M_PER_NS
from rt_lidar.physics.returns import MAX_NOISY_CANDIDATES, select_kind
from rt_lidar.physics.texture import footprint_along_m, footprint_area_m2, footprint_beam, material_seeds
from rt_lidar.physics.weather import weather_model
from rt_lidar.pipeline.sources import Hits
from rt_lidar.points import POINT_DTYPE, PointFlag
from rt_lidar.sensor.beam_origins import two_point_corrections, two_point_shift
from rt_lidar.sensor.materials import MaterialArrays
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.unreal_bridge.world.pose import quat_rotate

__all__ = ["DEVICE_RECORD", "DEVICE_RECORD_EPW", "DeviceSensorPhysics", "device_record"]

_POINT_FIELDS = tuple((name, POINT_DTYPE[name]) for name in POINT_DTYPE.names or ())
DEVICE_RECORD = np.dtype([*_POINT_FIELDS, ("power_w", np.dtype("<f4"))])
"""A point as it leaves the device: :data:`POINT_DTYPE`'s fields, packed, and its received power."""
DEVICE_RECORD_EPW = np.dtype([*DEVICE_RECORD.descr, ("epw_ns", np.dtype("<f4"))])
""":data:`DEVICE_RECORD` and the echo pulse width (ns) of each point, where ``--epw`` asks for it."""


def device_record(epw: bool, sun: bool) -> np.dtype:
    """What each point carries back to the host: :data:`DEVICE_RECORD`, its echo pulse width where
    ``--epw`` asks for it, and the sunlight on its pulse (``ambient_w``) where the sun is out."""
    base = DEVICE_RECORD_EPW if epw else DEVICE_RECORD
    return np.dtype([*base.descr, ("ambient_w", np.dtype("<f4"))]) if sun else base


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
        self.record = device_record(self.beam.epw, self.config.sun_illuminance_lux > 0)
        """What each point carries back to the host (:func:`device_record`)."""
        xp = pinned.xp
        self.xp = xp
        table = two_point_corrections(preset)  # a Velodyne's two-point corrections, on the device
        self._two_point = None if table is None else xp.asarray(table)
        m = materials
        self._tables = tuple(
            xp.asarray(a)
            for a in (m.diffuse, m.retro_gain, m.retro_exponent, m.specular_gain, m.specular_exponent)
        )
        self._texture_tables: tuple[Any, Any, Any, Any, Any] | None = None
        # the paints' clear coat (rt_lidar.physics.clear_coat): its table put on the device once
        self._coat = None if m.coat_index is None else xp.asarray(coat_table(*paint_params(m)))
        # ghosts behind glass (rt_lidar.physics.glass_ghost): each material's mirror reflectance head-on
        self._mirror_r0 = xp.asarray(mirror_r0(m))
        self._gain = (
            None if range_exponent(preset) == 2.0 else (range_exponent(preset), preset.range.range_10pct_m)
        )
        self._focus = focus_parameters(preset)  # the receiver's near-field share, its table put there once
        self._focus_table = None if self._focus is None else xp.asarray(self._focus.table)
        beams = beam_focus_table(preset)  # each laser's own focus, where set (EchoModel.beam_focus)
        self._beam_focus = None if beams is None else xp.asarray(beams.table)
        gain = ring_gains(preset)  # each laser's own gain, where the unit's lasers differ
        self._laser_gain = None if gain is None else xp.asarray(gain)
        self._hemispherical: Any = None  # the wet road's albedos (hemispherical_device)

    def hemispherical_device(self) -> Any:
        """Each material's hemispherical reflectance (:meth:`MaterialArrays.hemispherical`) on the device,
        put there once."""
        if self._hemispherical is None:
            self._hemispherical = self.xp.asarray(self.materials.hemispherical())
        return self._hemispherical

    def _beam_focus_ratio(self, ring: Any, range_m: Any) -> Any:
        """:meth:`EchoModel.beam_focus` on the device (float32), None where no beam sets its own focus
        or gain."""
        xp = self.xp
        gain = None if self._laser_gain is None else xp.take(self._laser_gain, xp.asarray(ring, xp.int64))
        if self._beam_focus is None:
            return gain
        ratio = beam_focus_ratio(xp, self.preset, self._beam_focus, ring, range_m).astype(xp.float32)
        return ratio if gain is None else ratio * gain

    def _path(self, range_m: Any) -> Any:
        """:meth:`EchoModel.path_factor` on the device."""
        xp = self.xp
        trans = two_way_transmission(range_m, self.config.extinction_per_m)
        if self._focus is not None:  # the receiver lens's focus (rt_lidar.physics.receiver_focus)
            trans = trans * focus_gain(xp, range_m, self._focus, self._focus_table).astype(xp.float32)
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
        if self._coat is not None:  # the paints' clear coat, as EchoModel.power applies it
            f = coat_lookup(self.xp, self._coat, mat, cos_inc)
            power, refl = (power * f).astype(self.xp.float32), (refl * f).astype(self.xp.float32)
        return power, refl

    def _ghosts(self, hits: Any) -> tuple[Any, Any, Any, Any] | None:
        """:func:`rt_lidar.physics.glass_ghost.glass_ghost_echoes` on the device: every ray's echo over
        its first pane's mirror ``(range m, power W, effective reflectance, segment)`` (power 0: none);
        None when the hits carry no mirror rays."""
        xp = self.xp
        return ghost_echoes(xp, hits, self._mirror_r0, self._power, lambda m: _index(xp, m))

    def _echo_width_ns(self, range_m: Any, cos_inc: Any) -> Any:
        """:func:`rt_lidar.physics.pulse_spread.echo_width_ns` on the device: the FWHM (ns) of the
        broadened echo of one ray off a plane ``range_m`` away at incidence cosine ``cos_inc``."""
        f = peak_factor(self.preset, range_m, cos_inc)
        return float(self.preset.pulse.width_ns) / self.xp.maximum(f, 1e-6)

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
            patch_m = m.texture_patch_m if m.texture_patch_m is not None else np.ones_like(m.texture_cell_m)
            patch_sigma = m.texture_patch_sigma
            self._texture_tables = (
                xp.asarray(m.texture_sigma),
                xp.asarray(m.texture_cell_m.astype(np.float64)),
                xp.asarray(material_seeds(m)),
                xp.asarray(patch_m),
                None if patch_sigma is None else xp.asarray(patch_sigma),
            )
        sigma, cell, seeds, patch_m_t, patch_sigma_t = self._texture_tables
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
        beam, r, cos = footprint_beam(self.preset), hits.range_m[rays], hits.cos_incidence[rays]
        area = footprint_area_m2(xp, beam, r, cos, hits.subrays)
        along = footprint_along_m(xp, beam, r, cos, hits.subrays)
        patched = patch_sigma_t is not None
        f = texture_factor(
            local,
            seeds[mr],
            cell[mr],
            sigma[mr],
            area,
            patch_m_t[mr] if patched else None,
            patch_sigma_t[mr] if patched else None,
            along,
        )
        power[rays] *= f
        refl[rays] *= f

    def apply(self, hits: Hits, rng: np.random.Generator) -> PhysicsResult:
        """The detected points of ``hits``: on the device for :class:`DeviceHits`, else the host's."""
        from rt_lidar.pipeline.device_frame import DeviceHits

        if not isinstance(hits, DeviceHits):
            return super().apply(hits, rng)
        return self._apply_device(hits, rng)

    def _echoes(self, hits: Any) -> tuple[Any, Any, Any, Any, Any, Any, Any]:
        """(power, effective reflectance, flags) of every ray's surface echo (textured), and (power,
        effective reflectance, glass present) of the glass it crossed: fresh device arrays."""
        xp = self.xp
        f32 = xp.float32
        obj = hits.material >= 0
        glass = hits.glass_material >= 0
        with np.errstate(invalid="ignore", over="ignore"):
            power, refl = self._power(
                hits.range_m, hits.cos_incidence, _index(xp, hits.material), hits.glass_transmission
            )
            window = np.float32(1) if hits.window_transmission is None else hits.window_transmission
            gmat = _index(xp, hits.glass_material)
            gp, grefl = self._power(hits.glass_range_m, hits.glass_cos, gmat, window)
        power = xp.where(obj, power, np.float32(0)).astype(f32)
        refl = xp.asarray(refl, dtype=f32).copy()
        self._texture(hits, power, refl)
        grazing_apply(self.materials, hits.material, hits.cos_incidence, power, refl)
        if hits.subrays == 1:  # a pulse cast as one ray: its echo's peak spread over its footprint's depth
            power *= peak_factor(self.preset, hits.range_m, hits.cos_incidence)
        ring = hits.ring if hits.subrays == 1 else xp.repeat(hits.ring, hits.subrays)
        focus = self._beam_focus_ratio(ring, hits.range_m)
        if focus is not None:  # each laser's own focus on its surface and glass echoes
            power *= focus
            gp = gp * self._beam_focus_ratio(ring, hits.glass_range_m)
        gp = xp.where(glass, gp, np.float32(0)).astype(f32)
        flags = xp.where(glass & obj, np.uint8(PointFlag.THROUGH_GLASS), np.uint8(0)).astype(xp.uint8)
        return power, refl, flags, gp, xp.asarray(grefl, dtype=f32), glass, obj

    def _weather(self, rng_m: Any, power: Any, flags: Any, rng: np.random.Generator, **kw: Any) -> None:
        """The weather kernel on the frame's arrays, in place (:meth:`WeatherModel.apply`): CUDA on the GPU,
        its CUDA source built for the host on the CPU twin."""
        weather = self.config.weather
        if weather is None:
            return
        p = self.preset
        if self.xp is np:
            from rt_lidar.kernels import weather_cuda
            from rt_lidar.physics.device import _host_kernel

            kw["kernel"] = _host_kernel(weather_cuda.CUDA_SOURCE, "weather_kernel")
        weather_model(weather).apply(
            rng_m,
            power,
            flags,
            None,
            p,
            p.pulse.detection_threshold_w,
            rng,
            clear_air_per_m=self.config.extinction_per_m,
            **kw,
        )

    def _strongest(self, hits: Any, rng: np.random.Generator, draws: Any, sigma: Any) -> tuple[Any, ...]:
        """The host's one-ray ``strongest`` physics on the device: the stronger of glass and surface, the
        weather in place, detection against the noise floor. (pulse, return id, range, power, segment,
        flags) of the detections."""
        xp, p, f32 = self.xp, self.preset, self.xp.float32
        thr = p.pulse.detection_threshold_w
        power, refl, flags, gp, g_refl, _glass, _obj = self._echoes(hits)
        wetness = wetness_of(self)  # the wet road: the road darker, its mirror ghosts, the tyre spray
        wet_ghost = wet_road_device(self, hits, wetness, power) if wetness > 0 else None
        spray = spray_device(self, hits, wetness, power, rng) if wetness > 0 else None
        take = gp > power
        power = xp.where(take, gp, power).astype(f32)
        refl = xp.where(take, g_refl, refl).astype(f32)
        rng_m = xp.where(take, hits.glass_range_m, hits.range_m).astype(f32)
        seg = xp.where(take, hits.glass_segment, hits.segment).astype(xp.uint32)
        flags = xp.where(take, np.uint8(0), flags).astype(xp.uint8)
        for ghost in (
            self._ghosts(hits),
            wet_ghost,
        ):  # the mirror ghosts, where stronger than what the ray saw
            if ghost is None:
                continue
            g_r, g_p, g_s, g_seg = ghost
            won = g_p > power
            power = xp.where(won, g_p, power).astype(f32)
            refl = xp.where(won, g_s, refl).astype(f32)
            rng_m = xp.where(won, g_r, rng_m).astype(f32)
            seg = xp.where(won, g_seg, seg).astype(xp.uint32)
            flags = xp.where(won, np.uint8(0), flags).astype(xp.uint8)
        if spray is not None:  # the spray's droplet echo, where stronger
            s_r, s_p = spray
            won = s_p > power
            power = xp.where(won, s_p, power).astype(f32)
            refl = xp.where(won, np.float32(0), refl).astype(f32)
            rng_m = xp.where(won, s_r, rng_m).astype(f32)
            seg = xp.where(won, np.uint32(0), seg).astype(xp.uint32)
            flags = xp.where(won, np.uint8(PointFlag.RAIN_CLUTTER), flags).astype(xp.uint8)
        window = hits.window_transmission  # the clutter's echoes leave through the sensor's window too
        self._weather(rng_m, power, flags, rng, reflectivity=refl, segment=seg, window=window)
        if self.config.receiver_noise:
            z = draws.standard_normal(size=power.shape[0]).astype(xp.float64)
            s = receiver_sigma_w(sigma, p.receiver.shot_w, power.astype(xp.float64))
            seen = power + s * z >= thr
        else:
            seen = power >= thr
        seen &= (power > 0) & (rng_m >= p.range.min_m) & (rng_m <= p.range.max_m)
        pulse = xp.flatnonzero(seen)
        rid = xp.zeros(pulse.shape[0], xp.uint8)
        r_sel, p_sel = rng_m[pulse], power[pulse]
        epw = None
        if self.beam.epw:  # an object's echo is as wide as its footprint's spread in range makes it
            obj_r = hits.range_m[pulse]
            width = xp.where(
                r_sel == obj_r, self._echo_width_ns(obj_r, hits.cos_incidence[pulse]), p.pulse.width_ns
            )
            unit = single_echo_epw_ns(p_sel, thr, 1.0)  # the width of a 1 ns echo, scaled
            epw = xp.where(p_sel >= thr, p.pulse.epw_offset_ns + width * unit, 0.0).astype(f32)
        return pulse, rid, r_sel, p_sel, seg[pulse], flags[pulse], epw

    def _waveform(
        self, hits: Any, rng: np.random.Generator, draws: Any, sigma: Any, kind: str | None = None
    ) -> tuple[Any, ...]:
        """The host's waveform physics (:func:`rt_lidar.physics.returns.waveform_detections`) on the
        device, for one ray a pulse or a sub-ray bundle (``hits.subrays``): each sub-ray's surface echo
        (weighted by its share of the beam), each pulse's weather clutter echo (and its range noise), the
        glass's echoes, summed in time and peak-picked by the waveform kernel (CUDA on the GPU, its source
        built for the host on the twin) for the return mode; an outer sub-ray's retro-reflector that the
        central ray misses is flagged BLOOM. (pulse, return id, range, power, segment, flags)."""
        xp, p, f32 = self.xp, self.preset, self.xp.float32
        thr = p.pulse.detection_threshold_w
        n = len(hits)
        n_sub = hits.subrays
        n_pulse = n // n_sub
        weight = hits.subray_weight if hits.subray_weight is not None else np.ones(n_sub, np.float32)
        w_ray = xp.asarray(np.tile(np.asarray(weight, np.float32), n_pulse))
        power, refl, flags, gp, g_refl, glass, _obj = self._echoes(hits)
        rng_m = hits.range_m.copy()
        cols = [[rng_m, power, refl, hits.segment, flags]]
        weather = self.config.weather
        if wetness_of(self) > 0:  # the wet road's ghosts and spray: more echoes of each pulse
            cols += wet_columns(self, hits, rng, power, w_ray)
        if weather is not None and not weather.is_clear_air:  # weather_echoes: once a pulse
            with np.errstate(invalid="ignore"):
                r_pulse = xp.max(rng_m.reshape(n_pulse, n_sub), axis=1).astype(f32)
            r_noisy = r_pulse.copy()
            er, ep = xp.full(n_pulse, np.inf, f32), xp.zeros(n_pulse, f32)
            ef = xp.zeros(n_pulse, xp.uint8)
            window = hits.window_transmission  # each pulse's (its first sub-ray's): returns.window_of_pulses
            if window is not None and n_sub > 1:
                window = xp.ascontiguousarray(window.reshape(n_pulse, n_sub)[:, 0])
            self._weather(
                r_noisy,
                xp.zeros(n_pulse, f32),
                xp.zeros(n_pulse, xp.uint8),
                rng,
                echoes=(er, ep, ef),
                window=window,
            )
            a_w = np.float32(weather.extinction_per_m)
            with np.errstate(invalid="ignore"):
                power *= xp.exp(np.float32(-2.0) * a_w * xp.where(xp.isfinite(rng_m), rng_m, np.float32(0)))
                shift = xp.where(xp.isfinite(r_pulse), r_noisy - r_pulse, np.float32(0)).astype(f32)
            rng_m += xp.repeat(shift, n_sub)
            first = xp.arange(n_pulse) * n_sub  # the clutter echo sits in the first sub-ray's column
            col_r, col_a, col_f = xp.full(n, np.inf, f32), xp.zeros(n, f32), xp.zeros(n, xp.uint8)
            col_r[first], col_a[first], col_f[first] = er, ep, ef
            cols.append([col_r, col_a, xp.zeros(n, f32), xp.zeros(n, xp.uint32), col_f])
        cols[0][1] = power * w_ray
        ghost_kind = -1  # the echo column block of the panes' mirror ghosts, if any
        if bool(glass.any()):
            cols.append([hits.glass_range_m, gp * w_ray, g_refl, hits.glass_segment, xp.zeros(n, xp.uint8)])
            ghost = self._ghosts(hits)
            if ghost is not None:  # the echo over the pane's mirror, one more echo of the pulse
                g_r, g_p, g_s, g_seg = ghost
                if weather is not None and weather.extinction_per_m > 0:
                    with np.errstate(invalid="ignore"):
                        g_p = g_p * xp.exp(
                            np.float32(-2.0 * weather.extinction_per_m)
                            * xp.where(xp.isfinite(g_r), g_r, np.float32(0))
                        )
                ghost_kind = len(cols)
                cols.append([g_r, (g_p * w_ray).astype(f32), g_s, g_seg, xp.zeros(n, xp.uint8)])
        r_tab, a_tab, s_tab, seg_tab, f_tab = (
            xp.concatenate([c[k].reshape(n_pulse, n_sub) for c in cols], axis=1) for k in range(5)
        )
        e_tot = r_tab.shape[1]
        gate = xp.isfinite(r_tab) & (r_tab >= p.range.min_m) & (r_tab <= p.range.max_m)
        a_tab = xp.where(gate, a_tab, np.float32(0))
        t_tab = xp.where(gate, 2.0 * r_tab.astype(xp.float64) / C_M_PER_NS, np.inf)
        noise = None
        if self.config.receiver_noise:
            z = draws.standard_normal(size=(n_pulse, min(e_tot + 2, MAX_NOISY_CANDIDATES)))
            noise = Noise(per_pulse(xp, sigma, n_pulse), p.receiver.shot_w, z.astype(xp.float64))
        kernel = None
        if xp is np:
            from rt_lidar.kernels import waveform_cuda
            from rt_lidar.physics.device import _host_kernel

            kernel = _host_kernel(waveform_cuda.CUDA_SOURCE, "wf_peaks")
        ret = waveform_returns(
            t_tab,
            a_tab,
            p.pulse.width_ns,
            thr,
            select_kind(p, kind or self.return_mode),
            2.0 * p.returns.min_separation_m / C_M_PER_NS,
            p.returns.max_returns,
            noise,
            peaks_kernel=kernel,
        )
        flat = ret.pulse * e_tot + ret.echo
        range_m = (ret.t_ns * (C_M_PER_NS / 2.0)).astype(f32)
        seg = seg_tab.reshape(-1)[flat].astype(xp.uint32)
        fl = f_tab.reshape(-1)[flat].astype(xp.uint8)
        if n_sub > 1:  # blooming: a retro-reflector found by an outer sub-ray the central ray does not hit
            centre = ret.pulse * n_sub
            centre_seg = xp.where(hits.material[centre] >= 0, hits.segment[centre], np.uint32(0))
            bloom = (ret.echo % n_sub != 0) & (s_tab.reshape(-1)[flat] > 1.0) & (centre_seg != seg)
            bloom &= ret.echo // n_sub != ghost_kind  # (a ghost over a pane's mirror is no blooming)
            fl = xp.where(bloom, fl | np.uint8(PointFlag.BLOOM), fl).astype(xp.uint8)
        epw = None
        if self.beam.epw:  # as waveform_detections: one ray a pulse has its footprint's broadened echo
            epw = xp.asarray(ret.epw_ns, f32)
            if n_sub == 1:
                width = self._echo_width_ns(hits.range_m[ret.pulse], hits.cos_incidence[ret.pulse])
                scale = xp.where(ret.echo < n_sub, width / p.pulse.width_ns, 1.0)
                epw = (epw * scale).astype(f32)
            epw = (epw + np.float32(p.pulse.epw_offset_ns)).astype(f32)
        return ret.pulse, ret.return_id.astype(xp.uint8), range_m, ret.amp.astype(f32), seg, fl, epw

    def _bundled(self, hits: Any, rng: np.random.Generator, draws: Any, sigma: Any) -> tuple[Any, ...]:
        """``--beam full`` (:func:`rt_lidar.physics.beam_full.full_beam_detections`): the pulses without a
        bundle by the one-ray physics, the bundled ones by the sub-ray waveform, merged by (pulse,
        return id)."""
        xp = self.xp
        bundle = hits.bundle
        one = self._strongest if self.return_mode == "strongest" else self._waveform
        parts = list(one(hits, rng, draws, sigma))
        in_bundle = xp.zeros(len(hits), bool)
        in_bundle[bundle.pulses] = True
        keep = ~in_bundle[parts[0]]
        parts = [None if a is None else a[keep] for a in parts]
        sub = list(self._waveform(bundle.hits, rng, draws, at_pulses(sigma, bundle.pulses)))
        sub[0] = bundle.pulses[sub[0]]
        merged: list[Any] = [
            None if a is None else xp.concatenate([a, b]) for a, b in zip(parts, sub, strict=True)
        ]
        order = xp.argsort(merged[0] * 256 + merged[1])  # (a return id is a uint8)
        return tuple(None if a is None else a[order] for a in merged)

    def _apply_device(self, hits: Any, rng: np.random.Generator) -> PhysicsResult:
        xp = self.xp
        n = hits.pulses
        draws = xp.random.RandomState(int(rng.integers(0, 2**32 - 1)))
        background, sigma = noise_floor(self, hits)  # sunlight: a floor a pulse (device_sun)
        if hits.bundle is not None:
            step = self._bundled
        else:
            one_ray = self.return_mode == "strongest" and hits.subrays == 1
            step = self._strongest if one_ray else self._waveform
        pulse, rid, d_r, d_p, d_seg, d_fl, d_epw = step(hits, rng, draws, sigma)
        any_seen = xp.zeros(n, bool)
        any_seen[pulse] = True
        d_refl = self._reflectivity(d_p, d_r)
        focus = self._beam_focus_ratio(hits.ring[pulse], d_r)
        if focus is not None:  # calibrated reflectivity divides each laser's own focus out
            d_refl = (d_refl / focus).astype(xp.float32)
        return self._measure(
            hits, draws, pulse, rid, d_r, d_p, d_refl, d_seg, d_fl, sigma, any_seen, d_epw, background
        )

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
        sigma: float | Any,
        any_seen: Any,
        epw: Any = None,
        background: Any = None,
    ) -> PhysicsResult:
        """Range walk, range noise, the sun's blinding, false alarms, the intensity chain and the packed
        points (one copy); ``epw`` each detection's echo pulse width (None: not asked for); ``sigma``
        the noise floor (one float, or (P,) in sunlight, whose ``background`` (P,) each point takes)."""
        xp, p, cfg = self.xp, self.preset, self.config
        thr = p.pulse.detection_threshold_w
        n = hits.pulses
        if cfg.range_walk:
            sat = p.receiver.saturation(thr)
            walk = leading_edge_walk_m(pw.astype(xp.float64), thr, pulse_sigma_ns(p.pulse.width_ns), sat)
            rng_m = xp.where(pw > sat, xp.maximum(rng_m + walk, 0.0), rng_m).astype(xp.float32)
        measured = rng_m
        if cfg.range_noise:
            z = draws.standard_normal(size=pulse.shape[0]).astype(xp.float32)
            s_tot = receiver_sigma_w(at_pulses(sigma, pulse), p.receiver.shot_w, pw.astype(xp.float64))
            psig = pulse_sigma_ns(p.pulse.width_ns)
            measured = apply_range_noise(rng_m, z, p.range.accuracy_m, pw, s_tot, psig)
            measured = xp.maximum(measured, 0.0).astype(xp.float32)
        if cfg.receiver_noise:  # false alarms of the noise floor in pulses left without a return
            blinded = blinded_pulses(self, hits)
            if blinded is not None:  # looking into the sun: the pulse's true returns are lost
                keep = ~blinded[pulse]
                pulse, rid, measured, pw, refl, seg, fl = (
                    a[keep] for a in (pulse, rid, measured, pw, refl, seg, fl)
                )
                epw = None if epw is None else epw[keep]
                any_seen = xp.zeros(n, bool)
                any_seen[pulse] = True
            n_cells = (p.range.max_m - p.range.min_m) / (SPEED_OF_LIGHT * p.pulse.width_ns * 0.5e-9)
            p_fa = false_alarm_chance(xp, thr, sigma, n_cells, blinded)
            fa = xp.flatnonzero(~any_seen & (draws.random_sample(size=n) < p_fa))
            k = fa.shape[0]
            fa_r = draws.uniform(p.range.min_m, p.range.max_m, size=k).astype(xp.float32)
            fa_sigma = xp.maximum(at_pulses(sigma, fa), thr * 0.1)
            fa_p = (thr + xp.abs(draws.standard_normal(size=k)) * fa_sigma).astype(xp.float32)
            order = xp.argsort(xp.concatenate([pulse * 256 + rid, fa * 256]))
            pulse = xp.concatenate([pulse, fa])[order]
            rid = xp.concatenate([rid, xp.zeros(k, xp.uint8)])[order]
            measured = xp.concatenate([measured, fa_r])[order]
            pw = xp.concatenate([pw, fa_p])[order]
            refl = xp.concatenate([refl, self._reflectivity(fa_p, fa_r)])[order]
            seg = xp.concatenate([seg, xp.zeros(k, xp.uint32)])[order]
            fl = xp.concatenate([fl, xp.full(k, np.uint8(PointFlag.AMBIENT_NOISE), xp.uint8)])[order]
            if epw is not None:  # a false alarm's width: one echo of its height (noise_detections)
                fa_w = single_echo_epw_ns(fa_p, thr, p.pulse.width_ns, p.pulse.epw_offset_ns)
                epw = xp.concatenate([epw, fa_w.astype(xp.float32)])[order]
        amp_sigma = per_pulse(xp, sigma, n) if cfg.receiver_noise else None
        amp_z = (
            draws.standard_normal(size=pulse.shape[0]) if amp_sigma is not None else xp.zeros(pulse.shape[0])
        )
        laser = hits.ring[pulse] if p.output.raw_step is not None else None  # each laser's table
        refl, intensity, fl = measure(p, pw, amp_sigma, pulse, amp_z, refl, measured, fl, laser)
        ambient = None if background is None else background[pulse].astype(xp.float32)
        packed = self._pack(hits, pulse, measured, intensity, refl, rid, fl, seg, pw, epw, ambient)
        rec = self.pinned.receive(packed, self.record)
        points = np.empty(rec.shape[0], POINT_DTYPE)
        for name, _ in _POINT_FIELDS:
            points[name] = rec[name]
        with_return = int(np.count_nonzero(points["return_id"] == 0))
        return PhysicsResult(
            points=points,
            power_w=rec["power_w"].copy(),
            fired=hits.pulses,
            dropped=hits.pulses - with_return,
            epw_ns=rec["epw_ns"].copy() if epw is not None else None,
            ambient_w=rec["ambient_w"].copy() if ambient is not None else None,
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
        epw: Any = None,
        ambient: Any = None,
    ) -> Any:
        """(K, :attr:`record` itemsize) uint8 rows of the points, built on the device."""
        xp = self.xp
        k = int(pulse.shape[0])
        out = xp.empty((k, self.record.itemsize), xp.uint8)
        d = (hits.direction if hits.subrays == 1 else hits.pulse_direction)[pulse]
        xyz = d * measured.astype(xp.float32)[:, None]
        if hits.beam_origin is not None and self._two_point is not None:
            # rt_lidar.sensor.beam_origins.place_as_decoded: where the vendor's decoder puts the point
            m64, d64 = measured.astype(xp.float64), d.astype(xp.float64)
            on_line = hits.beam_origin[pulse].astype(xp.float64) + d64 * m64[:, None]
            ring = hits.ring[pulse].astype(xp.int64)
            xyz = (on_line + two_point_shift(self._two_point, ring, m64, d64, xp)).astype(xp.float32)
        elif hits.beam_origin is not None:
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
            "epw_ns": epw,
            "ambient_w": ambient,
        }
        offset = 0  # the record is packed: each field right after the one before
        for name in self.record.names or ():
            dtype = self.record[name]
            col = xp.ascontiguousarray(xp.asarray(cols[name]).astype(dtype))
            out[:, offset : offset + dtype.itemsize] = col.view(xp.uint8).reshape(k, dtype.itemsize)
            offset += dtype.itemsize
        return out
