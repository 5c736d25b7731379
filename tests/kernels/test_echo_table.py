"""The compiled echo order (``rt_lidar.kernels._echo_table``) orders what the waveform search reads of
each pulse's echoes as NumPy's argsort does: the finite times in the same order, the same absent echoes
after them, rows with equal times or a NaN exactly NumPy's; and the search's returns are NumPy's bits
with it, on tables with ties, absent echoes and NaN."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.kernels import echo_table as eo
from rt_lidar.kernels.waveform import Noise, _waveform_returns
from rt_lidar.kernels.waveform_pulses import waveform_returns

needs_compiled = pytest.mark.skipif(not eo.available(), reason="_echo_table was not built")

THR_W = 1e-8


def _table(p: int, e: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(P, E) times with ties (equal times in a row), +inf, NaN, and heights with zeros, negatives, NaN."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(10.0, 900.0, (p, e))
    tie = rng.random(p) < 0.1
    if e > 1:
        t[tie, 1] = t[tie, 0]
    t[rng.random((p, e)) < 0.1] = np.inf
    t[rng.random((p, e)) < 0.005] = np.nan
    amp = (THR_W * np.exp(rng.uniform(-3, 6, (p, e)))).astype(np.float32)
    amp[rng.random((p, e)) < 0.2] = 0.0
    amp[rng.random((p, e)) < 0.02] = -1.0
    amp[rng.random((p, e)) < 0.005] = np.nan
    return t, amp


@needs_compiled
@pytest.mark.parametrize("e", [1, 2, 3, 4, 5, 8, 16])
def test_what_the_search_reads_is_numpy_s_order(e: int) -> None:
    t, amp = _table(20_000, e, seed=e)
    got, want = eo.echo_order(t, amp), eo.numpy_echo_order(t, amp)
    assert got.dtype == np.int64 and got.shape == want.shape
    key = np.where(amp > 0, t, np.inf)
    finite = np.isfinite(key).sum(axis=1)
    for i in range(t.shape[0]):
        k = finite[i]
        assert got[i, :k].tolist() == want[i, :k].tolist()  # the finite times, in order
        assert sorted(got[i, k:].tolist()) == sorted(want[i, k:].tolist())  # the absent (and NaN) ones
    flagged = np.isnan(key).any(axis=1)
    if e > 1:
        flagged |= np.array([len(set(r[np.isfinite(r)])) < np.isfinite(r).sum() for r in key])
        assert flagged.sum() > 100
    assert (got[flagged] == want[flagged]).all()  # rows with equal times or NaN: NumPy's own order


@needs_compiled
def test_wide_tables_and_off_are_numpy_s_sort() -> None:
    t, amp = _table(500, eo.MAX_ECHOES + 3, seed=1)
    assert (eo.echo_order(t, amp) == eo.numpy_echo_order(t, amp)).all()
    t, amp = _table(500, 3, seed=2)
    eo.enabled = False
    try:
        assert (eo.echo_order(t, amp) == eo.numpy_echo_order(t, amp)).all()
    finally:
        eo.enabled = True


@needs_compiled
@pytest.mark.parametrize("e", [3, 5])
@pytest.mark.parametrize("kind", ["strongest", "strongest_last", "two_strongest", "multi"])
def test_the_search_with_it_gives_numpy_s_returns(e: int, kind: str) -> None:
    t, amp = _table(5_000, e, seed=10 + e)
    rng = np.random.default_rng(e)
    noise = Noise(THR_W * rng.uniform(0.05, 0.5, 5_000), 1e-9, rng.standard_normal((5_000, e + 2)))
    args = (5.0, THR_W, kind, 6.67, 3, noise)
    got = waveform_returns(t, amp, *args)
    assert got is not None
    with np.errstate(invalid="ignore", over="ignore"):
        want = _waveform_returns(t, amp, *args)
    for name, x, y in zip(got._fields, got, want, strict=True):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), name
    assert len(want.pulse) > 1000


def _columns(p: int, widths: list[int], seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Blocks of ranges (inside, at and beyond the gate, inf, NaN, negative) and float32 heights."""
    rng = np.random.default_rng(seed)
    ranges, heights = [], []
    for w in widths:
        r = rng.uniform(-5.0, 320.0, p * w).astype(np.float32)
        r[rng.random(p * w) < 0.1] = np.inf
        r[rng.random(p * w) < 0.01] = np.nan
        r[rng.random(p * w) < 0.02] = np.float32(0.5)  # at the near gate
        r[rng.random(p * w) < 0.02] = np.float32(245.3)  # at a far gate not exact in float32
        ranges.append(r)
        heights.append((THR_W * np.exp(rng.uniform(-3, 6, p * w))).astype(np.float32))
    return ranges, heights


@needs_compiled
@pytest.mark.parametrize("widths", [[1], [1, 1, 1], [7, 7, 1, 7], [19, 19]])
@pytest.mark.parametrize("limits", [(0.5, 300.0), (0.4, 245.3)])
def test_gated_tables_are_numpy_s(widths: list[int], limits: tuple[float, float]) -> None:
    ranges, heights = _columns(3_000, widths, seed=sum(widths))
    args = (3_000, *limits, 0.299792458)
    got, want = eo.gated_tables(ranges, heights, *args), eo.numpy_gated_tables(ranges, heights, *args)
    for x, y in zip(got, want, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
    assert np.isinf(want[0]).sum() > 100 and (want[1] > 0).sum() > 1000


@needs_compiled
def test_gated_tables_take_only_float32_blocks() -> None:
    ranges, heights = _columns(100, [1, 1], seed=3)
    args = (100, 0.5, 300.0, 0.299792458)
    for odd in ([ranges[0].astype(np.float64), ranges[1]], [ranges[0][:-1], ranges[1]]):
        if odd[0].size % 100:  # not whole blocks of the pulses: NumPy's concatenation refuses them too
            with pytest.raises(ValueError):
                eo.gated_tables(odd, heights, *args)
            continue
        got, want = eo.gated_tables(odd, heights, *args), eo.numpy_gated_tables(odd, heights, *args)
        assert all(x.tobytes() == y.tobytes() for x, y in zip(got, want, strict=True))
