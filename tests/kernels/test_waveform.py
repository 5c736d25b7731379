"""The waveform kernel: clustering, peak picking, return modes, echo pulse width; CUDA parity."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.kernels.waveform import (
    cluster_echoes,
    pulse_sigma_ns,
    select_returns,
    single_echo_epw_ns,
    waveform_peaks,
    waveform_returns,
)

C = 0.299792458  # m/ns
THR = 5e-9


def _t(r: float) -> float:
    return 2 * r / C


def _two_planes(n: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Pulse 0: 4 sub-rays at 10 m and 3 at 12 m; pulse 1: all at 10 m; pulse 2: nothing."""
    t = np.array([[_t(10)] * 4 + [_t(12)] * 3, [_t(10)] * n, [np.inf] * n])
    a = np.array([[1e-7] * 4 + [1e-7] * 3, [1e-7] * n, [0] * n], np.float32)
    return t, a


def test_single_echo_is_exact_in_time_height_and_width():
    t = np.array([[_t(23.456)]])
    a = np.array([[3e-6]], np.float32)
    r = waveform_returns(t, a, 6.0, THR, "strongest", _t(1.0))
    assert r.t_ns[0] * C / 2 == pytest.approx(23.456, abs=1e-4)
    assert r.amp[0] == pytest.approx(3e-6, rel=1e-4)
    assert r.epw_ns[0] == pytest.approx(single_echo_epw_ns(3e-6, THR, 6.0), rel=0.01)


@pytest.mark.parametrize(
    ("kind", "ranges"),
    [
        ("strongest", [10]),
        ("last", [12]),
        ("first", [10]),
        ("strongest_last", [10, 12]),
        ("two_strongest", [10, 12]),
    ],
)
def test_return_modes_on_two_planes(kind, ranges):
    t, a = _two_planes()
    r = waveform_returns(t, a, 6.0, THR, kind, _t(1.0))
    p0 = r.pulse == 0
    np.testing.assert_allclose(r.t_ns[p0] * C / 2, ranges, atol=1e-3)
    np.testing.assert_array_equal(r.return_id[p0], np.arange(len(ranges)))
    assert (r.pulse == 1).sum() == 1 and (r.pulse == 2).sum() == 0


def test_min_separation_suppresses_the_weaker_close_peak():
    t = np.array([[_t(10.0), _t(11.5)]])
    a = np.array([[1e-6, 5e-7]], np.float32)
    assert waveform_returns(t, a, 3.0, THR, "two_strongest", _t(1.0)).pulse.size == 2
    one = waveform_returns(t, a, 3.0, THR, "two_strongest", _t(2.0))
    assert one.pulse.size == 1 and one.t_ns[0] * C / 2 == pytest.approx(10.0, abs=0.01)


def test_strongest_last_reports_the_second_strongest_when_the_strongest_is_last():
    t = np.array([[_t(10.0), _t(20.0), _t(30.0)]])
    a = np.array([[2e-8, 3e-8, 9e-8]], np.float32)
    r = waveform_returns(t, a, 6.0, THR, "strongest_last", _t(1.0))
    np.testing.assert_allclose(r.t_ns * C / 2, [20.0, 30.0], atol=1e-3)


def test_multi_returns_up_to_n_and_far_echoes_get_their_own_grid():
    t = np.array([[_t(5.0), _t(40.0), _t(90.0), _t(150.0)]])
    a = np.array([[4e-8, 3e-8, 2e-8, 1e-8]], np.float32)
    r = waveform_returns(t, a, 6.0, THR, "multi", _t(1.0), max_returns=3)
    np.testing.assert_allclose(r.t_ns * C / 2, [5.0, 40.0, 90.0], atol=1e-3)
    assert r.echo.tolist() == [0, 1, 2]


def test_echo_pulse_width_grows_with_power_and_below_threshold_nothing():
    p = np.array([[1.2 * THR], [10 * THR], [1e3 * THR], [0.9 * THR]], np.float32)
    t = np.full(p.shape, _t(20.0))
    r = waveform_returns(t, p, 6.0, THR, "strongest", _t(1.0))
    assert r.pulse.tolist() == [0, 1, 2]
    assert np.all(np.diff(r.epw_ns) > 0)
    assert pulse_sigma_ns(6.0) == pytest.approx(6.0 / 2.3548, rel=1e-4)


def _selected(pk, kind: str) -> np.ndarray:
    """(pulse, time, height, width) of the returns ``kind`` picks from peaks ``pk``, sorted."""
    sel, ok = select_returns(pk, kind, 6.0)
    pulse, col = np.nonzero(np.asarray(ok))
    cand = np.asarray(sel)[pulse, col]
    cols = [
        pulse,
        np.asarray(pk.t_ns)[pulse, cand],
        np.asarray(pk.amp)[pulse, cand],
        np.asarray(pk.epw_ns)[pulse, cand],
    ]
    rows = np.stack([c.astype(np.float64) for c in cols], 1)
    return rows[np.lexsort((rows[:, 1], rows[:, 0]))]


def test_cuda_kernel_matches_numpy(cuda_backend) -> None:
    """The CUDA peak kernel (on the GPU, or its own source built for the CPU) picks the NumPy returns."""
    from rt_lidar.kernels.waveform_cuda import CUDA_SOURCE, waveform_peaks_cuda

    rng = np.random.default_rng(0)
    t = rng.uniform(20, 600, (2000, 14))
    a = (THR * 10 ** rng.uniform(-0.5, 4, t.shape)).astype(np.float32)
    a[rng.random(t.shape) < 0.3] = 0
    with np.errstate(invalid="ignore"):  # inf - inf of absent echoes, masked (as waveform_returns does)
        ref = waveform_peaks(cluster_echoes(t, a, 5.0), 5.0, THR)
        cl = cluster_echoes(cuda_backend.asarray(t), cuda_backend.asarray(a), 5.0)
        got = waveform_peaks_cuda(cl, 5.0, THR, kernel=cuda_backend.kernel(CUDA_SOURCE, "wf_peaks"))
        got = type(got)(*(cuda_backend.asnumpy(x) for x in got))
        picked = {
            kind: (_selected(ref, kind), _selected(got, kind))
            for kind in ("strongest", "strongest_last", "multi")
        }
    for want, have in picked.values():
        assert want.shape == have.shape and want.shape[0] > 1000
        np.testing.assert_array_equal(have[:, 0], want[:, 0])
        np.testing.assert_allclose(have[:, 1], want[:, 1], atol=1e-4)
        np.testing.assert_allclose(have[:, 2], want[:, 2], rtol=1e-4)
        np.testing.assert_allclose(have[:, 3], want[:, 3], atol=1e-3)


def test_noisy_detection_is_a_probability_and_keeps_the_width_at_the_threshold():
    """Issue 14 item 8: with receiver noise a peak is detected with P_d = Q((T - a) / sigma), smooth through
    1/2 at the threshold, and its echo pulse width is still the time above T (searched lower)."""
    from rt_lidar.kernels.waveform import Noise

    n, sigma = 40_000, THR / 5.0
    rng = np.random.default_rng(4)
    for height, want in ((THR * 0.6, 0.0228), (THR, 0.5), (THR * 1.4, 0.9772)):  # -2, 0, +2 sigma
        t = np.full((n, 1), _t(30.0))
        a = np.full((n, 1), height, np.float32)
        noise = Noise(np.full(n, sigma), 0.0, rng.standard_normal((n, 3)))
        r = waveform_returns(t, a, 6.0, THR, "strongest", _t(1.0), noise=noise)
        assert r.pulse.size / n == pytest.approx(want, abs=0.01)
    t, a = np.array([[_t(30.0)]]), np.array([[4 * THR]], np.float32)
    r = waveform_returns(
        t, a, 6.0, THR, "strongest", _t(1.0), noise=Noise(np.array([sigma]), 0.0, np.zeros((1, 3)))
    )
    assert float(r.epw_ns[0]) == pytest.approx(float(single_echo_epw_ns(4 * THR, THR, 6.0)), rel=1e-2)


def test_cuda_kernel_lists_candidates_in_numpy_order_so_noise_meets_the_same_peaks(cuda_backend) -> None:
    """A pulse with a long cluster (a grazing footprint) before a short one: NumPy samples them in
    different span buckets and lists the short one's peak first. The CUDA twin must list them alike, or
    each candidate meets another pulse-noise draw and noisy detection picks other returns."""
    from rt_lidar.kernels.waveform import Noise, detect_noisy_peaks
    from rt_lidar.kernels.waveform_cuda import CUDA_SOURCE, waveform_peaks_cuda

    rng = np.random.default_rng(7)
    n, width = 600, 5.0
    long_cluster = 100.0 + np.arange(12) * 2.0  # 22 ns of echoes 2 ns apart: one wide cluster
    t = np.concatenate([np.tile(long_cluster, (n, 1)), rng.uniform(200, 400, (n, 2))], axis=1)
    t += rng.uniform(0, 50, (n, 1))
    a = (THR * 10 ** rng.uniform(0.0, 1.5, t.shape)).astype(np.float32)
    with np.errstate(invalid="ignore"):
        ref = waveform_peaks(cluster_echoes(t, a, width), width, THR)
        cl = cluster_echoes(cuda_backend.asarray(t), cuda_backend.asarray(a), width)
        got = waveform_peaks_cuda(cl, width, THR, kernel=cuda_backend.kernel(CUDA_SOURCE, "wf_peaks"))
        got = type(got)(*(cuda_backend.asnumpy(x) for x in got))
    assert ref.t_ns.shape == got.t_ns.shape and ref.t_ns.shape[1] >= 3
    np.testing.assert_array_equal(got.valid, ref.valid)
    np.testing.assert_allclose(got.t_ns[ref.valid], ref.t_ns[ref.valid], atol=2e-3)  # float32 waveform
    assert (ref.t_ns[:, 0] > 150).mean() > 0.9  # the short clusters' peaks come first in NumPy's order
    noise = Noise(np.full(n, THR / 3), 0.0, rng.standard_normal((n, ref.t_ns.shape[1])))
    kept_ref = detect_noisy_peaks(ref, noise, THR, THR, width).valid
    kept_got = detect_noisy_peaks(got, noise, THR, THR, width).valid
    assert 0 < kept_ref.sum() < ref.valid.sum()
    np.testing.assert_array_equal(kept_got, kept_ref)
