"""The waveform search's compiled integer steps (``rt_lidar.kernels._waveform_steps``) give the NumPy code's
results exactly: the peaks of every kind of sampled waveform and the runs above the threshold around
them, and whole waveform returns with the step on and off."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from rt_lidar.kernels import waveform_steps
from rt_lidar.kernels.waveform import _numpy_peak_runs, waveform_returns

needs_compiled = pytest.mark.skipif(waveform_steps._c is None, reason="_waveform_steps was not built")


@pytest.fixture
def numpy_only() -> Iterator[None]:
    waveform_steps.enabled = False
    try:
        yield
    finally:
        waveform_steps.enabled = True


def _odd_waves(n: int, b: int, seed: int) -> np.ndarray:
    """Smooth bumps, plateaus (equal neighbours at and around the threshold), NaNs, zeros, values one
    float32 step either side of the threshold, peaks at both ends."""
    rng = np.random.default_rng(seed)
    x = np.arange(b, dtype=np.float32)
    centre = rng.uniform(-2, b + 2, (n, 2)).astype(np.float32)
    w = np.exp(-0.5 * ((x[None, None, :] - centre[:, :, None]) / 2.5) ** 2) * rng.uniform(0, 2, (n, 2, 1))
    wave = w.sum(axis=1).astype(np.float32)
    flat = rng.random(n) < 0.2
    wave[flat, : b // 2] = np.float32(1.0)  # a plateau at the threshold
    wave[rng.random((n, b)) < 0.02] = np.nan
    wave[rng.random((n, b)) < 0.05] = 0.0
    near = rng.random((n, b)) < 0.05
    wave[near] = np.nextafter(np.float32(1.0), np.float32(rng.choice([0.0, 2.0])))
    return np.ascontiguousarray(wave)


@needs_compiled
@pytest.mark.parametrize("b", [1, 2, 3, 32, 64, 257])
@pytest.mark.parametrize("seed", range(3))
def test_peak_runs_are_numpy_s(b: int, seed: int) -> None:
    wave = _odd_waves(2_000, b, seed)
    for threshold in (1.0, 1.0 + 1e-9, 0.3, 1e-30):  # 1 + 1e-9 is 1.0 in float32, as NumPy compares
        got = waveform_steps.peak_runs(wave, threshold)
        want = _numpy_peak_runs(wave, threshold)
        assert got is not None
        for g, w in zip(got, want, strict=True):
            assert g.dtype == np.int64 and np.array_equal(g, w)
    assert b < 3 or got[0].size > 0


@needs_compiled
def test_peak_runs_takes_only_contiguous_float32_rows() -> None:
    wave = _odd_waves(10, 8, 0)
    assert waveform_steps.peak_runs(wave.astype(np.float64), 1.0) is None
    assert waveform_steps.peak_runs(wave[:, ::2], 1.0) is None
    assert waveform_steps.peak_runs(wave.ravel(), 1.0) is None
    with pytest.raises(ValueError, match="wave must be 90 contiguous items"):
        waveform_steps._c.peak_runs(wave, 10, 9, 1.0, *(np.empty(90, np.int64) for _ in range(4)))


def _echo_tables(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(P, E) echo times and powers: single echoes, close pairs that merge, far pairs, absent echoes."""
    rng = np.random.default_rng(seed)
    p, e = 5_000, 4
    t = rng.uniform(50.0, 800.0, (p, 1)) + np.cumsum(rng.exponential(8.0, (p, e)), axis=1)
    a = (rng.uniform(0.0, 3e-7, (p, e)) * (rng.random((p, e)) < 0.7)).astype(np.float32)
    t[rng.random((p, e)) < 0.1] = np.inf
    return t, a


@needs_compiled
@pytest.mark.parametrize("kind", ["strongest", "last", "strongest_last", "multi"])
def test_whole_returns_are_the_same_with_the_step_on_and_off(kind: str, numpy_only: None) -> None:
    t, a = _echo_tables(1)
    want = waveform_returns(t, a, 6.0, 5e-9, kind, 6.0)
    waveform_steps.enabled = True
    got = waveform_returns(t, a, 6.0, 5e-9, kind, 6.0)
    assert got.pulse.size > 1_000
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


def _sorted_times(p: int, e: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Echo tables whose sorted rows have gaps at, just under and just over the cluster gap, long
    trains past the span limit, equal times, no echo (inf, NaN, amplitude 0) and rows without any."""
    rng = np.random.default_rng(seed)
    from rt_lidar.kernels.waveform import CLUSTER_GAP_SIGMA, MAX_SPAN_BINS, pulse_sigma_ns

    gap = CLUSTER_GAP_SIGMA * pulse_sigma_ns(6.0)
    steps = rng.choice([0.0, 0.3, gap, np.nextafter(gap, 0), np.nextafter(gap, 99), 3 * gap, 2.0], (p, e))
    t = 100.0 + rng.uniform(0, 5, (p, 1)) + np.cumsum(steps, axis=1)
    a = rng.uniform(0, 1e-6, (p, e)).astype(np.float32)
    a[rng.random((p, e)) < 0.15] = 0.0
    t[rng.random((p, e)) < 0.1] = np.inf
    t[rng.random((p, e)) < 0.02] = np.nan
    t[: p // 20] = np.inf
    # exactly at the limits: a gap of exactly gap after 0, and a train reaching exactly span after 0
    if e >= 2:
        t[p // 20 : p // 10, :2] = [0.0, gap]
    if e >= 12:
        span = MAX_SPAN_BINS * pulse_sigma_ns(6.0) / 2.0
        t[p // 10 : p // 5, :11] = np.append(np.linspace(0.0, span - gap / 2, 10), span)
        t[p // 10 : p // 5, 11:] = np.inf
    a[p // 20 : p // 5] = 1e-7
    return t, a


@needs_compiled
@pytest.mark.parametrize("e", [1, 2, 5, 12, 40])
@pytest.mark.parametrize("seed", range(3))
def test_clusters_are_numpy_s(e: int, seed: int) -> None:
    from rt_lidar.kernels.waveform import cluster_echoes

    t, a = _sorted_times(3_000, e, seed)
    with np.errstate(invalid="ignore"):
        got = cluster_echoes(t, a, 6.0)
        waveform_steps.enabled = False
        try:
            want = cluster_echoes(t, a, 6.0)
        finally:
            waveform_steps.enabled = True
    assert got.n_clusters == want.n_clusters and got.n_bins == want.n_bins and got.dt_ns == want.dt_ns
    assert e == 1 or got.n_clusters > 1
    for name in ("order", "t_ns", "amp", "cid", "start_ns", "span_ns"):
        g, w = getattr(got, name), getattr(want, name)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(w).tobytes(), name


@needs_compiled
def test_clusters_of_rows_without_echoes() -> None:
    from rt_lidar.kernels.waveform import cluster_echoes

    t = np.full((4, 3), np.inf)
    a = np.zeros((4, 3), np.float32)
    got = cluster_echoes(t, a, 6.0)
    assert got.n_clusters == 0 and got.start_ns.shape == (4, 0) and (got.cid == -1).all()


@needs_compiled
@pytest.mark.parametrize("e", [1, 3, 12])
@pytest.mark.parametrize("b", [32, 128])
def test_sampled_waves_are_numpy_s(e: int, b: int) -> None:
    """The clusters' sampled waveforms, bit for bit: one echo and many per cluster (echoes added in
    NumPy's order), absent echoes, every cluster of every row in one batch."""
    from rt_lidar.kernels.waveform import _numpy_sampled_waves, cluster_echoes, pulse_sigma_ns

    t, a = _sorted_times(2_000, e, 5)
    with np.errstate(invalid="ignore"):
        cl = cluster_echoes(t, a, 6.0)
    pi, ci = np.nonzero(np.isfinite(cl.start_ns))
    start = cl.start_ns[pi, ci]
    sigma = pulse_sigma_ns(6.0)
    got = waveform_steps.sampled_waves(cl.cid, cl.t_ns, cl.amp, start, pi, ci, b, cl.dt_ns, -0.5 / sigma**2)
    want = _numpy_sampled_waves(cl, start, pi, ci, b, sigma)
    assert got is not None and got.dtype == want.dtype and got.shape == want.shape == (pi.size, b)
    assert got.tobytes() == want.tobytes()
    assert (got > 0).any()
    with pytest.raises(IndexError, match="pi\\[0\\] is not a row"):
        waveform_steps.sampled_waves(cl.cid, cl.t_ns, cl.amp, start, pi + 10**6, ci, b, cl.dt_ns, -0.1)


@pytest.mark.parametrize("width", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_argsort_is_numpy_s_argsort(width: int, dtype: type) -> None:
    """Rows of two are ordered by one comparison: the same indices as np.argsort, ties (0 and -0,
    equal times, infinities) kept in order and NaN last."""
    from rt_lidar.kernels.waveform import row_argsort

    values = np.array([1.0, 2.0, np.inf, -np.inf, np.nan, 0.0, -0.0, 5.0], dtype)
    a = values[np.random.default_rng(width).integers(0, values.size, (50_000, width))]
    got = row_argsort(a)
    assert got.dtype == np.int64 and np.array_equal(got, np.argsort(a, axis=1))
