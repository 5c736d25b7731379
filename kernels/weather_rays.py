"""Per-ray weather kernels (NumPy): the counter-based random draws, the thinned Poisson process of
detectable particles, the fog's soft target and the winning echo of each ray. The physics, the
parameter bundles and their tables are in :mod:`kernels.weather`; :mod:`kernels.weather_cuda` is the
fused CUDA twin and :mod:`rt_lidar.kernels.weather_reference` the plain-Python one-ray-at-a-time reference.

Random numbers: a counter-based generator (SplitMix64 finaliser of ``key + counter * golden``), so a
draw is a pure function of (seed, ray, slot): the NumPy kernels and the fused CUDA kernel of
:mod:`rt_lidar.kernels.weather_cuda` draw the same numbers, and runs with the same seed are identical.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np

from rt_lidar.kernels.weather import (
    MAX_PARTICLES,
    SLOTS_PER_RAY,
    Species,
    WeatherKernelParams,
    beam_diameter,
    min_detectable_diameter_mm,
    overlap,
    receiver_gain,
)
from rt_lidar.kernels.xp import array_module

__all__ = [
    "NORMAL_TABLE",
    "apply_weather",
    "count_prescreen_bits",
    "counters",
    "hash_bits",
    "hash_uniform",
    "particle_returns",
    "poisson_inverse",
    "ray_hash",
    "table_lookup",
    "unit_from_bits",
]

NORMAL_TABLE = np.array(
    [statistics.NormalDist().inv_cdf((i + 0.5) / 4096) for i in range(4096)], dtype=np.float32
)
"""Standard-normal quantiles at the midpoints of 4096 equal-probability bins (indexed by 12 random bits)."""
_GOLDEN, _M1 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_U64 = (1 << 64) - 1


def hash_bits(key: int, counter: Any) -> Any:
    """64 random bits per uint64 counter: the SplitMix64 finaliser of ``key + counter * golden``."""
    xp = array_module(counter)
    z = counter.astype(xp.uint64, copy=True)
    z *= _GOLDEN
    z += xp.uint64(key & 0xFFFFFFFFFFFFFFFF)
    return _finalise(z)


def _finalise(z: Any) -> Any:
    """SplitMix64's finaliser of the uint64 array ``z``, in place (returns it)."""
    xp = array_module(z)
    t = z >> np.uint64(30)
    z ^= t
    z *= _M1
    xp.right_shift(z, np.uint64(27), out=t)
    z ^= t
    z *= _M2
    xp.right_shift(z, np.uint64(31), out=t)
    z ^= t
    return z


def unit_from_bits(z: Any, shift: int, nbits: int) -> Any:
    """Uniform float32 in (0, 1) from bits ``shift .. shift + nbits - 1`` of ``z`` (nbits <= 24)."""
    xp = array_module(z)
    f = ((z >> np.uint64(shift)) & np.uint64((1 << nbits) - 1)).astype(xp.float32)
    return (f + xp.float32(0.5)) * xp.float32(2.0**-nbits)


def hash_uniform(key: int, counter: Any) -> Any:
    """Uniform float32 in (0, 1) from the top 24 bits of :func:`hash_bits`."""
    return unit_from_bits(hash_bits(key, counter), 40, 24)


def counters(ray: Any, slot: int) -> Any:
    """The uint64 counters of ``slot`` for rays ``ray`` (``ray * SLOTS_PER_RAY + slot``)."""
    xp = array_module(ray)
    c = ray.astype(xp.uint64) * np.uint64(SLOTS_PER_RAY)
    c += np.uint64(slot)
    return c


def table_lookup(z: Any, z0: float, dz: float, table: Any) -> Any:
    """Linear interpolation in a table sampled every ``dz`` from ``z0`` (clamped at both ends)."""
    xp = array_module(z)
    n = table.shape[0]
    t = xp.clip((z - xp.float32(z0)) * xp.float32(1.0 / dz), xp.float32(0), xp.float32(n - 1.001))
    i = t.astype(xp.int32)
    f = t - i.astype(xp.float32)
    lo = table[i]
    return (lo + f * (table[i + 1] - lo)).astype(xp.float32)


def poisson_inverse(mu: Any, u: Any, kmax: int = MAX_PARTICLES) -> Any:
    """Poisson(mu) counts by inverting the CDF at u (capped at ``kmax``), int32."""
    xp = array_module(mu)
    p = xp.exp(-mu)
    cdf = p.copy()
    k = xp.zeros(mu.shape, xp.int32)
    for j in range(1, kmax + 1):
        more = u > cdf
        if not bool(more.any()):
            break
        k += more
        p = p * mu / xp.float32(j)
        cdf = cdf + p
    return k


def count_prescreen_bits(sp: Species) -> int:
    """Rays whose count bits lie below this can hold no detectable particle of ``sp`` (their uniform is
    under ``exp(-mu_max) <= P(k = 0)``); a conservative integer bound on the raw 64 bits."""
    p_far = float(np.float32(math.exp(-float(sp.cum[-1]))))
    return max(int(p_far * 0.999 * 2**24) - 1, 0) << 40


def particle_returns(
    range_m: Any, pre: Any, h_pre: Any, key: int, sp: Species, prm: WeatherKernelParams
) -> tuple[Any, Any, Any]:
    """Strongest detectable particle of one species in each beam that holds any: (rays, power W, range m).
    Detectable at ``prm.threshold_w / prm.draw_gain`` (the table's), before any window gain.

    ``pre`` are the indices of the rays that passed :func:`count_prescreen_bits` (a ray's index is its
    counter) and ``h_pre`` their random bits, whose top 24 give the uniform of the Poisson count.
    Particle j of ray i draws its range and diameter from the 48 top bits of counter ``(i, sp.slot + j)``.
    All particles of all beams are drawn in one pass; a beam keeps its first strongest.
    """
    xp = array_module(range_m)
    empty = xp.zeros(0, xp.int64), xp.zeros(0, xp.float32), xp.zeros(0, xp.float32)
    mu_max = float(sp.cum[-1])
    if mu_max <= 0 or pre.shape[0] == 0:
        return empty
    cum = xp.asarray(sp.cum, dtype=xp.float32)
    z_end = sp.z0 + sp.dz * (cum.shape[0] - 1)
    u_pre = unit_from_bits(h_pre, 40, 24)
    r_pre = range_m[pre]
    p0 = xp.full(pre.shape, math.exp(-mu_max), xp.float32)  # beams past the table share mu = cum[-1]
    near = xp.nonzero(r_pre < xp.float32(z_end))[0]
    p0[near] = xp.exp(-table_lookup(r_pre[near], sp.z0, sp.dz, cum))
    hit = xp.nonzero(u_pre > p0)[0]  # k >= 1
    if hit.shape[0] == 0:
        return empty
    cand, mu_c = pre[hit], -xp.log(p0[hit])
    k = poisson_inverse(mu_c, u_pre[hit])
    some = k > 0  # u a float32 step above exp(-mu) can still draw no particle (so does the CUDA twin)
    if not bool(some.all()):
        cand, mu_c, k = cand[some], mu_c[some], k[some]
        if cand.shape[0] == 0:
            return empty
    start = xp.cumsum(k) - k
    owner = xp.repeat(xp.arange(cand.shape[0]), k)  # particle m lies in beam owner[m], as its j-th
    j = xp.arange(owner.shape[0]) - start[owner]
    c = cand[owner].astype(xp.uint64) * np.uint64(SLOTS_PER_RAY) + (j + sp.slot).astype(xp.uint64)
    h = hash_bits(key, c)
    uz, ud = unit_from_bits(h, 40, 24), unit_from_bits(h, 16, 24)
    grid = xp.arange(cum.shape[0], dtype=xp.float32) * xp.float32(sp.dz) + xp.float32(sp.z0)
    z = xp.interp(uz * mu_c[owner], cum, grid).astype(xp.float32)
    dmin = min_detectable_diameter_mm(
        z, prm.k_sensor, sp.rho, prm.threshold_w / prm.draw_gain, prm.a_total, prm.d0, prm.th_h, prm.th_v,
        prm.r1, prm.r2, prm.gain_exp, prm.gain_ref_m,
    )  # fmt: skip
    dmin = xp.clip(dmin, sp.d_lo_mm, sp.d_hi_mm)
    span = 1.0 - xp.exp(-sp.lam * (sp.d_hi_mm - dmin))
    d = dmin - xp.log1p(-ud * span) / sp.lam
    fill = xp.minimum((d * 1e-3 / beam_diameter(z, prm.d0, prm.th_h, prm.th_v)) ** 2, 1.0)
    xi = overlap(z, prm.r1, prm.r2)
    if prm.gain_exp != 0.0:  # the receiver's range law, as for a surface's echo
        xi = xi * receiver_gain(z, prm.gain_exp, prm.gain_ref_m)
    p = (prm.k_sensor * sp.rho * fill * xi * xp.exp(-2.0 * prm.a_total * z) / (z * z)).astype(xp.float32)
    cp = np.maximum.reduceat(p, start) if xp is np else _segment_max(p, owner, cand.shape[0])
    top = xp.nonzero(p == cp[owner])[0]
    first = xp.ones(top.shape, bool)
    first[1:] = owner[top[1:]] != owner[top[:-1]]
    return cand, cp, z[top[first]]


def _segment_max(values: Any, owner: Any, n: int) -> Any:
    """Maximum of ``values`` per owner (CuPy has no ``reduceat``)."""
    xp = array_module(values)
    out = xp.zeros(n, values.dtype)
    xp.maximum.at(out, owner, values)
    return out


def ray_hash(key: int, ray: Any, slot: int) -> Any:
    """:func:`hash_bits` of the counters ``(ray, slot)``, with the counter arithmetic folded into one
    multiply-add (``(ray * SLOTS + slot) * golden + key`` modulo 2^64)."""
    z = ray * np.uint64((SLOTS_PER_RAY * int(_GOLDEN)) & _U64)
    z += np.uint64((slot * int(_GOLDEN) + key) & _U64)
    return _finalise(z)


def apply_weather(
    range_m: Any,
    power_w: Any,
    flags: Any,
    refl: Any,
    prm: WeatherKernelParams,
    key: int,
    chunk: int = 32768,
    echoes: tuple[Any, Any, Any] | None = None,
    window: Any = None,
) -> Any:
    """The whole per-ray weather model, in place on float32 ``range_m``/``power_w``, uint8 ``flags`` and
    float32 ``refl`` (effective reflectance). Returns the boolean mask of rays replaced by clutter.

    With ``echoes`` = (range, power, flag) output arrays (float32, float32, uint8, one row per ray) the
    model runs in *extra-echo* mode: no ray is replaced; each ray's strongest clutter echo at or above
    the threshold (drop, flake or fog, whether or not it beats the object) is written there (power 0:
    none), the object keeps its attenuated return, ``range_m`` gets the precipitation range noise
    whatever its power (the caller decides what is detected), and the mask says which rays have one.

    ``window`` (float32, one per ray; None = 1) is each ray's two-way transmission of the sensor's own
    window and the receiver's gain (``Hits.window_transmission``: a blockage, dirt, a weak channel,
    :mod:`rt_lidar.faults.optical`): every clutter echo leaves and comes back through the window, so its
    power is multiplied by it before it meets the threshold and the object's (already dimmed) echo.
    Where it exceeds 1 the tables must hold the particles that it lifts over the threshold
    (``prm.draw_gain`` at least its largest value).

    1. two-way weather extinction on the object's return (RIO); 2. the strongest particle of each
    species and the fog's soft target; 3. RIRD >= DT and RIRD > RIO: the ray reports the clutter point;
    4. extra Gaussian range noise on every detected return.

    Draws per ray i: counter (i, 0) gives the first species' count (bits 40..63) and the range noise
    (bits 0..11 index :data:`NORMAL_TABLE`); counter (i, 1) the second species' count (bits 40..63),
    the fog range jitter (bits 16..39) and the fog echo's fluctuation (bits 0..15: its power is
    exponentially distributed about the soft target's mean, :func:`_fog_powers`); species s's
    particles use slots from ``Species.slot``.

    Two passes: every ray in cache-sized chunks (extinction, its draws, noise, and the few rays that can
    hold a detectable particle or see the fog), then those few rays of the whole scan at once. The result
    does not depend on ``chunk``.
    """
    xp = array_module(range_m)
    n = range_m.shape[0]
    thr = xp.float32(prm.threshold_w)
    lowest = [np.uint64(count_prescreen_bits(sp)) for sp in prm.species]
    pre: list[list[Any]] = [[] for _ in prm.species]
    bits: list[list[Any]] = [[] for _ in prm.species]
    fogs: list[tuple[Any, Any, Any] | None] = []
    noise = xp.zeros(n, xp.float32) if prm.noise_sigma_m > 0 else None
    spans = [(a, min(a + chunk, n)) for a in range(0, n, chunk)]
    for a, b in spans:  # pass 1: every ray
        r, p = range_m[a:b], power_w[a:b]
        ray = xp.arange(a, b, dtype=xp.uint64)
        if prm.a_weather > 0:  # exp(-inf) = 0 on misses, whose power is 0 anyway
            att = r * xp.float32(-2.0 * prm.a_weather)
            xp.exp(att, out=att)
            p *= att
        h0: Any = ray_hash(key, ray, 0) if prm.species or prm.noise_sigma_m > 0 else None
        h1: Any = ray_hash(key, ray, 1) if len(prm.species) > 1 else None
        for s, h in zip(range(len(prm.species)), (h0, h1), strict=False):
            i = xp.nonzero(h >= lowest[s])[0]
            pre[s].append(i + a)
            bits[s].append(h[i])
        f = _fog_candidates(r, prm)
        if f.shape[0]:  # the fog's draws share counter (i, 1) with the second species' count
            b1 = h1[f] if h1 is not None else ray_hash(key, ray[f], 1)
            fp = _fog_powers(b1, prm)
            if window is not None:  # the fog's echo through the sensor's window
                fp *= window[a:b][f]
            keep = fp >= thr
            if echoes is None:  # replacing the object: only where the fog's echo beats it
                keep &= fp > p[f]
            f, b1, fp = f[keep], b1[keep], fp[keep]
            fogs.append((f, _fog_ranges(r, f, b1, prm), fp))
        else:
            fogs.append(None)
        if noise is not None:
            g = noise[a:b] = _range_noise(h0, prm.noise_sigma_m)
            if echoes is None:
                r += g * (p >= thr)
    found = []
    for s, sp in enumerate(prm.species):  # pass 2: the few beams that may hold a detectable particle
        i, cp, cz = particle_returns(range_m, xp.concatenate(pre[s]), xp.concatenate(bits[s]), key, sp, prm)
        if window is not None:  # the particle's echo through the sensor's window
            cp = cp * window[i]
        keep = cp >= thr
        if echoes is None:  # only particles that beat the object change the ray
            keep &= cp > power_w[i]
        found.append((i[keep], cp[keep], cz[keep], sp.flag))
    clutter = xp.zeros(n, dtype=bool)
    for (a, b), fog in zip(spans, fogs, strict=True):  # pass 3: the winning echo of each ray
        local = []
        for i, cp, cz, flag in found:
            lo, hi = (int(v) for v in xp.searchsorted(i, xp.asarray([a, b])))
            local.append((i[lo:hi] - a, cp[lo:hi], cz[lo:hi], flag))
        idx, cp, cz, cf = _strongest_clutter(b - a, local, fog, prm)
        if not idx.shape[0]:
            continue
        if echoes is None:  # the echo's effective reflectance at the particle's own range (as the CUDA twin)
            s_eff = cp * cz * cz * xp.exp(xp.float32(2.0 * prm.a_total) * cz) * xp.float32(1 / prm.k_sensor)
            if prm.gain_exp != 0.0:  # an effective reflectance holds no receiver law (as a surface's)
                s_eff = s_eff / receiver_gain(cz, prm.gain_exp, prm.gain_ref_m)
            refl[a:b][idx] = s_eff
        if noise is not None:
            cz += noise[a:b][idx]
        clutter[a:b][idx] = True
        if echoes is not None:
            echoes[0][a:b][idx], echoes[1][a:b][idx], echoes[2][a:b][idx] = cz, cp, cf
            continue
        range_m[a:b][idx] = cz
        power_w[a:b][idx] = cp
        flags[a:b][idx] = cf
    if echoes is not None and noise is not None:
        range_m += noise
    return clutter


def _range_noise(h0: Any, sigma_m: float) -> Any:
    """Gaussian range noise (m) from bits 0..11 of the rays' counter-0 bits."""
    xp = array_module(h0)
    g = xp.asarray(NORMAL_TABLE)[(h0 & np.uint64(NORMAL_TABLE.size - 1)).astype(xp.int32)]
    g *= xp.float32(sigma_m)
    return g


def _fog_candidates(range_m: Any, prm: WeatherKernelParams) -> Any:
    """Rays that may see the fog's soft target: those that reach past its peak."""
    xp = array_module(range_m)
    fog = prm.fog
    if fog.power_w <= 0:
        return xp.zeros(0, xp.int64)
    return xp.nonzero(range_m > xp.float32(fog.range_m))[0]


def _fog_powers(bits1: Any, prm: WeatherKernelParams) -> Any:
    """The fog echo of each ray: the soft target's mean power times an exponential draw (bits 0..15 of
    the rays' counter-(i, 1) bits). The echo of a volume of droplets is a sum of random phasors, so its
    power fluctuates ray by ray (speckle) and the share of beams with a fog point grows smoothly with
    the density instead of switching on at one visibility."""
    xp = array_module(bits1)
    f = xp.log(unit_from_bits(bits1, 0, 16))
    f *= xp.float32(-prm.fog.power_w)
    return f


def _fog_ranges(range_m: Any, sel: Any, bits1: Any, prm: WeatherKernelParams) -> Any:
    """Range of the fog point of rays ``sel``: the peak plus an exponential spread (bits 16..39 of
    their counter-(i, 1) bits ``bits1``), never beyond the object."""
    xp = array_module(range_m)
    u = unit_from_bits(bits1, 16, 24)
    z = xp.log(u)
    z *= xp.float32(-prm.fog.jitter_m)
    z += xp.float32(prm.fog.range_m)
    return xp.minimum(z, range_m[sel])


def _strongest_clutter(
    n: int, found: list[tuple[Any, Any, Any, int]], fog: tuple[Any, Any, Any] | None, prm: WeatherKernelParams
) -> tuple[Any, Any, Any, Any]:
    """(rays, power, range, flag) of the clutter echo that wins each of ``n`` rays: the strongest of its
    particles (ties to the first species), unless the fog (candidate rays, their fog ranges and fog
    powers) is strictly stronger."""
    if not found:
        if fog is None:
            return (
                np.zeros(0, np.int64),
                np.zeros(0, np.float32),
                np.zeros(0, np.float32),
                np.zeros(0, np.uint8),
            )
        xp = array_module(fog[0])
        return fog[0], fog[2], fog[1], xp.full(fog[0].shape, prm.fog_flag, xp.uint8)
    xp = array_module(found[0][0])
    if len(found) == 1:
        idx, cp, cz, flag = found[0]
        cf = xp.full(idx.shape, flag, xp.uint8)
    else:
        best_p = xp.zeros(n, xp.float32)
        best_z = xp.zeros(n, xp.float32)
        best_f = xp.zeros(n, xp.uint8)
        for i, p, z, flag in found:
            better = p > best_p[i]
            i = i[better]
            best_p[i], best_z[i], best_f[i] = p[better], z[better], flag
        idx = xp.nonzero(best_f)[0]
        cp, cz, cf = best_p[idx], best_z[idx], best_f[idx]
    if fog is None or not fog[0].shape[0]:
        return idx, cp, cz, cf
    fog_sel, fog_z, fog_p = fog
    if idx.shape[0]:
        fog_at = xp.zeros(n, xp.float32)
        fog_at[fog_sel] = fog_p
        stay = ~(cp < fog_at[idx])  # a particle stays unless its ray's fog echo is stronger
        idx, cp, cz, cf = idx[stay], cp[stay], cz[stay], cf[stay]
        taken = xp.zeros(n, bool)
        taken[idx] = True
        free = ~taken[fog_sel]
        fog_sel, fog_z, fog_p = fog_sel[free], fog_z[free], fog_p[free]
    return (
        xp.concatenate([idx, fog_sel]),
        xp.concatenate([cp, fog_p]),
        xp.concatenate([cz, fog_z]),
        xp.concatenate([cf, xp.full(fog_sel.shape, prm.fog_flag, xp.uint8)]),
    )
