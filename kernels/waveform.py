"""Full-waveform returns: echoes of a pulse's sub-rays summed in time, thresholded and peak-picked.

Each echo ``e`` of pulse ``p`` is the emitted pulse shape (Gaussian, FWHM ``width_ns``) delayed by its
round-trip time ``t = 2R/c`` and scaled by its received power ``a``. A pulse's echoes are sorted in time
and split into *clusters* (echoes less than ``6 sigma`` apart, at most ``MAX_SPAN_BINS`` long); each
cluster's waveform ``W(tau) = sum_e a_e g(tau - t_e)`` is sampled on its own grid of ``dt = sigma / 2``
bins (a sparse time axis: two surfaces 40 m apart cost two short grids, not one long one). Local maxima
at or above the threshold are the candidate returns, their time and height refined by a log-parabola
through three samples (exact for one Gaussian echo); their echo pulse width is the time the waveform
stays above the threshold, crossings interpolated log-linearly. Candidates closer than the minimum
separation to a stronger one are suppressed; the return mode picks what is reported.

Three stages, vectorised over pulses x echoes x bins (loops only over the few echo columns, clusters
and candidates, never over rays): :func:`cluster_echoes` and :func:`select_returns` are written for
any ``xp``; :func:`waveform_peaks` is NumPy, with a CUDA twin in :mod:`rt_lidar.kernels.waveform_cuda`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from rt_lidar.kernels.waveform_steps import clusters, peak_runs, sampled_waves
from rt_lidar.kernels.xp import array_module

__all__ = [
    "CLUSTER_GAP_SIGMA",
    "MAX_SPAN_BINS",
    "PAD_SIGMA",
    "SEARCH_SIGMAS",
    "Clusters",
    "Noise",
    "Peaks",
    "Returns",
    "cluster_echoes",
    "detect_noisy_peaks",
    "pack_peaks",
    "pulse_sigma_ns",
    "row_argsort",
    "search_level",
    "select_returns",
    "single_echo_epw_ns",
    "span_buckets",
    "waveform_peaks",
    "waveform_returns",
]

CLUSTER_GAP_SIGMA = 6.0
PAD_SIGMA = 6.0
"""Grid margin before the first and after the last echo of a cluster (covers echoes up to e^18 x the
threshold, so every crossing lies on the grid)."""
MAX_SPAN_BINS = 96
CHUNK_SAMPLES = 1 << 18
SELECT_KINDS = ("strongest", "last", "first", "strongest_last", "two_strongest", "multi")


def pulse_sigma_ns(width_ns: float) -> float:
    """Standard deviation of a Gaussian pulse of full width at half maximum ``width_ns``."""
    return width_ns / (2.0 * math.sqrt(2.0 * math.log(2.0)))


def single_echo_epw_ns(power_w: Any, threshold_w: float, width_ns: float, offset_ns: float = 0.0) -> Any:
    """Echo pulse width of one Gaussian echo of peak ``power_w``: ``offset + 2 sigma sqrt(2 ln(P / T))``
    (0 below the threshold): grows with the log of the power, as measured EPW does."""
    xp = array_module(power_w)
    ratio = xp.maximum(power_w / threshold_w, 1.0)
    return xp.where(
        power_w >= threshold_w, offset_ns + 2.0 * pulse_sigma_ns(width_ns) * xp.sqrt(2.0 * xp.log(ratio)), 0.0
    )


class Clusters(NamedTuple):
    """Echoes sorted in time per pulse and grouped: (P, E) arrays plus the batch's grid shape."""

    order: Any  # (P, E) int64: sorted position -> original echo column
    t_ns: Any  # (P, E) float64 sorted echo times, inf = no echo
    amp: Any  # (P, E) float32 sorted amplitudes
    cid: Any  # (P, E) int64 cluster of each sorted echo (-1 = no echo)
    start_ns: Any  # (P, C) float64 grid start of each cluster, nan = unused
    span_ns: Any  # (P, C) float64 time from a cluster's first to its last echo
    n_clusters: int
    n_bins: int
    dt_ns: float


class Peaks(NamedTuple):
    """Candidate returns (K per pulse, padded): time, height, echo pulse width; valid mask."""

    t_ns: Any  # (P, K) float64
    amp: Any  # (P, K) float32
    epw_ns: Any  # (P, K) float32
    valid: Any  # (P, K) bool


class Returns(NamedTuple):
    """Reported returns, flattened and sorted by (pulse, return_id)."""

    pulse: Any  # (M,) int64
    return_id: Any  # (M,) uint8: rank in range order among the pulse's reported returns
    t_ns: Any  # (M,) float64 round-trip time of the peak
    amp: Any  # (M,) float32 waveform height at the peak (W)
    epw_ns: Any  # (M,) float32
    echo: Any  # (M,) int64 original column of the echo contributing most at the peak


def cluster_echoes(t_ns: Any, amp: Any, width_ns: float) -> Clusters:
    """Sort each pulse's echoes and split them into clusters (see the module docstring)."""
    xp = array_module(t_ns)
    sigma = pulse_sigma_ns(width_ns)
    dt = sigma / 2.0
    t = xp.where(amp > 0, t_ns.astype(xp.float64), xp.inf)
    order = row_argsort(t)
    ts = xp.take_along_axis(t, order, axis=1)
    amps = xp.take_along_axis(amp.astype(xp.float32), order, axis=1)
    p, e = ts.shape
    gap, span = CLUSTER_GAP_SIGMA * sigma, MAX_SPAN_BINS * dt
    found = clusters(ts, gap, span, PAD_SIGMA * sigma) if xp is np else None
    if found is not None:
        cid, start, spans, n_cl, width = found
        n_bins = math.ceil((width + 2 * PAD_SIGMA * sigma) / dt) + 1
        return Clusters(order, ts, amps, cid, start[:, :n_cl], spans[:, :n_cl], n_cl, n_bins, dt)
    has = xp.isfinite(ts)
    cid = xp.full((p, e), -1, dtype=xp.int64)
    start = xp.full((p, e), xp.nan, dtype=xp.float64)
    spans = xp.zeros((p, e), dtype=xp.float64)
    if e == 0 or p == 0:
        return Clusters(order, ts, amps, cid, start[:, :0], spans[:, :0], 0, 1, dt)
    cur = xp.where(has[:, 0], 0, -1)
    first = ts[:, 0].copy()
    cid[:, 0] = cur
    for j in range(1, e):
        new = has[:, j] & ((ts[:, j] - ts[:, j - 1] > gap) | (ts[:, j] - first > span))
        cur = xp.where(new, cur + 1, cur)
        first = xp.where(new, ts[:, j], first)
        cid[:, j] = xp.where(has[:, j], cur, -1)
    n_cl = int(cid.max()) + 1
    lo_t = xp.where(has, ts, xp.inf)
    hi_t = xp.where(has, ts, -xp.inf)
    width = 0.0
    for c in range(max(n_cl, 0)):
        m = cid == c
        lo = xp.min(xp.where(m, lo_t, xp.inf), axis=1)
        hi = xp.max(xp.where(m, hi_t, -xp.inf), axis=1)
        ok = xp.isfinite(lo)
        start[:, c] = xp.where(ok, lo - PAD_SIGMA * sigma, xp.nan)
        spans[:, c] = xp.where(ok, hi - lo, 0.0)
        if bool(ok.any()):
            width = max(width, float(xp.max(xp.where(ok, hi - lo, 0.0))))
    n_bins = math.ceil((width + 2 * PAD_SIGMA * sigma) / dt) + 1
    n_cl = max(n_cl, 0)
    return Clusters(order, ts, amps, cid, start[:, :n_cl], spans[:, :n_cl], n_cl, n_bins, dt)


def row_argsort(a: Any) -> Any:
    """``argsort(a, axis=1)``; rows of two by one comparison, as a sort keeping equal elements in order
    (NaN last) orders them: NumPy's sort does so on two elements, and its per-row cost is most of a
    frame's sort (the common table: an object and a glass echo a pulse)."""
    xp = array_module(a)
    if a.ndim != 2 or a.shape[1] != 2:
        return xp.argsort(a, axis=1)
    first, second = a[:, 0], a[:, 1]
    swap = (second < first) | (xp.isnan(first) & ~xp.isnan(second))
    return xp.stack([swap, ~swap], axis=1).astype(xp.int64)


def _log(x: Any) -> Any:
    xp = array_module(x)
    return xp.log(xp.maximum(x, 1e-38))


def span_buckets(span_ns: Any, sigma: float, dt: float) -> Any:
    """log2 of the bins (at least 32) that clusters of these spans are sampled on: the buckets of
    :func:`waveform_peaks`, whose order within a pulse the candidates keep (the CUDA twin sorts by them
    too, so that each candidate meets the same noise draw). Integer-exact on either array module."""
    xp = array_module(span_ns)
    need = xp.ceil((span_ns + 2 * PAD_SIGMA * sigma) / dt).astype(xp.int64) + 2
    return xp.frexp((xp.maximum(need, 32) - 1).astype(xp.float64))[1].astype(xp.int64)  # ceil(log2(n))


def waveform_peaks(cl: Clusters, width_ns: float, threshold_w: float) -> Peaks:
    """Sample every cluster's waveform and return the peaks at or above ``threshold_w`` (NumPy).

    Clusters are processed in buckets of 32, 64, 128 ... bins by their span, so the many short clusters
    of single surfaces do not pay for the few long ones of grazing footprints."""
    p = cl.t_ns.shape[0]
    if cl.n_clusters == 0 or p == 0:
        z = np.zeros((p, 0))
        return Peaks(z, z.astype(np.float32), z.astype(np.float32), z.astype(bool))
    sigma = pulse_sigma_ns(width_ns)
    dt = cl.dt_ns
    pi, ci = np.nonzero(np.isfinite(cl.start_ns))
    bucket = span_buckets(cl.span_ns[pi, ci], sigma, dt)
    parts = []
    for k in np.unique(bucket).tolist():
        sel = np.nonzero(bucket == k)[0]
        step = max(CHUNK_SAMPLES >> k, 256)  # chunks of items keep the (items, echoes, bins) block in cache
        for a in range(0, sel.size, step):
            s = sel[a : a + step]
            parts.append(_bucket_peaks(cl, pi[s], ci[s], 1 << k, sigma, threshold_w))
    cat = [np.concatenate([q[j] for q in parts]) for j in range(4)]
    order = np.argsort(cat[0], kind="stable")
    return pack_peaks(cat[0][order], cat[1][order], cat[2][order], cat[3][order], p)


def _bucket_peaks(
    cl: Clusters, pi: np.ndarray, ci: np.ndarray, b: int, sigma: float, threshold_w: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Peaks (pulse, time, height, EPW) of the clusters (pi, ci), each sampled on ``b`` bins."""
    dt = cl.dt_ns
    start = cl.start_ns[pi, ci]
    wave = sampled_waves(cl.cid, cl.t_ns, cl.amp, start, pi, ci, b, dt, -0.5 / (sigma * sigma))
    if wave is None:
        wave = _numpy_sampled_waves(cl, start, pi, ci, b, sigma)
    found = peak_runs(wave, threshold_w)
    if found is None:
        ii, bi, below_lo, below_hi = _numpy_peak_runs(wave, threshold_w)
    else:
        ii, bi, below_lo, below_hi = found
    # log-parabolic refinement of time and height
    l0 = _log(np.where(bi > 0, wave[ii, np.maximum(bi - 1, 0)], np.float32(0)))
    l1 = _log(wave[ii, bi])
    l2 = _log(np.where(bi < b - 1, wave[ii, np.minimum(bi + 1, b - 1)], np.float32(0)))
    den = l0 - 2.0 * l1 + l2
    delta = np.where(den < 0, 0.5 * (l0 - l2) / np.where(den < 0, den, -1.0), 0.0)
    delta = np.clip(delta, -0.5, 0.5)
    t_pk = start[ii] + (bi + delta) * dt
    a_pk = np.exp(l1 - 0.25 * (l0 - l2) * delta).astype(np.float32)
    # echo pulse width: the above-threshold run around the peak, crossings interpolated in log
    lt = _crossing(wave, ii, np.maximum(below_lo, 0), threshold_w, dt)
    rt = _crossing(wave, ii, np.minimum(below_hi, b - 1) - 1, threshold_w, dt)
    epw = np.maximum(rt - lt, 0.0).astype(np.float32)
    return pi[ii], t_pk, a_pk, epw


def _numpy_sampled_waves(
    cl: Clusters, start: np.ndarray, pi: np.ndarray, ci: np.ndarray, b: int, sigma: float
) -> np.ndarray:
    """The waveforms (n, b) of the clusters (pi, ci), each sampled on ``b`` bins from its grid start:
    the NumPy twin of :func:`rt_lidar.kernels.waveform_steps.sampled_waves`."""
    # a cluster's echoes are contiguous in time order: gather just those columns
    member = cl.cid[pi] == ci[:, None]
    first = np.argmax(member, axis=1)
    count = member.sum(axis=1)
    m = np.arange(int(count.max()))
    cols = np.minimum(first[:, None] + m[None, :], cl.cid.shape[1] - 1)
    ok = m[None, :] < count[:, None]
    rows = pi[:, None]
    rel = np.where(ok, cl.t_ns[rows, cols] - start[:, None], np.inf).astype(np.float32)
    amp = np.where(ok, cl.amp[rows, cols], 0.0).astype(np.float32)
    grid = (np.arange(b, dtype=np.float32) * np.float32(cl.dt_ns))[None, None, :]
    d = grid - rel[:, :, None]
    return np.asarray((np.exp(np.float32(-0.5 / (sigma * sigma)) * d * d) * amp[:, :, None]).sum(axis=1))


def _numpy_peak_runs(
    wave: np.ndarray, threshold_w: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The local maxima (ii, bi) of ``wave`` at or above the threshold, and for each the last sample
    before it and the first after it below the threshold (-1 and b where there is none): the NumPy
    twin of :func:`rt_lidar.kernels.waveform_steps.peak_runs`."""
    n, b = wave.shape
    above = wave >= threshold_w
    left = np.concatenate([np.zeros((n, 1), np.float32), wave[:, :-1]], axis=1)
    right = np.concatenate([wave[:, 1:], np.zeros((n, 1), np.float32)], axis=1)
    ii, bi = np.nonzero(above & (wave >= left) & (wave > right))
    idx = np.arange(b)
    below_lo = np.maximum.accumulate(np.where(~above, idx, -1), axis=1)[ii, bi]
    below_hi = np.flip(np.minimum.accumulate(np.flip(np.where(~above, idx, b), axis=1), axis=1), axis=1)[
        ii, bi
    ]
    return ii, bi, below_lo, below_hi


def _crossing(wave: np.ndarray, ii: np.ndarray, j: np.ndarray, thr: float, dt: float) -> np.ndarray:
    """Time (bins * dt from the grid start) where the waveform crosses ``thr`` between bins j and j + 1."""
    jn = np.minimum(j + 1, wave.shape[1] - 1)
    y0, y1 = _log(wave[ii, j]), _log(wave[ii, jn])
    den = y1 - y0
    frac = np.where(np.abs(den) > 1e-12, (math.log(thr) - y0) / np.where(np.abs(den) > 1e-12, den, 1.0), 0.0)
    return (j + np.clip(frac, 0.0, 1.0)) * dt


def pack_peaks(pi: Any, t: Any, a: Any, epw: Any, p: int) -> Peaks:
    """Scatter flat candidates (sorted by pulse, as ``nonzero`` yields them) into padded (P, K) arrays."""
    xp = array_module(t)
    n = int(pi.shape[0])
    if n == 0:
        z = xp.zeros((p, 0))
        return Peaks(z, z.astype(xp.float32), z.astype(xp.float32), z.astype(bool))
    counts = xp.bincount(pi, minlength=p)
    starts = xp.cumsum(counts) - counts
    rank = xp.arange(n) - starts[pi]
    k = int(counts.max())
    out_t = xp.full((p, k), xp.inf)
    out_a = xp.zeros((p, k), xp.float32)
    out_e = xp.zeros((p, k), xp.float32)
    valid = xp.zeros((p, k), bool)
    out_t[pi, rank], out_a[pi, rank], out_e[pi, rank], valid[pi, rank] = t, a, epw, True
    return Peaks(out_t, out_a, out_e, valid)


def select_returns(pk: Peaks, kind: str, min_separation_ns: float, max_returns: int = 3) -> tuple[Any, Any]:
    """Suppress candidates within ``min_separation_ns`` of a stronger one, then pick by ``kind``
    (``SELECT_KINDS``). Returns ``(index (P, R) into the K candidates, valid (P, R))``, range-ordered."""
    xp = array_module(pk.amp)
    p, k = pk.amp.shape
    if kind not in SELECT_KINDS:
        raise ValueError(f"unknown return selection {kind!r}; expected one of {SELECT_KINDS}")
    if k == 0:
        return xp.zeros((p, 0), xp.int64), xp.zeros((p, 0), bool)
    strength = xp.where(pk.valid, pk.amp.astype(xp.float64), -1.0)
    by_amp = xp.argsort(-strength, axis=1)
    kept = xp.zeros((p, k), bool)
    t_sorted = xp.take_along_axis(pk.t_ns, by_amp, axis=1)
    v_sorted = xp.take_along_axis(pk.valid, by_amp, axis=1)
    for j in range(k):  # greedy from the strongest: a candidate survives if no kept one is too close
        close = kept[:, :j] & (xp.abs(t_sorted[:, :j] - t_sorted[:, j : j + 1]) < min_separation_ns)
        kept[:, j] = v_sorted[:, j] & ~close.any(axis=1)
    rows = xp.arange(p)[:, None]
    keep = xp.zeros((p, k), bool)
    keep[rows, by_amp] = kept
    amp = xp.where(keep, pk.amp.astype(xp.float64), -1.0)
    t_far = xp.where(keep, pk.t_ns, -xp.inf)
    t_near = xp.where(keep, pk.t_ns, xp.inf)
    any_kept = keep.any(axis=1)
    strongest = xp.argmax(amp, axis=1)
    amp_rank = xp.argsort(-amp, axis=1)
    if kind == "strongest":
        sel, ok = strongest[:, None], any_kept[:, None]
    elif kind == "last":
        sel, ok = xp.argmax(t_far, axis=1)[:, None], any_kept[:, None]
    elif kind == "first":
        sel, ok = xp.argmin(t_near, axis=1)[:, None], any_kept[:, None]
    elif kind == "strongest_last":
        last = xp.argmax(t_far, axis=1)
        second = amp_rank[:, 1] if k > 1 else strongest
        other = xp.where(last == strongest, second, last)
        n_kept = keep.sum(axis=1)
        sel = xp.stack([strongest, other], axis=1)
        ok = xp.stack([any_kept, n_kept > 1], axis=1)
    else:
        r = 2 if kind == "two_strongest" else max_returns
        r = min(r, k)
        sel = amp_rank[:, :r]
        ok = xp.take_along_axis(keep, sel, axis=1)
    # range order within each pulse
    ts = xp.where(ok, xp.take_along_axis(pk.t_ns, sel, axis=1), xp.inf)
    o = row_argsort(ts)
    return xp.take_along_axis(sel, o, axis=1), xp.take_along_axis(ok, o, axis=1)


SEARCH_SIGMAS = 5.0
"""With receiver noise, peaks are searched down to this many noise sigmas below the threshold."""


class Noise(NamedTuple):
    """Receiver noise of a batch: detection becomes a probability (:func:`waveform_returns`)."""

    sigma_w: Any  # (P,) noise floor of each pulse (W, 1 sigma: dark + background shot noise)
    shot_w: float  # signal shot noise: sigma^2 grows by shot_w per watt of echo
    standard_normal: Any  # (P, D) N(0, 1) draws, one per candidate peak (D >= the candidates a pulse has)


def detect_noisy_peaks(
    pk: Peaks, noise: Noise, threshold_w: float, search_w: float, width_ns: float
) -> Peaks:
    """Candidates found down to ``search_w`` that the noise carries over ``threshold_w``: a peak of height
    ``a`` is detected when ``a + sigma z >= T`` (``sigma^2 = sigma_w^2 + shot_w a``), so P_d = Q((T - a)
    / sigma) rises smoothly through 1/2 at the threshold; its echo pulse width is taken back from the
    search level to the threshold (exact for one Gaussian echo: EPW^2 falls by 8 sigma_p^2 ln(T / S))."""
    xp = array_module(pk.amp)
    p, k = pk.amp.shape
    z = noise.standard_normal
    if z.shape[1] < k:
        z = xp.concatenate([z, xp.zeros((p, k - z.shape[1]), z.dtype)], axis=1)
    a = pk.amp.astype(xp.float64)
    s = xp.sqrt(noise.sigma_w[:, None] ** 2 + noise.shot_w * xp.maximum(a, 0.0))
    valid = pk.valid & (a + s * z[:, :k] >= threshold_w)
    sig = pulse_sigma_ns(width_ns)
    epw2 = pk.epw_ns.astype(xp.float64) ** 2 - 8.0 * sig * sig * math.log(threshold_w / search_w)
    return Peaks(pk.t_ns, pk.amp, xp.sqrt(xp.maximum(epw2, 0.0)).astype(xp.float32), valid)


def waveform_returns(
    t_ns: Any,
    amp: Any,
    width_ns: float,
    threshold_w: float,
    kind: str,
    min_separation_ns: float,
    max_returns: int = 3,
    noise: Noise | None = None,
    peaks_kernel: Any = None,
) -> Returns:
    """The reported returns of (P, E) echoes (times in ns, amplitudes in W; amp 0 = no echo); with
    ``noise``, detection is a probability (:func:`detect_noisy_peaks`), without it a step at the
    threshold. ``peaks_kernel``: the CUDA peak search's launcher for NumPy arrays (its source built for
    the CPU, :class:`rt_lidar.kernels.cuda_host.HostKernel`); None = NumPy's, or CuPy's for CuPy arrays."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf of absent echoes is masked out
        return _waveform_returns(
            t_ns, amp, width_ns, threshold_w, kind, min_separation_ns, max_returns, noise, peaks_kernel
        )


def search_level(threshold_w: float, noise: Noise | None) -> float:
    """The level peaks are searched down to, the whole batch's: the threshold, or with ``noise``
    :data:`SEARCH_SIGMAS` of its largest noise below it (at least 5 % of it)."""
    if noise is None or not int(noise.sigma_w.shape[0]):
        return threshold_w
    xp = array_module(noise.sigma_w)
    s_max = math.sqrt(float(xp.max(noise.sigma_w)) ** 2 + noise.shot_w * threshold_w)
    return max(threshold_w - SEARCH_SIGMAS * s_max, 0.05 * threshold_w)


def _waveform_returns(
    t_ns: Any,
    amp: Any,
    width_ns: float,
    threshold_w: float,
    kind: str,
    min_separation_ns: float,
    max_returns: int,
    noise: Noise | None,
    peaks_kernel: Any = None,
    search: float | None = None,
) -> Returns:
    """:func:`waveform_returns` (without its error state), peaks searched down to ``search`` (None: the
    batch's :func:`search_level`)."""
    xp = array_module(t_ns)
    if noise is not None:  # the draws and floors onto the batch's device (host arrays from the caller)
        noise = Noise(xp.asarray(noise.sigma_w), noise.shot_w, xp.asarray(noise.standard_normal))
    if search is None:
        search = search_level(threshold_w, noise)
    cl = cluster_echoes(t_ns, amp, width_ns)
    if xp is np and peaks_kernel is None:
        pk = waveform_peaks(cl, width_ns, search)
    else:
        from rt_lidar.kernels.waveform_cuda import waveform_peaks_cuda

        pk = waveform_peaks_cuda(cl, width_ns, search, kernel=peaks_kernel)
    if noise is not None:
        pk = detect_noisy_peaks(pk, noise, threshold_w, search, width_ns)
    sel, ok = select_returns(pk, kind, min_separation_ns, max_returns)
    pulse, col = xp.nonzero(ok)
    cand = sel[pulse, col]
    rid = (xp.cumsum(ok, axis=1) - 1)[pulse, col].astype(xp.uint8)
    t_pk = pk.t_ns[pulse, cand]
    # the echo that contributes most at the peak names the surface (segment, material, flags)
    sigma = pulse_sigma_ns(width_ns)
    d = cl.t_ns[pulse] - t_pk[:, None]
    contrib = cl.amp[pulse] * xp.exp(-0.5 * xp.minimum(d * d / (sigma * sigma), 700.0))
    best = xp.argmax(xp.where(xp.isfinite(d), contrib, -1.0), axis=1)
    echo = cl.order[pulse, best]
    return Returns(pulse.astype(xp.int64), rid, t_pk, pk.amp[pulse, cand], pk.epw_ns[pulse, cand], echo)
