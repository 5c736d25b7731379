"""Detections of a batch: what each pulse reports before range noise and output scaling.

Two ways to get there: the single-ray model of :class:`~rt_lidar.physics.model.SensorPhysics` (one return per
firing, the stronger of the glass and object echoes) and :func:`waveform_detections` here, used when a
pulse was cast as a sub-ray bundle or a multi-return mode is on: every sub-ray's object echo and glass
echo, scaled by the sub-ray's weight, are summed in time and peak-picked by :mod:`rt_lidar.kernels.waveform`.

Each reported return names the surface of the echo that contributes most at its peak (segment, flags);
its power is the waveform's height and its reflectivity the apparent one, inverted from that height by
the radar equation at the measured range (so a plane half in the beam looks half as bright, as on a
real sensor). A return whose strongest echo is a retro-reflector seen only by an outer sub-ray, not by
the nominal direction, is flagged :attr:`~rt_lidar.points.PointFlag.BLOOM`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rt_lidar.kernels.echo_table import gated_tables
from rt_lidar.kernels.intensity import SPEED_OF_LIGHT
from rt_lidar.kernels.waveform import Noise
from rt_lidar.physics.echo import EchoModel, ray_rings
from rt_lidar.physics.glass_ghost import glass_ghost_echoes
from rt_lidar.physics.normals import standard_normal
from rt_lidar.physics.pulse_spread import echo_width_ns
from rt_lidar.physics.spray import spray_apply
from rt_lidar.physics.weather import WeatherConfig, weather_model
from rt_lidar.physics.wet_road import wet_road_apply
from rt_lidar.pipeline.sources import Hits
from rt_lidar.points import PointFlag
from rt_lidar.sensor.presets import SensorPreset

__all__ = ["Detections", "select_kind", "waveform_detections", "window_of_panes", "window_of_pulses"]

_C_M_PER_NS = SPEED_OF_LIGHT * 1e-9
MAX_NOISY_CANDIDATES = 8


@dataclass
class Detections:
    """Returns of one batch, sorted by (pulse, return_id): one row per reported return."""

    pulse: np.ndarray  # (M,) int64 index of the firing
    return_id: np.ndarray  # (M,) uint8
    range_m: np.ndarray  # (M,) float32 true range of the return (before range noise)
    power_w: np.ndarray  # (M,) float32
    reflectivity: np.ndarray  # (M,) float32 measured: power over a white full-beam target's at that range
    segment: np.ndarray  # (M,) uint32
    flags: np.ndarray  # (M,) uint8
    epw_ns: np.ndarray | None = None  # (M,) float32 echo pulse width, when asked for

    def __len__(self) -> int:
        return int(self.pulse.shape[0])

    def take(self, idx: np.ndarray) -> Detections:
        """The rows ``idx`` (an index or boolean mask)."""
        return Detections(
            self.pulse[idx],
            self.return_id[idx],
            self.range_m[idx],
            self.power_w[idx],
            self.reflectivity[idx],
            self.segment[idx],
            self.flags[idx],
            None if self.epw_ns is None else self.epw_ns[idx],
        )


def window_of_panes(hits: Hits, gi: np.ndarray) -> np.ndarray:
    """The two-way transmission of the sensor's own window for the rays ``gi`` whose first surface is a
    pane: what dims that pane's own echo (:attr:`Hits.window_transmission`; 1 without a power fault)."""
    if hits.window_transmission is None:
        return np.ones(gi.size, np.float32)
    return np.take(hits.window_transmission, gi).astype(np.float32, copy=False)


def window_of_pulses(hits: Hits) -> np.ndarray | None:
    """(P,) float32 each pulse's two-way transmission of the sensor's own window (its first sub-ray's
    :attr:`Hits.window_transmission`: a power fault acts on the whole pulse); None without a fault."""
    window = hits.window_transmission
    if window is None or hits.subrays == 1:
        return window
    return np.ascontiguousarray(window.reshape(hits.pulses, hits.subrays)[:, 0])


def select_kind(preset: SensorPreset, mode: str) -> str:
    """The waveform selection of return mode ``mode`` (``dual`` as the preset defines it)."""
    if mode == "dual":
        return preset.returns.dual
    return mode


def weather_echoes(
    echo: EchoModel,
    weather: WeatherConfig,
    hits: Hits,
    rng: np.random.Generator,
    rng_m: np.ndarray,
    power: np.ndarray,
    *cols: list[np.ndarray],
) -> None:
    """The weather of one batch of pulses, once per pulse whatever the sub-ray count (its kernel on the
    echo model's backend, :meth:`rt_lidar.backend.PhysicsBackend.weather`).

    Each pulse's particles and fog are drawn once over its beam (up to the farthest surface any of its
    sub-rays met): its strongest clutter echo is appended to ``cols`` (range, amplitude, reflectance,
    segment, flags columns) as one more echo of the pulse (a column of one entry a pulse, not one a
    sub-ray: a 19-sub-ray bundle's table then holds 20 echoes a pulse without glass instead of 38),
    beside its sub-rays' object echoes, whose
    power ``power`` is attenuated two-way by the weather (in place) and whose range ``rng_m`` gets the
    precipitation range noise of the pulse. The clutter echo leaves and returns through the sensor's
    window: the kernel dims it by the pulse's window transmission (:func:`window_of_pulses`) before it
    meets the threshold, as the window dims every other echo of the pulse.
    """
    p = echo.preset
    n_sub, n_pulse = hits.subrays, hits.pulses
    r_sub = rng_m.reshape(n_pulse, n_sub)
    with np.errstate(invalid="ignore"):
        r_pulse = np.max(r_sub, axis=1).astype(np.float32)
    r_noisy = r_pulse.copy()
    er = np.full(n_pulse, np.inf, np.float32)
    ep = np.zeros(n_pulse, np.float32)
    ef = np.zeros(n_pulse, np.uint8)
    echo.backend.weather(
        weather_model(weather),
        r_noisy,
        np.zeros(n_pulse, np.float32),
        np.zeros(n_pulse, np.uint8),
        None,
        p,
        p.pulse.detection_threshold_w,
        rng,
        clear_air_per_m=echo.extinction_per_m,
        echoes=(er, ep, ef),
        window=window_of_pulses(hits),
    )
    a_w = np.float32(weather.extinction_per_m)
    with np.errstate(invalid="ignore"):
        power *= np.exp(np.float32(-2.0) * a_w * np.where(np.isfinite(rng_m), rng_m, np.float32(0)))
        shift = np.where(np.isfinite(r_pulse), r_noisy - r_pulse, np.float32(0)).astype(np.float32)
    rng_m += np.repeat(shift, n_sub)
    new: tuple[np.ndarray, ...] = (er, ep, np.zeros(n_pulse, np.float32), np.zeros(n_pulse, np.uint32), ef)
    for out, col in zip(cols, new, strict=True):
        out.append(col)


def wet_echoes(
    echo: EchoModel,
    weather: WeatherConfig,
    hits: Hits,
    rng: np.random.Generator,
    power: np.ndarray,
    *cols: list[np.ndarray],
) -> None:
    """The wet road of one batch: the road echoes in ``power`` darkened and attenuated through tyre
    spray (in place); each sub-ray's mirror ghost (:mod:`rt_lidar.physics.wet_road`) and each pulse's
    spray echo (:mod:`rt_lidar.physics.spray`, in the first sub-ray's column) appended to ``cols``
    (range, amplitude, reflectance, segment, flags columns) as more echoes of the pulse, attenuated
    two-way by the rain, fog and snow at their ranges (the object's echo is by :func:`weather_echoes`)."""
    wetness = weather.road_wetness
    a_w = np.float32(weather.extinction_per_m)
    n = len(hits)
    weight = hits.subray_weight if hits.subray_weight is not None else np.ones(hits.subrays, np.float32)
    w_ray = np.tile(weight.astype(np.float32), hits.pulses)
    ghost = wet_road_apply(echo, hits, wetness, power)
    spray = spray_apply(echo, hits, wetness, power, rng)
    new: list[tuple[np.ndarray, ...]] = []
    if ghost is not None:
        g_r, g_p, g_s, g_seg = ghost
        new.append((g_r, g_p * w_ray, g_s, g_seg, np.zeros(n, np.uint8)))
    if spray is not None:
        s_r, s_p = spray
        if hits.subrays > 1:  # one spray echo a pulse: its first sub-ray's
            s_p = np.where(np.arange(n) % hits.subrays == 0, s_p, np.float32(0)).astype(np.float32)
        flag = np.where(s_p > 0, np.uint8(PointFlag.RAIN_CLUTTER), np.uint8(0)).astype(np.uint8)
        new.append((s_r, s_p, np.zeros(n, np.float32), np.zeros(n, np.uint32), flag))
    for entry in new:
        if a_w > 0:
            with np.errstate(invalid="ignore"):
                fade = np.exp(np.float32(-2.0) * a_w * np.where(np.isfinite(entry[0]), entry[0], 0))
            entry = (entry[0], (entry[1] * fade).astype(np.float32), *entry[2:])
        for out, col in zip(cols, entry, strict=True):
            out.append(col)


def waveform_detections(
    echo: EchoModel,
    hits: Hits,
    rng: np.random.Generator,
    *,
    mode: str,
    weather: WeatherConfig | None = None,
    epw: bool = False,
    sigma: np.ndarray | None = None,
) -> Detections:
    """Sub-ray echoes (powers from ``echo``) summed in time and peak-picked for return mode ``mode``
    (the module docstring); the clutter echoes of ``weather`` (:func:`weather_echoes`) join them as
    extra echoes of each pulse; ``epw`` adds each return's echo pulse width. With the pulses' noise
    floors ``sigma`` (P,), each peak is detected with the probability its SNR gives. The weather and
    waveform kernels run on the echo model's backend (:class:`rt_lidar.backend.PhysicsBackend`)."""
    p = echo.preset
    thr = p.pulse.detection_threshold_w
    n_sub, n_pulse = hits.subrays, hits.pulses
    weight = hits.subray_weight if hits.subray_weight is not None else np.ones(n_sub, np.float32)
    w_ray = np.tile(weight.astype(np.float32), n_pulse)
    glass = hits.glass_material >= 0
    ghost_kind = -1  # the echo column of the panes' mirror ghosts, if any
    power, refl, rng_m, segment, flags = echo.object_echoes(hits)
    cols_r, cols_a, cols_s, cols_seg, cols_f = [rng_m], [power * w_ray], [refl], [segment], [flags]
    if weather is not None and weather.road_wetness > 0:
        wet_echoes(echo, weather, hits, rng, power, cols_r, cols_a, cols_s, cols_seg, cols_f)
        cols_a[0] = power * w_ray
    if weather is not None and not weather.is_clear_air:
        weather_echoes(echo, weather, hits, rng, rng_m, power, cols_r, cols_a, cols_s, cols_seg, cols_f)
        cols_a[0] = power * w_ray
    if glass.any():
        gi = np.nonzero(glass)[0]
        gp_full = np.zeros(len(hits), np.float32)
        grefl = np.zeros(len(hits), np.float32)
        window = window_of_panes(hits, gi)
        gp, gr = echo.power(hits.glass_range_m[gi], hits.glass_cos[gi], hits.glass_material[gi], window)
        focus = echo.beam_focus(ray_rings(hits)[gi], hits.glass_range_m[gi])  # each laser's own focus
        gp_full[gi], grefl[gi] = gp if focus is None else gp * focus, gr
        cols_r.append(hits.glass_range_m)
        cols_a.append(gp_full * w_ray)
        cols_s.append(grefl)
        cols_seg.append(hits.glass_segment)
        cols_f.append(np.zeros(len(hits), np.uint8))
        ghost = glass_ghost_echoes(echo, hits)
        if ghost is not None:  # the echo over the pane's mirror, one more echo of the pulse
            g_r, g_p, g_s, g_seg = ghost
            if weather is not None and weather.extinction_per_m > 0:
                with np.errstate(invalid="ignore"):
                    g_p = g_p * np.exp(
                        np.float32(-2.0 * weather.extinction_per_m) * np.where(np.isfinite(g_r), g_r, 0)
                    )
            ghost_kind = len(cols_r)
            cols_r.append(g_r)
            cols_a.append((g_p * w_ray).astype(np.float32))
            cols_s.append(g_s)
            cols_seg.append(g_seg)
            cols_f.append(np.zeros(len(hits), np.uint8))
    e_draws = n_sub * len(cols_r)  # the noise's draws as when every kind of echo had a column a sub-ray

    # (P, E) echo tables: a block of columns per kind of echo (object, wet road, weather, glass), one
    # column a sub-ray, or one a pulse (the weather's clutter echo: its first sub-ray's)
    def table(cols: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([c.reshape(n_pulse, -1) for c in cols], axis=1)

    # 2 r / c where the range gate lets the echo in, else inf (and height 0); one compiled pass
    t_tab, a_tab = gated_tables(cols_r, cols_a, n_pulse, p.range.min_m, p.range.max_m, _C_M_PER_NS)
    noise = None
    if sigma is not None:
        # one draw per candidate peak: a pulse rarely has more than 8 (the rest are detected noiselessly)
        z = standard_normal(rng, (n_pulse, min(e_draws + 2, MAX_NOISY_CANDIDATES)))
        noise = Noise(np.asarray(sigma, np.float64), p.receiver.shot_w, z)
    ret = echo.backend.waveform_returns(
        t_tab,
        a_tab,
        p.pulse.width_ns,
        thr,
        select_kind(p, mode),
        2.0 * p.returns.min_separation_m / _C_M_PER_NS,
        p.returns.max_returns,
        noise,
    )
    e_tot = t_tab.shape[1]
    flat = ret.pulse * e_tot + ret.echo
    range_m = (ret.t_ns * (_C_M_PER_NS / 2.0)).astype(np.float32)
    seg_tab, f_tab = table(cols_seg).reshape(-1), table(cols_f).reshape(-1)
    seg = seg_tab[flat].astype(np.uint32, copy=False)
    fl = f_tab[flat].astype(np.uint8, copy=False)
    if n_sub > 1:  # blooming: a retro-reflector found by an outer sub-ray that the nominal ray does not hit
        s_tab = table(cols_s).reshape(-1)
        per_kind = [c.size // n_pulse for c in cols_r] if n_pulse else [0 for _ in cols_r]
        col_sub = np.concatenate([np.arange(k) for k in per_kind])
        col_kind = np.repeat(np.arange(len(per_kind)), per_kind)
        sub, kind = col_sub[ret.echo], col_kind[ret.echo]
        centre = ret.pulse * n_sub
        centre_seg = np.where(hits.material[centre] >= 0, hits.segment[centre], np.uint32(0))
        # (a ghost over a pane's mirror is no blooming, however bright what it mirrors)
        bloom = (sub != 0) & (s_tab[flat] > 1.0) & (centre_seg != seg) & (kind != ghost_kind)
        fl = np.where(bloom, fl | np.uint8(PointFlag.BLOOM), fl).astype(np.uint8)
    apparent = echo.measured_reflectivity(ret.amp.astype(np.float32), range_m)
    epw_ns = None
    if epw:
        epw_ns = np.asarray(ret.epw_ns, np.float32)
        if n_sub == 1:  # one ray a pulse: an object's echo is as wide as its footprint's spread makes it
            width = echo_width_ns(p, hits.range_m[ret.pulse], hits.cos_incidence[ret.pulse])
            scale = np.where(ret.echo < n_sub, width / p.pulse.width_ns, 1.0)
            epw_ns = (epw_ns * scale).astype(np.float32)
        epw_ns = (epw_ns + np.float32(p.pulse.epw_offset_ns)).astype(np.float32)
    return Detections(
        pulse=ret.pulse,
        return_id=ret.return_id.astype(np.uint8),
        range_m=range_m,
        power_w=ret.amp.astype(np.float32),
        reflectivity=apparent,
        segment=seg,
        flags=fl,
        epw_ns=epw_ns,
    )
