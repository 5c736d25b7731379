"""The road's echo over the detection threshold, term by term, on a flat road (docs/realism.md, change 52).

Issue 40: the HDL-64E's road ends at 42.8 m (whole turn) where KITTI's S2 answers from its road to 54.8 m,
and laser by laser the simulated road's return rate falls from 0.84 (37.5 m) to 0.02 (49.7 m) where
KITTI's stays at 0.86-0.98 (change 47). This module takes the model's mean road echo apart. A beam
``depression`` below the horizon meets a flat road ``height_m`` below the sensor at ``R = h / sin(d)``,
incidence cosine ``sin(d)`` (``h`` the height of the laser's own beam origin: an S2's lasers fire from
0.1-0.21 m above the sensor's origin, :func:`laser_road`); the echo over the threshold there is the
product of

- ``inverse_square``: the radar equation's ``P_e eta D^2 / (4 R^2)`` over the threshold (a white
  Lambertian target filling the beam, no path, :func:`rt_lidar.kernels.received_power`);
- ``reflectance``: the road's effective reflectance S at that incidence (the table's asphalt: Hapke's
  single scattering, change 13; ``lambert`` is what a Lambertian road of the same S head-on would keep,
  ``cos(i)`` times S at normal incidence, the "cos law" the issue measures against);
- ``range_law``: the receiver's range law ``(R / R10)^(2 - n)`` (:mod:`rt_lidar.physics.receiver_range`);
- ``focus``: the receiver lens's focus (:mod:`rt_lidar.physics.receiver_focus`; 1 beyond focus);
- ``atmosphere``: clear air's two-way transmission;
- ``broadening``: the peak the receiver thresholds after the footprint's spread in range
  (:func:`rt_lidar.physics.pulse_spread.peak_factor`).

Each laser's own gain (change 42) multiplies this for one unit and is left out. :func:`road_echo_slopes`
gives each term's logarithmic slope ``d ln(term) / d ln R`` between two ranges: ``inverse_square`` is -2,
a Lambertian road adds about -1 (``lambert``), and what is left over is what makes the model's road fall
faster or slower than ``1 / R^2`` times the cos law.

The real side (:func:`echo_for_return_rate`, :func:`echo_for_zero_share`): a laser that returns from the
road with probability P, and reads 0 (its amplitude under ``output.weak_zero_snr`` thresholds) for a
share z of those returns, has a mean echo that the preset's own receiver noise (the dark floor and the
echo's shot noise; no texture, no sunlight) turns into that P or that z. Both read the real unit with
the model's receiver, so they are estimates, not measurements of the S2's echo.

Read together (:func:`echo_and_spread`, :func:`laser_echo_spreads`), P and z give both the mean echo and a
log-normal spread of it (the road's texture, change 46), which the zeros alone mistake for a flatter
fall; P first loses the rays that meet something other than the road (:func:`road_reach`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from scipy.special import ndtr

from rt_lidar.kernels import received_power, two_way_transmission
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.grazing_lobe import material_grazing_gain
from rt_lidar.physics.pulse_spread import peak_factor
from rt_lidar.physics.receiver_focus import receiver_focus_gain
from rt_lidar.physics.receiver_range import receiver_range_gain
from rt_lidar.sensor.materials import MaterialArrays, load_material_table
from rt_lidar.sensor.presets import CLEAR_AIR_EXTINCTION_PER_M, SensorPreset

__all__ = [
    "ECHO_RANGE_M",
    "P_SATURATED",
    "P_UNCERTAINTY",
    "R10_WINDOW",
    "REACH_RANGE_M",
    "READ_SPAN",
    "SENSOR_HEIGHT_M",
    "SLOPE_SPAN",
    "SPREAD_MAX",
    "TERMS",
    "ZERO_SHARE_BODY",
    "ZERO_SHARE_READ",
    "EchoSpread",
    "echo_and_spread",
    "echo_for_return_rate",
    "echo_for_zero_share",
    "echo_slope",
    "gain_asked_at_r10",
    "laser_echo_spreads",
    "laser_echoes",
    "laser_road",
    "read_lasers",
    "return_rate",
    "road_echo_slopes",
    "road_echo_terms",
    "road_material",
    "road_reach",
    "spread_echo_slope",
    "spread_rates",
    "zero_share",
]

SENSOR_HEIGHT_M = 1.8
"""The demo street's lidar above its road (``unreal_bridge/world/street.py``, the sensor mount)."""
TERMS = ("inverse_square", "reflectance", "grazing_lobe", "range_law", "focus", "atmosphere", "broadening")
"""The factors whose product is the mean road echo over the threshold."""


def road_material(preset: SensorPreset, name: str = "asphalt") -> MaterialArrays:
    """The packaged table's ``name`` (the road's asphalt) as material 0 at the preset's wavelength."""
    return load_material_table().arrays([name], preset.optics.wavelength_nm)


def road_echo_terms(
    preset: SensorPreset, road: MaterialArrays, range_m: np.ndarray, height_m: float = SENSOR_HEIGHT_M
) -> dict[str, np.ndarray]:
    """Each of :data:`TERMS` (float64 arrays) where beams meet a flat road of material 0 of ``road``
    ``height_m`` below the sensor at ``range_m`` (>= ``height_m``), their product ``echo_over_threshold``,
    the incidence cosine ``cos_incidence`` and ``lambert``: the Lambertian reference reflectance
    ``cos(i) S(0)``."""
    r = np.asarray(range_m, np.float64)
    cos = np.clip(height_m / r, 0.0, 1.0)
    r32, c32 = r.astype(np.float32), cos.astype(np.float32)
    n = r.size
    model = EchoModel(preset, road, CLEAR_AIR_EXTINCTION_PER_M)
    _, refl = model.power(r32, c32, np.zeros(n, np.int16), np.ones(n, np.float32))
    _, head_on = model.power(
        np.ones(1, np.float32), np.ones(1, np.float32), np.zeros(1, np.int16), np.ones(1, np.float32)
    )
    p = preset.pulse
    white = received_power(
        r32, 1.0, 1.0, p.peak_power_w, preset.optics.receiver_aperture_m, preset.optics.system_efficiency
    )
    law = receiver_range_gain(preset, r32)
    focus = receiver_focus_gain(preset, r32)
    focus_only = np.ones(n) if focus is None else np.asarray(focus, np.float64)
    law_only = np.ones(n) if law is None else np.asarray(law, np.float64) / np.maximum(focus_only, 1e-30)
    terms = {
        "inverse_square": np.asarray(white, np.float64) / p.detection_threshold_w,
        "reflectance": np.asarray(refl, np.float64),
        "grazing_lobe": np.asarray(material_grazing_gain(road, 0, c32), np.float64),
        "range_law": law_only,
        "focus": focus_only,
        "atmosphere": np.asarray(two_way_transmission(r32, model.extinction_per_m), np.float64),
        "broadening": np.asarray(peak_factor(preset, r32, c32), np.float64),
    }
    out = dict(terms)
    out["echo_over_threshold"] = np.prod(np.stack([terms[t] for t in TERMS]), axis=0)
    out["cos_incidence"] = cos
    out["lambert"] = cos * float(head_on[0])
    return out


def road_echo_slopes(
    preset: SensorPreset,
    road: MaterialArrays,
    near_m: float = 35.0,
    far_m: float = 55.0,
    height_m: float = SENSOR_HEIGHT_M,
) -> dict[str, float]:
    """``d ln(term) / d ln R`` of each of :data:`TERMS` between ``near_m`` and ``far_m`` on a flat road
    ``height_m`` down, their sum ``total`` (the mean echo's), ``lambert`` (the cos law's) and
    ``steeper_than_cos_law``: ``total - (-2 + lambert)``, negative where the model's road falls faster
    than ``1 / R^2`` times the cos law."""
    t = road_echo_terms(preset, road, np.array([near_m, far_m]), height_m)
    span = math.log(far_m / near_m)
    out = {k: float(np.log(t[k][1] / t[k][0]) / span) for k in (*TERMS, "lambert")}
    out["total"] = float(np.log(t["echo_over_threshold"][1] / t["echo_over_threshold"][0]) / span)
    out["steeper_than_cos_law"] = out["total"] - (-2.0 + out["lambert"])
    return out


def _q(x: float) -> float:
    """P(N(0, 1) > x)."""
    return 0.5 * math.erfc(x / math.sqrt(2.0))


def _sigma_over_threshold(preset: SensorPreset, echo: float) -> float:
    """The receiver's noise (1 sigma) over its threshold with a mean echo ``echo`` thresholds on it: the
    dark floor ``1 / threshold_snr`` and the echo's shot noise (no sunlight)."""
    rx, thr = preset.receiver, preset.pulse.detection_threshold_w
    return math.sqrt(rx.threshold_snr**-2 + rx.shot_w * max(echo, 0.0) / thr)


def return_rate(preset: SensorPreset, echo: float) -> float:
    """P(detection) of an echo ``echo`` thresholds high on the preset's receiver noise alone."""
    return _q((1.0 - echo) / _sigma_over_threshold(preset, echo))


def zero_share(preset: SensorPreset, echo: float) -> float:
    """Of the detected echoes of mean ``echo`` (over the threshold), the share measured under
    ``output.weak_zero_snr`` thresholds: those the S2 reports as 0 (0 where the preset reports none)."""
    k = preset.output.weak_zero_snr
    if k <= 1.0:
        return 0.0
    s = _sigma_over_threshold(preset, echo)
    detected = _q((1.0 - echo) / s)
    return 1.0 - _q((k - echo) / s) / max(detected, 1e-300)


def _solve(f: Callable[[float], float], target: float, increasing: bool) -> float:
    """The x in [0.01, 100] (bisected in log) where the monotonic ``f`` reaches ``target``."""
    lo, hi = 0.01, 100.0
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        v = f(mid)
        if (v < target) == increasing:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def echo_for_return_rate(preset: SensorPreset, p_return: float) -> float:
    """The mean echo (over the threshold) that returns ``p_return`` of the time on the receiver noise
    alone: any spread of the echo (texture, laser gains) asks for more, so a lower bound."""
    return _solve(lambda e: return_rate(preset, e), p_return, increasing=True)


def echo_for_zero_share(preset: SensorPreset, zeros: float) -> float:
    """The mean echo (over the threshold) whose detected returns read 0 for ``zeros`` of them."""
    return _solve(lambda e: zero_share(preset, e), zeros, increasing=False)


ECHO_RANGE_M = (25.0, 90.0)
"""Where lasers' ground returns are read back into echoes (:func:`laser_echoes`): from where KITTI's
near road starts reading 0 (under 0.1 of its returns within 25 m) to beyond the farthest real road seen
(nebula's VLS-128 frame answers from its road at 88 m)."""
ZERO_SHARE_READ = (0.02, 0.98)
"""Zero shares a laser's echo is read from: outside, the share no longer tells the echo apart."""
ZERO_SHARE_BODY = (0.1, 0.9)
"""Zero shares whose joint reading (:func:`echo_and_spread`) counts as the laser's mean echo
(:func:`read_lasers`): the S2's rule is nearly a step at its level (the receiver's noise a fifth of the
threshold), so a laser's zeros tell its echo apart only where the level lies in the echo's body, its
textured road's patches on either side of it; outside this, under a tenth of its returns lie on one side
(a handful of metre patches on a ring's road) and the reading rests on the tail's shape (change 70: at
3.3 thresholds the street's lasers of echo ~2.4 read zeros 0.93-0.99 and a joint mean 0.52-0.83 of theirs)."""


def laser_road(preset: SensorPreset, ring: int, where_m: float, height_m: float) -> tuple[float, float]:
    """(range from the laser's own beam origin, that origin's height) where laser ``ring`` of ``preset``
    meets a flat road ``height_m`` below the sensor's origin, ``where_m`` from that origin (a grid's
    range: the point's distance from the sensor's origin). A laser whose beam origin lies ``u`` up
    (:attr:`~rt_lidar.sensor.presets.SensorPreset.beam_origins_m`: an S2's 0.1-0.21 m) fires from
    ``h + u`` and meets the road ``sqrt(where^2 - h^2 + (h + u)^2)`` away (its few centimetres to the side
    and forward left out: they move the range by under a millimetre beyond 10 m); a laser at the
    origin (``u`` 0, or a preset without origins, or a ring it has no beam for) at ``max(where, h)``, h."""
    origins = preset.beam_origins_m
    up = 0.0 if origins is None or not 0 <= ring < len(origins) else float(origins[ring][2])
    if up == 0.0:
        return max(float(where_m), height_m), height_m
    h = height_m + up
    across = max(float(where_m) ** 2 - height_m**2, 0.0)
    return math.sqrt(across + h * h), h


def laser_echoes(
    preset: SensorPreset, horizon_lasers: list[list[Any]], height_m: float | None = None
) -> list[list[Any]]:
    """The mean road echo (over the threshold) each laser of a scan's ``horizon_lasers`` (rows of
    :func:`rt_lidar.validation.realism_lasers.laser_ground_rates`) reads back to on ``preset``'s receiver:
    ``[ring, where its ground returns lie (m), P, zeros, echo from the zeros, echo that P asks at least,
    the model's mean echo there]`` for lasers answering within :data:`ECHO_RANGE_M`. The zeros' echo is
    None outside :data:`ZERO_SHARE_READ` or where the preset reports no zeros; the model's is that of
    :func:`road_echo_terms` on a flat road ``height_m`` below the sensor's origin (the scan's;
    :data:`SENSOR_HEIGHT_M` when None), seen from the laser's own beam origin (:func:`laser_road`: a
    laser fired from ``u`` up meets the road from ``h + u``), without the laser's own gain. The rows'
    rings are ``preset``'s (a simulated grid's)."""
    h = SENSOR_HEIGHT_M if height_m is None else float(height_m)
    road = road_material(preset)
    out: list[list[Any]] = []
    for ring, _elev, _plane, p, _rays, where, zeros in horizon_lasers:
        if where is None or p is None or p <= 0.0 or not ECHO_RANGE_M[0] <= where <= ECHO_RANGE_M[1]:
            continue
        from_zeros = None
        reads_zeros = preset.output.weak_zero_snr > 1.0 and zeros is not None
        if reads_zeros and ZERO_SHARE_READ[0] < zeros < ZERO_SHARE_READ[1]:
            from_zeros = round(echo_for_zero_share(preset, float(zeros)), 3)
        at_least = round(echo_for_return_rate(preset, min(float(p), 0.999)), 3)
        r_laser, h_laser = laser_road(preset, int(ring), float(where), h)
        model = road_echo_terms(preset, road, np.array([r_laser]), h_laser)["echo_over_threshold"][0]
        out.append([ring, where, p, zeros, from_zeros, at_least, round(float(model), 3)])
    return out


def echo_slope(rows: list[list[Any]]) -> float | None:
    """Least-squares ``d ln(echo) / d ln R`` of :func:`laser_echoes`' echoes read from the zeros against
    where the lasers answer, up to 60 m (the zeros' own range in KITTI's frame; None with fewer than
    three such lasers)."""
    pts = [(math.log(r[1]), math.log(r[4])) for r in rows if r[4] is not None and r[1] <= 60.0]
    if len(pts) < 3:
        return None
    x, y = np.array(pts).T
    return round(float(np.polyfit(x, y, 1)[0]), 3)


SPREAD_MAX = 1.0
"""Largest log spread of the road echo :func:`echo_and_spread` reads (a log-normal of spread 1 spans a
factor 7.4 at one sigma either side; beyond it the zero share no longer falls with the mean)."""
P_SATURATED = 0.98
"""A (reach-corrected) return rate at or above this only bounds the spread: the echo's lower tail no longer
shows."""
P_UNCERTAINTY = 0.05
"""How far a laser's return rate on the road may lie from what its echo alone gives: rays lost to what is
not the road beyond the scan's median reach (the street's reach 0.86-0.99 from scan to scan), and counting
(KITTI's far lasers: 44-60 rays). A joint reading's mean spans the spreads this moves P over (change 70)."""
REACH_RANGE_M = (10.0, 25.0)
"""Where a scan's road lasers answer with echoes many times the threshold (KITTI's and the street's zero
shares under 0.1): their median return rate is the share of unblocked rays that reach the road at all
(:func:`road_reach`)."""
_SPREADS = np.linspace(0.0, SPREAD_MAX, 101)
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(40)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def spread_rates(preset: SensorPreset, echo: Any, spread: Any) -> tuple[np.ndarray, np.ndarray]:
    """(P(detection), share of detections under ``output.weak_zero_snr`` thresholds) of a road echo whose
    mean over the threshold is ``echo`` and which spreads log-normally by ``spread`` about it
    (``echo exp(spread X - spread^2 / 2)``, X ~ N(0, 1): the mean kept), on the preset's receiver noise
    (:func:`return_rate`, :func:`zero_share` at spread 0). Arrays broadcast; Gauss-Hermite, 40 nodes."""
    m = np.asarray(echo, np.float64)[..., None]
    s = np.asarray(spread, np.float64)[..., None]
    e = m * np.exp(s * _NODES - 0.5 * s * s)
    rx, thr = preset.receiver, preset.pulse.detection_threshold_w
    noise = np.sqrt(rx.threshold_snr**-2 + rx.shot_w * np.maximum(e, 0.0) / thr)
    detected = (ndtr((e - 1.0) / noise) * _WEIGHTS).sum(axis=-1)
    k = preset.output.weak_zero_snr
    if k <= 1.0:
        return detected, np.zeros_like(detected)
    over = (ndtr((e - k) / noise) * _WEIGHTS).sum(axis=-1)
    return detected, 1.0 - over / np.maximum(detected, 1e-300)


def _echo_for_zeros_at(preset: SensorPreset, zeros: float, spreads: np.ndarray) -> np.ndarray:
    """Per spread of ``spreads``, the mean echo whose detections read 0 for ``zeros`` of them (bisected in
    log over [0.01, 100]; the share falls as the mean rises)."""
    lo, hi = np.full(spreads.shape, 0.01), np.full(spreads.shape, 100.0)
    for _ in range(40):
        mid = np.sqrt(lo * hi)
        under = spread_rates(preset, mid, spreads)[1] > zeros  # too many zeros: the echo is higher
        lo, hi = np.where(under, mid, lo), np.where(under, hi, mid)
    return np.sqrt(lo * hi)


class EchoSpread(NamedTuple):
    """A laser's road echo read from its return rate and zeros (:func:`echo_and_spread`)."""

    mean: float
    """The mean echo over the threshold (see :func:`echo_and_spread` for each reading's)."""
    low: float
    """The least mean both observations allow (``mean`` where they fix it)."""
    high: float | None
    """The largest (None: unbounded, as a ``"rate only"`` reading unless its zeros saturate)."""
    spread: float | None
    """The echo's log spread (its bound for ``"spread at most"``/``"spread at least"``; None: unread)."""
    reading: str
    """``"joint"``, ``"spread at most"``, ``"spread at least"`` or ``"rate only"``."""


def echo_and_spread(preset: SensorPreset, p_return: float, zeros: float | None) -> EchoSpread:
    """The road echo's mean (over the threshold) and log spread that give both a laser's return rate
    ``p_return`` (on the road alone: :func:`road_reach` takes out the rays that meet something else) and
    its zero share ``zeros`` (:func:`spread_rates`).

    ``"joint"``: both solved (the spread where the zeros' mean at that spread returns ``p_return``); its
    ``low``-``high`` are the zeros' means over the spreads that ``p_return`` +- :data:`P_UNCERTAINTY` asks
    (change 70), wide where the zeros read the echo's tail (the level far into it, a spread that P alone
    sets).
    ``"spread at most"``: ``p_return`` >= :data:`P_SATURATED` only bounds the spread (the largest that
    still returns that often); the mean lies between the zeros' means at spread 0 and at that bound.
    ``"spread at least"``: the zeros ask a spread beyond :data:`SPREAD_MAX` to return so rarely; the mean
    is the zeros' at :data:`SPREAD_MAX`. ``"rate only"``: the zeros outside :data:`ZERO_SHARE_READ` or not
    reported; the mean that ``p_return`` asks at spread 0, a lower bound where ``p_return`` > 0.5 (a
    spread asks more), spread None; its ``high`` None, or where the zeros saturate at the top (every
    detection under the level: the echo well under it) the mean whose zeros reach
    :data:`ZERO_SHARE_READ`'s upper share at spread 0 (a spread asks less): P reads, the level bounds."""
    p = min(max(float(p_return), 0.0), 1.0)
    reads_zeros = preset.output.weak_zero_snr > 1.0 and zeros is not None
    if not (reads_zeros and ZERO_SHARE_READ[0] < float(zeros or 0.0) < ZERO_SHARE_READ[1]):
        m = echo_for_return_rate(preset, min(max(p, 1e-6), 0.999))
        high = None
        if reads_zeros and float(zeros or 0.0) >= ZERO_SHARE_READ[1]:
            high = max(echo_for_zero_share(preset, ZERO_SHARE_READ[1]), m)
        return EchoSpread(m, m, high, None, "rate only")
    means = _echo_for_zeros_at(preset, float(zeros or 0.0), _SPREADS)
    rates = spread_rates(preset, means, _SPREADS)[0]  # falls as the spread grows at these zeros
    spread = _spread_for_rate(rates, min(p, P_SATURATED))
    if spread >= SPREAD_MAX:
        m = float(means[-1])
        return EchoSpread(m, m, m, SPREAD_MAX, "spread at least")
    if p >= P_SATURATED:  # the zeros' means over spreads 0 .. the bound
        low, high = _means_over(means, 0.0, spread)
        return EchoSpread(math.sqrt(low * high), low, high, spread, "spread at most")
    at = _mean_at(means, spread)
    near = _spread_for_rate(rates, min(p + P_UNCERTAINTY, 1.0))
    far = _spread_for_rate(rates, max(p - P_UNCERTAINTY, 0.0))
    low, high = _means_over(means, near, far)
    return EchoSpread(at, min(low, at), max(high, at), spread, "joint")


def _spread_for_rate(rates: np.ndarray, target: float) -> float:
    """The spread (on :data:`_SPREADS`) at which ``rates`` (falling as the spread grows) reach ``target``:
    0 where no spread returns less often, :data:`SPREAD_MAX` where the largest still returns more often."""
    if target >= rates[0]:
        return 0.0
    if target <= rates[-1]:
        return SPREAD_MAX
    i = int(np.flatnonzero(rates < target)[0])  # rates[i - 1] >= target > rates[i]
    t = float((rates[i - 1] - target) / (rates[i - 1] - rates[i]))
    return float(_SPREADS[i - 1] + t * (_SPREADS[i] - _SPREADS[i - 1]))


def _mean_at(means: np.ndarray, spread: float) -> float:
    """The zeros' mean echo at ``spread``, interpolated in log between :data:`_SPREADS`."""
    return float(np.exp(np.interp(spread, _SPREADS, np.log(means))))


def _means_over(means: np.ndarray, low: float, high: float) -> tuple[float, float]:
    """(least, largest) of the zeros' means over the spreads ``low``-``high``."""
    spreads = _SPREADS
    inside = means[(spreads > low) & (spreads < high)].tolist()
    span = [*inside, _mean_at(means, low), _mean_at(means, high)]
    return min(span), max(span)


def road_reach(horizon_lasers: list[list[Any]]) -> float | None:
    """The share of a scan's unblocked rays that reach its road at all: the median return rate of the
    lasers of ``horizon_lasers`` answering within :data:`REACH_RANGE_M` (their echoes many times the
    threshold, so what they miss met something else: cars, kerbs, rays the plane fit counts as unblocked);
    None with fewer than three such lasers."""
    ps = [r[3] for r in horizon_lasers if r[5] is not None and REACH_RANGE_M[0] <= r[5] <= REACH_RANGE_M[1]]
    return float(np.median(ps)) if len(ps) >= 3 else None


READ_SPAN = 1.25
"""A laser's joint reading counts in :func:`spread_echo_slope` where its mean is fixed within this factor
(``high / low``)."""


def laser_echo_spreads(
    preset: SensorPreset, horizon_lasers: list[list[Any]], height_m: float | None = None
) -> list[list[Any]]:
    """Each laser's road echo read jointly from its return rate and its zeros (:func:`echo_and_spread`),
    for the lasers :func:`laser_echoes` reads: ``[ring, where (m), P, P on the road (P over the scan's
    :func:`road_reach`, at most 1), zeros, mean echo, its least, its largest (None: unbounded), log spread,
    reading, the model's flat-road echo]``."""
    reach = road_reach(horizon_lasers) or 1.0
    out: list[list[Any]] = []
    for ring, where, p, zeros, _z, _p, model in laser_echoes(preset, horizon_lasers, height_m):
        on_road = min(float(p) / reach, 1.0)
        e = echo_and_spread(preset, on_road, zeros)
        out.append(
            [
                ring,
                where,
                p,
                round(on_road, 3),
                zeros,
                round(e.mean, 3),
                round(e.low, 3),
                None if e.high is None else round(e.high, 3),
                None if e.spread is None else round(e.spread, 3),
                e.reading,
                model,
            ]
        )
    return out


def _read(row: list[Any]) -> bool:
    """Whether a :func:`laser_echo_spreads` row's mean is fixed within :data:`READ_SPAN` by zeros in
    :data:`ZERO_SHARE_BODY` (its level in the echo's body)."""
    fixed = row[9] in ("joint", "spread at most") and row[7] is not None and row[7] <= READ_SPAN * row[6]
    return fixed and row[4] is not None and ZERO_SHARE_BODY[0] <= float(row[4]) <= ZERO_SHARE_BODY[1]


def read_lasers(rows: list[list[Any]]) -> list[list[Any]]:
    """The rows of :func:`laser_echo_spreads` whose mean both observations fix within :data:`READ_SPAN`,
    their zeros in :data:`ZERO_SHARE_BODY` (at the preset's own level), up to 60 m."""
    return [r for r in rows if _read(r) and r[1] <= 60.0]


SLOPE_SPAN = 1.3
"""The least factor in range :func:`spread_echo_slope`'s lasers span: over less (at 3.3 the street's 27-34 m,
x1.22) a tenth off one laser's mean moves the slope by ~0.5 (change 70)."""


def spread_echo_slope(rows: list[list[Any]]) -> float | None:
    """Least-squares ``d ln(mean echo) / d ln R`` of :func:`read_lasers`' rows; None with fewer than
    three or where they span under :data:`SLOPE_SPAN` in range."""
    pts = [(math.log(r[1]), math.log(r[5])) for r in read_lasers(rows)]
    if len(pts) < 3 or max(p[0] for p in pts) - min(p[0] for p in pts) < math.log(SLOPE_SPAN):
        return None
    x, y = np.array(pts).T
    return round(float(np.polyfit(x, y, 1)[0]), 3)


R10_WINDOW = 0.1
"""Lasers answering within this share of the preset's datasheet 10 % range (45-55 m for the HDL-64E's 50 m)
read the gain that the road asks there (:func:`gain_asked_at_r10`)."""


def gain_asked_at_r10(preset: SensorPreset, rows: list[list[Any]]) -> float | None:
    """The receiver gain over the model that a scan's road asks at the preset's datasheet 10 % range R10
    (docs/realism.md, change 56): the median, over the rows of :func:`laser_echo_spreads` answering within
    R10 (1 +- :data:`R10_WINDOW`), of the mean echo they read over the model's flat road echo there. On
    the model's own scan it reads the lasers' own gains (~1). Any range-only receiver term (the range law, a
    time-programmed gain or threshold) that keeps the 10 % figure is 1 at R10 by construction, so a figure
    above 1 there is what no such term can give. A ``"rate only"`` row's mean is the least its return rate
    asks (a lower bound where it returns more than half the time). None without R10 or such lasers."""
    r10 = preset.range.range_10pct_m
    if r10 is None:
        return None
    lo, hi = r10 * (1.0 - R10_WINDOW), r10 * (1.0 + R10_WINDOW)
    ratios = [r[5] / r[10] for r in rows if lo <= r[1] <= hi and r[10] > 0.0]
    return round(float(np.median(ratios)), 3) if ratios else None
