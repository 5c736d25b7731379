"""CUDA twin of :func:`rt_lidar.kernels.waveform.waveform_peaks` (CuPy ``RawKernel``; CuPy imported lazily).

One thread per (pulse, cluster) samples that cluster's waveform on its grid, finds the local maxima at
or above the threshold, refines each by the same log-parabola and measures its echo pulse width by
walking to the threshold crossings; the candidates are then packed exactly as on the CPU. The other
stages of :func:`rt_lidar.kernels.waveform.waveform_returns` run on CuPy arrays unchanged.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from rt_lidar.kernels.waveform import Clusters, Peaks, pack_peaks, pulse_sigma_ns, span_buckets
from rt_lidar.kernels.xp import array_module

__all__ = ["CUDA_SOURCE", "waveform_peaks_cuda"]

CUDA_SOURCE = r"""
extern "C" __global__ void wf_peaks(
    const double* t, const float* amp, const long long* cid, const double* start,
    int P, int E, int C, int B, double dt, double sigma, float thr,
    float* wave, unsigned char* is_peak, double* t_pk, float* a_pk, float* epw)
{
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= (long long)P * C) return;
    int p = (int)(tid / C), c = (int)(tid % C);
    double s0 = start[(long long)p * C + c];
    long long base = tid * B;
    if (isnan(s0)) { for (int b = 0; b < B; ++b) { wave[base + b] = 0.f; is_peak[base + b] = 0; } return; }
    double inv = -0.5 / (sigma * sigma);
    for (int b = 0; b < B; ++b) {
        double tau = s0 + b * dt;
        float w = 0.f;
        for (int e = 0; e < E; ++e) {
            long long k = (long long)p * E + e;
            if (cid[k] != c) continue;
            double d = tau - t[k];
            w += (float)exp(inv * d * d) * amp[k];
        }
        wave[base + b] = w;
        is_peak[base + b] = 0;
    }
    double lthr = log((double)thr);
    for (int b = 0; b < B; ++b) {
        float w = wave[base + b];
        float l = b > 0 ? wave[base + b - 1] : 0.f;
        float r = b < B - 1 ? wave[base + b + 1] : 0.f;
        if (!(w >= thr && w >= l && w > r)) continue;
        double l0 = log(fmax((double)l, 1e-38)), l1 = log(fmax((double)w, 1e-38));
        double l2 = log(fmax((double)r, 1e-38));
        double den = l0 - 2.0 * l1 + l2;
        double delta = den < 0 ? 0.5 * (l0 - l2) / den : 0.0;
        delta = fmin(fmax(delta, -0.5), 0.5);
        int jl = b; while (jl >= 0 && wave[base + jl] >= thr) --jl;
        int jr = b; while (jr < B && wave[base + jr] >= thr) ++jr;
        jl = jl < 0 ? 0 : jl;
        int jh = (jr > B - 1 ? B - 1 : jr) - 1;
        double cross[2]; int js[2] = {jl, jh};
        for (int q = 0; q < 2; ++q) {
            int j = js[q], jn = j + 1 < B ? j + 1 : B - 1;
            double y0 = log(fmax((double)wave[base + j], 1e-38));
            double y1 = log(fmax((double)wave[base + jn], 1e-38));
            double dd = y1 - y0;
            double f = fabs(dd) > 1e-12 ? (lthr - y0) / dd : 0.0;
            cross[q] = (j + fmin(fmax(f, 0.0), 1.0)) * dt;
        }
        is_peak[base + b] = 1;
        t_pk[base + b] = s0 + (b + delta) * dt;
        a_pk[base + b] = (float)exp(l1 - 0.25 * (l0 - l2) * delta);
        epw[base + b] = (float)fmax(cross[1] - cross[0], 0.0);
    }
}
"""


@functools.cache
def _kernel() -> Any:
    import cupy as cp

    return cp.RawKernel(CUDA_SOURCE, "wf_peaks")


def waveform_peaks_cuda(cl: Clusters, width_ns: float, threshold_w: float, kernel: Any = None) -> Peaks:
    """:func:`rt_lidar.kernels.waveform.waveform_peaks` for CuPy clusters (same candidates, same packing).

    ``kernel`` launches :data:`CUDA_SOURCE` (default: CuPy's ``RawKernel``); with NumPy clusters and
    :class:`rt_lidar.kernels.cuda_host.HostKernel` the same source and this same wrapper run on the CPU.
    """
    cp = array_module(cl.t_ns)
    p, e = cl.t_ns.shape
    c, b = cl.n_clusters, cl.n_bins
    if c == 0 or p == 0:
        z = cp.zeros((p, 0))
        return Peaks(z, z.astype(cp.float32), z.astype(cp.float32), z.astype(bool))
    wave = cp.empty((p, c, b), cp.float32)
    is_peak = cp.empty((p, c, b), cp.uint8)
    t_pk = cp.empty((p, c, b), cp.float64)
    a_pk = cp.empty((p, c, b), cp.float32)
    epw = cp.empty((p, c, b), cp.float32)
    n = p * c
    threads = 128
    args = (
        cp.ascontiguousarray(cl.t_ns, cp.float64),
        cp.ascontiguousarray(cl.amp, cp.float32),
        cp.ascontiguousarray(cl.cid, cp.int64),
        cp.ascontiguousarray(cl.start_ns, cp.float64),
        cp.int32(p),
        cp.int32(e),
        cp.int32(c),
        cp.int32(b),
        cp.float64(cl.dt_ns),
        cp.float64(pulse_sigma_ns(width_ns)),
        cp.float32(threshold_w),
        wave,
        is_peak,
        t_pk,
        a_pk,
        epw,
    )
    (kernel or _kernel())((math.ceil(n / threads),), (threads,), args)
    pi, ci, bi = cp.nonzero(is_peak)
    # the NumPy twin lists a pulse's candidates by span bucket first, then cluster and bin: the same
    # order here, or a pulse with a short and a long cluster would pair its peaks with other noise draws
    bucket = span_buckets(cl.span_ns[pi, ci], pulse_sigma_ns(width_ns), cl.dt_ns)
    key = ((pi * 64 + bucket) * c + ci) * b + bi
    o = cp.argsort(key)
    pi, ci, bi = pi[o], ci[o], bi[o]
    return pack_peaks(pi, t_pk[pi, ci, bi], a_pk[pi, ci, bi], epw[pi, ci, bi], p)
