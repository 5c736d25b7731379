"""The fused CUDA path of the weather model: one thread per ray, one kernel launch per batch.

It is the twin of :func:`rt_lidar.kernels.weather.apply_weather` (the NumPy reference): the same counter-based
random numbers (SplitMix64 of ``key + counter * golden``, counters ``ray * SLOTS_PER_RAY + slot``), the
same Poisson inversion, the same sampling of the thinned drop process from the tabulated cumulative
count, the same RIRD / RIO / DT decision, the same fog soft target and range noise. It computes in
float32 where the reference's ``interp`` uses float64, so a few outcomes exactly at a threshold may
differ; the parity test bounds that. CuPy is imported only when this module is used.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from rt_lidar.kernels.weather import MAX_PARTICLES, SLOTS_PER_RAY, WeatherKernelParams
from rt_lidar.kernels.weather_rays import NORMAL_TABLE
from rt_lidar.kernels.xp import array_module

__all__ = ["CUDA_SOURCE", "apply_weather_cuda"]

CUDA_SOURCE = r"""
#define KMAX %(kmax)d
#define SLOTS %(slots)dULL
typedef unsigned long long u64;

__device__ __forceinline__ u64 mix(u64 key, u64 c) {
    u64 z = c * 0x9E3779B97F4A7C15ULL + key;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
__device__ __forceinline__ float unit24(u64 z, int shift) {
    return ((float)((z >> shift) & 0xFFFFFFULL) + 0.5f) * 5.9604644775390625e-08f;
}
__device__ __forceinline__ float unit16(u64 z, int shift) {
    return ((float)((z >> shift) & 0xFFFFULL) + 0.5f) * 1.52587890625e-05f;
}
__device__ __forceinline__ float lookup(const float* t, int n, float z0, float inv_dz, float z) {
    float x = fminf(fmaxf((z - z0) * inv_dz, 0.0f), (float)n - 1.001f);
    int i = (int)x;
    float f = x - (float)i;
    return t[i] + f * (t[i + 1] - t[i]);
}
__device__ __forceinline__ float inverse(const float* cum, int n, float z0, float dz, float c) {
    if (c <= cum[0]) return z0;
    if (c >= cum[n - 1]) return z0 + dz * (float)(n - 1);
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) { int m = (lo + hi) >> 1; if (cum[m] <= c) lo = m; else hi = m; }
    float g0 = z0 + dz * (float)lo, g1 = z0 + dz * (float)hi;
    float w = cum[hi] - cum[lo];
    return w > 0.0f ? g0 + (c - cum[lo]) / w * (g1 - g0) : g0;
}
__device__ __forceinline__ float overlap(float z, float r1, float r2) {
    return fminf(fmaxf((z - r1) / fmaxf(r2 - r1, 1e-9f), 0.0f), 1.0f);
}
__device__ __forceinline__ float rx_gain(float z, float gexp, float gref) {
    return gexp != 0.0f ? powf(z / gref, gexp) : 1.0f;
}
__device__ __forceinline__ float beam_d(float z, float d0, float thh, float thv) {
    return sqrtf((d0 + thh * z) * (d0 + thv * z));
}

struct Sp { const float* cum; int n; float z0, dz, p0_far, lam, dlo, dhi, rho; int flag, slot; };

__device__ void particles(const Sp& s, float range, float u, u64 key, u64 ray,
                          float k, float thr, float a_tot, float d0, float thh, float thv,
                          float r1, float r2, float gexp, float gref, float win,
                          float* best_p, float* best_z, int* best_f) {
    if (s.n < 2 || s.cum[s.n - 1] <= 0.0f) return;
    float z_end = s.z0 + s.dz * (float)(s.n - 1);
    float p0 = range < z_end ? expf(-lookup(s.cum, s.n, s.z0, 1.0f / s.dz, range)) : s.p0_far;
    if (!(u > p0)) return;
    float mu = -logf(p0);
    float p = expf(-mu), cdf = p;
    int kk = 0;
    for (int j = 1; j <= KMAX; ++j) {
        if (u > cdf) { kk++; p = p * mu / (float)j; cdf += p; } else break;
    }
    float cp = 0.0f, cz = 0.0f;
    for (int j = 0; j < kk; ++j) {
        u64 h = mix(key, ray * SLOTS + (u64)(s.slot + j));
        float uz = unit24(h, 40), ud = unit24(h, 16);
        float z = inverse(s.cum, s.n, s.z0, s.dz, uz * mu);
        float xi = overlap(z, r1, r2);
        if (gexp != 0.0f) xi *= rx_gain(z, gexp, gref);
        float gain = k * s.rho * xi * expf(-2.0f * a_tot * z) / (z * z);
        float q = thr / fmaxf(gain, 1e-30f);
        float bd = beam_d(z, d0, thh, thv);
        float dmin = q < 1.0f ? bd * 1e3f * sqrtf(q) : 1e30f;
        dmin = fminf(fmaxf(dmin, s.dlo), s.dhi);
        float span = 1.0f - expf(-s.lam * (s.dhi - dmin));
        float d = dmin - log1pf(-ud * span) / s.lam;
        float r = d * 1e-3f / bd;
        float fill = fminf(r * r, 1.0f);
        float pw = k * s.rho * fill * xi * expf(-2.0f * a_tot * z) / (z * z);
        if (pw > cp) { cp = pw; cz = z; }
    }
    cp *= win;  // the strongest particle's echo through the sensor's window
    if (cp > *best_p) { *best_p = cp; *best_z = cz; *best_f = s.flag; }
}

extern "C" __global__ void weather_kernel(
    float* range_m, float* power_w, unsigned char* flags, float* refl, unsigned char* clutter, int n,
    u64 key, int nsp,
    const float* cum0, int n0, float z00, float dz0, float pf0, float lam0, float lo0, float hi0,
    float rho0, int flag0, int slot0,
    const float* cum1, int n1, float z01, float dz1, float pf1, float lam1, float lo1, float hi1,
    float rho1, int flag1, int slot1,
    float k, float thr, float a_w, float a_tot, float d0, float thh, float thv, float r1, float r2,
    float gexp, float gref,
    float fog_p, float fog_z, float fog_j, int fog_flag, float sigma, const float* normal,
    int extra, float* c_range, float* c_power, unsigned char* c_flag,
    const float* window, int has_window, float thr_draw)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i >= n) return;
    u64 ray = (u64)i;
    float range = range_m[i];
    float power = power_w[i];
    if (a_w > 0.0f) power *= expf(-2.0f * a_w * range);
    u64 h0 = mix(key, ray * SLOTS);
    u64 h1 = (nsp > 1 || fog_p > 0.0f) ? mix(key, ray * SLOTS + 1ULL) : 0ULL;
    float win = has_window ? window[i] : 1.0f;  // the sensor's window, two-way (1: clean)
    float bp = 0.0f, bz = 0.0f;
    int bf = 0;
    if (nsp > 0) {
        Sp s0 = {cum0, n0, z00, dz0, pf0, lam0, lo0, hi0, rho0, flag0, slot0};
        particles(s0, range, unit24(h0, 40), key, ray, k, thr_draw, a_tot, d0, thh, thv, r1, r2, gexp,
                  gref, win, &bp, &bz, &bf);
    }
    if (nsp > 1) {
        Sp s1 = {cum1, n1, z01, dz1, pf1, lam1, lo1, hi1, rho1, flag1, slot1};
        particles(s1, range, unit24(h1, 40), key, ray, k, thr_draw, a_tot, d0, thh, thv, r1, r2, gexp,
                  gref, win, &bp, &bz, &bf);
    }
    if (fog_p > 0.0f && range > fog_z) {
        float fp = -logf(unit16(h1, 0)) * fog_p;  // speckle: exponential about the soft target's mean
        if (has_window) fp *= win;
        if (bp < fp) {
            float jitter = -logf(unit24(h1, 16));
            bp = fp;
            bz = fminf(fog_z + fog_j * jitter, range);
            bf = fog_flag;
        }
    }
    float g = sigma > 0.0f ? normal[(int)(h0 & 4095ULL)] * sigma : 0.0f;
    if (extra) {
        unsigned char has = bp >= thr ? 1 : 0;
        if (has) { c_range[i] = bz + g; c_power[i] = bp; c_flag[i] = (unsigned char)bf; }
        range_m[i] = range + g;
        power_w[i] = power;
        clutter[i] = has;
        return;
    }
    unsigned char won = (bp >= thr && bp > power) ? 1 : 0;
    if (won) {
        range = bz;
        power = bp;
        flags[i] = (unsigned char)bf;
        refl[i] = bp * bz * bz / (k * expf(-2.0f * a_tot * bz) * rx_gain(bz, gexp, gref));
    }
    if (sigma > 0.0f) range += g * (power >= thr ? 1.0f : 0.0f);
    range_m[i] = range;
    power_w[i] = power;
    clutter[i] = won;
}
""".replace("%(kmax)d", str(MAX_PARTICLES)).replace("%(slots)d", str(SLOTS_PER_RAY))


@functools.cache
def _kernel() -> Any:
    import cupy as cp

    return cp.RawKernel(CUDA_SOURCE, "weather_kernel")


def _species_args(prm: WeatherKernelParams, s: int, xp: Any) -> list[Any]:
    f, i = np.float32, np.int32
    if s >= len(prm.species):
        return [xp.zeros(2, xp.float32), i(0), f(0), f(1), f(1), f(1), f(0), f(0), f(0), i(0), i(0)]
    sp = prm.species[s]
    cum = xp.asarray(np.asarray(sp.cum, np.float32))
    p0_far = np.exp(-np.float32(sp.cum[-1]))
    return [
        cum,
        i(cum.shape[0]),
        f(sp.z0),
        f(sp.dz),
        f(p0_far),
        f(sp.lam),
        f(sp.d_lo_mm),
        f(sp.d_hi_mm),
        f(sp.rho),
        i(sp.flag),
        i(sp.slot),
    ]


def apply_weather_cuda(
    range_m: Any,
    power_w: Any,
    flags: Any,
    refl: Any,
    prm: WeatherKernelParams,
    key: int,
    kernel: Any = None,
    echoes: tuple[Any, Any, Any] | None = None,
    window: Any = None,
) -> Any:
    """CuPy twin of :func:`rt_lidar.kernels.weather_rays.apply_weather` (same arguments, same in-place effect,
    ``echoes`` the same extra-echo mode, ``window`` the same per-ray window gain).

    ``kernel`` launches :data:`CUDA_SOURCE` (default: CuPy's ``RawKernel``); with NumPy arrays and
    :class:`rt_lidar.kernels.cuda_host.HostKernel` the same source and this same wrapper run on the CPU.
    """
    xp = array_module(range_m)
    n = int(range_m.shape[0])
    clutter = xp.zeros(n, xp.uint8)
    if n == 0:
        return clutter.astype(bool)
    f, i = np.float32, np.int32
    fog = prm.fog
    args = [
        range_m,
        power_w,
        flags,
        refl,
        clutter,
        i(n),
        np.uint64(key & 0xFFFFFFFFFFFFFFFF),
        i(len(prm.species)),
        *_species_args(prm, 0, xp),
        *_species_args(prm, 1, xp),
        f(prm.k_sensor),
        f(prm.threshold_w),
        f(prm.a_weather),
        f(prm.a_total),
        f(prm.d0),
        f(prm.th_h),
        f(prm.th_v),
        f(prm.r1),
        f(prm.r2),
        f(prm.gain_exp),
        f(prm.gain_ref_m),
        f(fog.power_w),
        f(fog.range_m),
        f(fog.jitter_m),
        i(prm.fog_flag),
        f(prm.noise_sigma_m),
        xp.asarray(NORMAL_TABLE),
        i(echoes is not None),
        *(echoes if echoes is not None else (range_m, power_w, flags)),
        window if window is not None else power_w,  # (not read without a window)
        i(window is not None),
        f(prm.threshold_w / prm.draw_gain),
    ]
    block = 256
    (kernel or _kernel())(((n + block - 1) // block,), (block,), tuple(args))
    return clutter.astype(bool)
