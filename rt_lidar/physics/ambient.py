"""Receiver noise and sunlight: the noise floor of each pulse and the false detections it makes.

Every pulse's receiver has a dark noise floor (amplifier, dark current: the preset's
:class:`~rt_lidar.sensor.presets.ReceiverSpec` puts the threshold at ``threshold_snr`` of it); sunlight
(:class:`~rt_lidar.physics.model.PhysicsConfig` gives its illuminance and direction) adds the shot noise of
the background power its footprint sends (sub-ray weighted; the source gives, per ray, the cosine
between the lit surface's normal and the sun and between the ray and the sun,
:class:`~rt_lidar.pipeline.sources.Hits` ``sun_cos`` / ``beam_sun_cos``; a source that does not know them
gets a half-lit scene and no blinding). With that floor (:func:`pulse_noise_w`)

- a return is detected with probability Q((T - P) / sigma) (the single-ray and waveform paths), and its
  range jitters as 1 / sqrt(SNR) (:func:`rt_lidar.kernels.intensity.apply_range_noise`),
- a pulse left without any return reports a false detection, uniform over the range gate and flagged
  :attr:`~rt_lidar.points.PointFlag.AMBIENT_NOISE`, with the false-alarm probability of its noise floor
  (:func:`noise_detections`),
- within ``optics.sun_blinding_deg`` of the sun the receiver is blinded: every true return is lost
  and the pulse reports noise.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from rt_lidar.kernels.ambient import (
    background_power,
    band_irradiance_w_m2,
    false_alarm_probability,
    receiver_sigma_w,
)
from rt_lidar.kernels.intensity import SPEED_OF_LIGHT
from rt_lidar.kernels.waveform import single_echo_epw_ns
from rt_lidar.kernels.xp import array_module
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.normals import standard_normal, uniform_below
from rt_lidar.physics.returns import Detections
from rt_lidar.pipeline.sources import Hits
from rt_lidar.points import PointFlag

__all__ = ["UNKNOWN_SUN_COS", "noise_detections", "pulse_background_w", "pulse_noise_w", "sun_blinds"]

UNKNOWN_SUN_COS = 0.5
"""Sun cosine assumed for every surface when the source does not report it."""


def pulse_background_w(echo: EchoModel, sun_lux: float, hits: Hits) -> np.ndarray:
    """(P,) background (sun) power (W) on the detector of every pulse, from the footprint it looks at
    lit by ``sun_lux``, through the window one way (``Hits.window_one_way``: a blocked sector sees
    none, dirt of transmission T passes T of it); 0 at night. The hits' arrays may be of any array
    module (NumPy, or CuPy on the device frame: docs/gpu.md), and so is the answer."""
    xp = array_module(hits.material)
    if sun_lux <= 0:
        return xp.zeros(hits.pulses)
    o = echo.preset.optics
    irr = band_irradiance_w_m2(sun_lux, o.wavelength_nm, o.filter_bandwidth_nm)
    hit = hits.material >= 0
    sun_cos = hits.sun_cos if hits.sun_cos is not None else xp.full(len(hits), UNKNOWN_SUN_COS, xp.float32)
    diffuse = xp.asarray(echo.materials.hemispherical())[xp.maximum(hits.material, 0)]
    fov_h, fov_v = max(o.beam_divergence_h_mrad, 0.1) * 1e-3, max(o.beam_divergence_v_mrad, 0.1) * 1e-3
    pb = background_power(
        sun_cos, diffuse, hit, irr, o.receiver_aperture_m, o.system_efficiency, fov_h, fov_v
    )
    if hits.window_one_way is not None:  # the sunlight enters through the window once (faults/optical.py)
        pb = pb * hits.window_one_way
    n = hits.subrays
    w = hits.subray_weight if hits.subray_weight is not None else np.ones(n, np.float32)
    return pb.reshape(hits.pulses, n).astype(xp.float64) @ xp.asarray(w, xp.float64)


def sun_blinds(centre_sun_cos: np.ndarray, blinding_deg: float, hits: Hits) -> np.ndarray:
    """(P,) bool: the pulses whose beam (``centre_sun_cos``, each pulse's first ray's cosine to the sun)
    points within ``blinding_deg`` of the sun, unless a blockage covers the window there
    (``Hits.window_one_way`` 0; dirt still lets a blinding share of the sun through)."""
    blinded = centre_sun_cos >= math.cos(math.radians(blinding_deg))
    if hits.window_one_way is not None:
        blinded = blinded & (hits.window_one_way[:: hits.subrays] > 0)
    return blinded


def pulse_noise_w(
    echo: EchoModel, sun_lux: float, hits: Hits, background_w: np.ndarray | None = None
) -> np.ndarray:
    """(P,) noise floor (W, 1 sigma) of every pulse: the receiver's dark noise (the preset's
    :class:`~rt_lidar.sensor.presets.ReceiverSpec`) and the shot noise of the footprint's background
    lit by ``sun_lux`` (``background_w``: :func:`pulse_background_w` when already computed)."""
    rx, thr = echo.preset.receiver, echo.preset.pulse.detection_threshold_w
    if sun_lux <= 0:  # no background: one floor for every pulse (sqrt is exact, so no bit differs)
        return np.full(hits.pulses, receiver_sigma_w(rx.dark_sigma_w(thr), rx.shot_w, np.zeros(1))[0])
    bg = pulse_background_w(echo, sun_lux, hits) if background_w is None else background_w
    return np.asarray(receiver_sigma_w(rx.dark_sigma_w(thr), rx.shot_w, bg))


def _renumber(pulse: np.ndarray) -> np.ndarray:
    """Return ids 0, 1, ... within each run of equal pulse indices (sorted: a row's id is then the number
    of k >= 1 with ``pulse[i - k] == pulse[i]``, found in one comparison a k, as many as the longest run;
    unsorted: by the runs' starts)."""
    if not _sorted(pulse):
        return _renumber_runs(pulse)
    rid = np.zeros(pulse.size, np.uint8)
    k = 1
    while k < pulse.size:
        same = pulse[k:] == pulse[:-k]
        if not same.any():
            break
        rid[k:] += same.view(np.uint8)  # (past 255 it wraps, as the cast of the runs' ids does)
        k += 1
    return rid


def _renumber_runs(pulse: np.ndarray) -> np.ndarray:
    """:func:`_renumber` of any order: ids 0, 1, ... within each run of adjacent equal indices."""
    if pulse.size == 0:
        return np.zeros(0, np.uint8)
    repeats = np.flatnonzero(pulse[1:] == pulse[:-1])
    if repeats.size == 0:  # one return a pulse (single-return modes): every id is 0
        return np.zeros(pulse.size, np.uint8)
    start = np.ones(pulse.size, bool)
    start[repeats + 1] = False
    first = np.maximum.accumulate(np.where(start, np.arange(pulse.size), 0))
    return (np.arange(pulse.size) - first).astype(np.uint8)


@functools.lru_cache(maxsize=64)
def _one_false_alarm_probability(threshold_w: float, sigma_w: float, n_cells: float) -> np.ndarray:
    """``false_alarm_probability`` of one noise floor, as a read-only (1,) array, remembered: without
    sunlight every frame of a sensor asks for the same one."""
    got = false_alarm_probability(threshold_w, np.array([sigma_w], np.float64), n_cells)
    got.flags.writeable = False
    return got


def noise_detections(
    echo: EchoModel, sun_lux: float, hits: Hits, det: Detections, sigma: np.ndarray, rng: np.random.Generator
) -> Detections:
    """``det`` plus the false detections of the noise floor ``sigma`` (P,) and blinding by the sun of
    ``sun_lux`` (module docstring)."""
    p = echo.preset
    thr = p.pulse.detection_threshold_w
    blinded = np.zeros(hits.pulses, bool)
    if hits.beam_sun_cos is not None and sun_lux > 0:
        centre = hits.beam_sun_cos[:: hits.subrays]
        blinded = sun_blinds(centre, p.optics.sun_blinding_deg, hits)
        if blinded.any():
            det = det.take(~blinded[det.pulse])
    # false detections of pulses left without a return
    n_cells = (p.range.max_m - p.range.min_m) / (SPEED_OF_LIGHT * p.pulse.width_ns * 0.5e-9)
    if sun_lux <= 0 and sigma.size:  # one noise floor for every pulse: one probability
        one = (
            _one_false_alarm_probability(thr, float(sigma[0]), n_cells)
            if sigma.dtype == np.float64
            else false_alarm_probability(thr, sigma[:1], n_cells)
        )
        p_fa = one.reshape(-1)[:1]
    else:
        p_fa = np.where(blinded, 1.0, false_alarm_probability(thr, sigma, n_cells))
    empty = np.ones(hits.pulses, bool)
    empty[det.pulse] = False
    fa = uniform_below(rng, empty, p_fa)  # np.nonzero(empty & (rng.random(P) < p_fa))[0]
    if fa.size:
        r = rng.uniform(p.range.min_m, p.range.max_m, fa.size).astype(np.float32)
        pw = (thr + np.abs(standard_normal(rng, fa.size)) * np.maximum(sigma[fa], thr * 0.1)).astype(
            np.float32
        )
        false = Detections(
            pulse=fa.astype(np.int64),
            return_id=np.zeros(fa.size, np.uint8),
            range_m=r,
            power_w=pw,
            reflectivity=echo.measured_reflectivity(pw, r),
            segment=np.zeros(fa.size, np.uint32),
            flags=np.full(fa.size, np.uint8(PointFlag.AMBIENT_NOISE), np.uint8),
            epw_ns=None
            if det.epw_ns is None
            else single_echo_epw_ns(pw, thr, p.pulse.width_ns, p.pulse.epw_offset_ns).astype(np.float32),
        )
        det = _merge(det, false)
    det.return_id = _renumber(det.pulse)
    return det


def _merge(a: Detections, b: Detections) -> Detections:
    """Rows of both, sorted by pulse (a's order kept within a pulse, b's rows after a's): where both are
    sorted by pulse already (the waveform's returns and the false detections), b's rows are put in
    their places between a's; else a stable sort of the pulses."""
    pulse_a, pulse_b = a.pulse, b.pulse
    if _sorted(pulse_a) and _sorted(pulse_b):
        n = pulse_a.size + pulse_b.size
        at_b = np.searchsorted(pulse_a, pulse_b, side="right") + np.arange(pulse_b.size)
        at_a = np.ones(n, bool)
        at_a[at_b] = False

        def put(x: np.ndarray | None, y: np.ndarray | None) -> np.ndarray | None:
            if x is None or y is None:
                return None
            out = np.empty(n, np.result_type(x, y))
            out[at_a] = x
            out[at_b] = y
            return out

        fields = [put(x, y) for x, y in zip(_columns(a), _columns(b), strict=True)]
        return Detections(*fields)  # type: ignore[arg-type]

    def cat(x: np.ndarray | None, y: np.ndarray | None) -> np.ndarray | None:
        return None if x is None or y is None else np.concatenate([x, y])

    pulse = np.concatenate([pulse_a, pulse_b])
    order = np.argsort(pulse, kind="stable")
    merged = Detections(
        pulse,
        np.concatenate([a.return_id, b.return_id]),
        np.concatenate([a.range_m, b.range_m]),
        np.concatenate([a.power_w, b.power_w]),
        np.concatenate([a.reflectivity, b.reflectivity]),
        np.concatenate([a.segment, b.segment]),
        np.concatenate([a.flags, b.flags]),
        cat(a.epw_ns, b.epw_ns),
    )
    return merged.take(order)


def _sorted(x: np.ndarray) -> bool:
    return x.ndim == 1 and bool((x[1:] >= x[:-1]).all())


def _columns(d: Detections) -> list[np.ndarray | None]:
    return [d.pulse, d.return_id, d.range_m, d.power_w, d.reflectivity, d.segment, d.flags, d.epw_ns]
