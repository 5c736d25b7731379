"""The compiled waveform search (``rt_lidar.kernels._waveform_pulses``) gives the NumPy code's returns to
the bit: on echo tables of every shape the physics builds (one ray with a clutter echo, bundles of 7 to
57 echoes with glass and rain), with and without receiver noise, for every return selection, and where
candidates tie in height (those pulses go through the NumPy code, and the merge keeps pulse order)."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.backend import CompiledBackend
from rt_lidar.kernels import waveform_pulses
from rt_lidar.kernels.waveform import SELECT_KINDS, Noise, Returns, _waveform_returns
from rt_lidar.kernels.waveform_pulses import pulse_returns

needs_compiled = pytest.mark.skipif(not waveform_pulses.available(), reason="_waveform_pulses was not built")

WIDTH_NS, THR_W, MIN_SEP_NS = 5.0, 1e-8, 6.67


def _table(p: int, e: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(P, E) echo times (ns, inf = none) and heights (W, float32) as the physics makes them: surfaces
    in clusters (sub-rays of one surface a few cm apart), far apart (a pane and what is behind it),
    missing echoes, echoes below and around the threshold, a few far above it."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(10, 900, (p, 1))
    spread = rng.choice([0.0, 0.05, 0.5, 3.0, 40.0], (p, 1))
    t = (
        base
        + rng.standard_normal((p, e)) * spread
        + rng.integers(0, 3, (p, e)) * rng.choice([0, 7, 25], (p, 1))
    )
    amp = (THR_W * np.exp(rng.uniform(-3, 6, (p, e)))).astype(np.float32)
    amp[rng.random((p, e)) < 0.2] = 0.0
    t[rng.random((p, e)) < 0.1] = np.inf
    return t, amp


def _same(a: Returns, b: Returns) -> None:
    for name, x, y in zip(a._fields, a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), name


def _noise(p: int, e: int, seed: int) -> Noise:
    rng = np.random.default_rng(seed + 100)
    return Noise(THR_W * rng.uniform(0.05, 0.5, p), 1e-9, rng.standard_normal((p, min(e + 2, 8))))


def _search(
    t: np.ndarray, amp: np.ndarray, *args: object, fused: bool, search: float | None = None
) -> Returns:
    """The compiled backend's search (the twin, else NumPy), or NumPy's (down to ``search``)."""
    if fused:
        return CompiledBackend().waveform_returns(t, amp, *args)
    with np.errstate(invalid="ignore", over="ignore"):  # as waveform_returns runs it
        return _waveform_returns(t, amp, *args, search=search)  # type: ignore[arg-type]


def _both(t: np.ndarray, amp: np.ndarray, kind: str, noise: Noise | None, max_returns: int = 3) -> None:
    args = (WIDTH_NS, THR_W, kind, MIN_SEP_NS, max_returns, noise)
    _same(_search(t, amp, *args, fused=True), _search(t, amp, *args, fused=False))


@needs_compiled
@pytest.mark.parametrize("e", [1, 2, 3, 7, 19, 38, 57])
@pytest.mark.parametrize("noisy", [False, True])
def test_returns_are_numpy_s(e: int, noisy: bool) -> None:
    t, amp = _table(3_000, e, seed=e)
    noise = _noise(3_000, e, e) if noisy else None
    for kind in SELECT_KINDS:
        _both(t, amp, kind, noise)


@needs_compiled
@pytest.mark.parametrize("max_returns", [0, 1, 2, 4])
def test_multi_returns_are_numpy_s(max_returns: int) -> None:
    t, amp = _table(2_000, 19, seed=max_returns)
    _both(t, amp, "multi", _noise(2_000, 19, 1), max_returns)


def _near_the_level(p: int, e: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Echo tables at the edges of the bins the kernel samples (its ``sampled_bins``): heights from
    a tenth of the level to a million times it, log-uniform, a few exactly at it and just around it;
    clusters of echoes each below the level whose sum crosses it; echoes at the span's far ends and
    at every fraction of a bin; heights the kernel samples every bin for (inf, float32's largest)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(5, 600, (p, 1))
    # sub-bin offsets, a cluster's spread up to its maximum span (96 bins of sigma / 2), or far apart
    spread = rng.choice([0.0, 0.3, 1.0, 2.5, 50.0, 150.0], (p, 1))
    t = base + rng.uniform(0, 1, (p, e)) * spread
    amp = (THR_W * np.exp(rng.uniform(np.log(0.1), np.log(1e6), (p, e)))).astype(np.float32)
    level = np.float32(THR_W)
    edge = rng.random((p, e))
    amp[edge < 0.05] = level
    amp[(edge >= 0.05) & (edge < 0.1)] = np.nextafter(level, np.float32(0))
    amp[(edge >= 0.1) & (edge < 0.15)] = np.nextafter(level, np.float32(1))
    weak = rng.random(p) < 0.2  # each echo below the level, their sum at or above it
    amp[weak] = (THR_W * rng.uniform(0.2, 0.6, (int(weak.sum()), e))).astype(np.float32)
    t[weak] = base[weak] + rng.uniform(0, 0.5, (int(weak.sum()), e))
    odd = rng.random((p, e))
    amp[odd < 0.002] = np.inf
    amp[(odd >= 0.002) & (odd < 0.004)] = np.finfo(np.float32).max
    amp[rng.random((p, e)) < 0.1] = 0.0
    return t, amp


@needs_compiled
@pytest.mark.parametrize("e", [1, 2, 3, 7])
def test_returns_are_numpy_s_where_few_bins_reach_the_level(e: int) -> None:
    """The kernel samples only the bins of a cluster that can reach the search level (and one each
    side); its returns stay NumPy's, sampled on the whole grid, to the bit: near and at the level,
    far above it, from sums of echoes each below it, at the grid's ends, with and without noise."""
    t, amp = _near_the_level(4_000, e, seed=10 + e)
    for noise in (None, _noise(4_000, e, e)):
        for kind in SELECT_KINDS:
            _both(t, amp, kind, noise)


@needs_compiled
@pytest.mark.parametrize("e", [1, 3])
def test_one_echo_rows_kept_per_call_are_numpy_s(e: int) -> None:
    """A one-echo cluster's samples come from the rows the kernel keeps for each value of its offset
    in the grid (float32 of t - (t - pad)), eight at most a call, the others' made per block: at times
    from 1e6 to 1e14 ns those offsets take a dozen values, so both paths run, beside clusters of
    several echoes, with and without noise; the returns stay NumPy's to the bit."""
    rng = np.random.default_rng(40 + e)
    p = 3_000
    t = 10 ** rng.uniform(6, 14, (p, 1)) + rng.choice([0.0, 0.0, 0.5, 30.0], (p, e)) * rng.random((p, e))
    amp = (THR_W * np.exp(rng.uniform(-2, 6, (p, e)))).astype(np.float32)
    amp[rng.random((p, e)) < 0.3] = 0.0
    for noise in (None, _noise(p, e, e)):
        for kind in SELECT_KINDS:
            _both(t, amp, kind, noise)


@needs_compiled
def test_pulses_whose_candidates_tie_go_through_numpy() -> None:
    """Two surfaces of exactly the same height far apart: the NumPy sort decides which is first; the
    kernel leaves those pulses to the NumPy code, whose returns are merged back in pulse order."""
    t, amp = _table(500, 4, seed=7)
    tie = np.arange(0, 500, 3)
    t[tie, 0], t[tie, 1], t[tie, 2:] = 100.0, 400.0, np.inf
    amp[tie, 0] = amp[tie, 1] = np.float32(20 * THR_W)
    sent: list[int] = []

    def numpy_search(t_sub: np.ndarray, a_sub: np.ndarray, noise: Noise | None) -> tuple[np.ndarray, ...]:
        sent.append(t_sub.shape[0])
        args = (WIDTH_NS, THR_W, "strongest", MIN_SEP_NS, 3, noise)
        return tuple(_search(t_sub, a_sub, *args, search=THR_W, fused=False))

    got = pulse_returns(t, amp, WIDTH_NS, THR_W, THR_W, "strongest", MIN_SEP_NS, 3, None, numpy_search)
    assert got is not None and sent == [tie.size]
    want = _search(t, amp, WIDTH_NS, THR_W, "strongest", MIN_SEP_NS, 3, None, fused=False)
    _same(Returns(*got), want)
    for kind in SELECT_KINDS:
        _both(t, amp, kind, _noise(500, 4, 3))


@needs_compiled
def test_off_and_foreign_input_run_numpy() -> None:
    t, amp = _table(50, 3, seed=1)

    def unused(*_: object) -> tuple[np.ndarray, ...]:
        raise AssertionError("no pulse should need the NumPy code")

    args = (WIDTH_NS, THR_W, THR_W, "dual_unknown", MIN_SEP_NS, 3, None, unused)
    assert pulse_returns(t, amp, *args) is None  # a selection it does not know
    assert (
        pulse_returns(t, amp.astype(np.float64), WIDTH_NS, THR_W, THR_W, "last", 1.0, 3, None, unused) is None
    )
    waveform_pulses.enabled = False
    try:
        assert pulse_returns(t, amp, WIDTH_NS, THR_W, THR_W, "last", 1.0, 3, None, unused) is None
    finally:
        waveform_pulses.enabled = True


def test_borrowed_loops_are_checked_against_the_ufuncs() -> None:
    """Each module's borrowed NumPy loops give the ufunc's bytes (else the module stays off)."""
    from rt_lidar.kernels.np_loops import loops_agree
    from rt_lidar.physics import intensity_fused, texture_fused
    from rt_lidar.pipeline import beam_steps
    from rt_lidar.rig import crosstalk_fused

    checks = [
        (waveform_pulses._c, [(np.exp, np.float32), (np.exp, np.float64), (np.log, np.float32)]),
        (intensity_fused._c, [(np.log10, np.float32), (np.expm1, np.float64)]),
        (texture_fused._c, [(np.log, np.float64), (np.cos, np.float64), (np.exp, np.float64)]),
        (crosstalk_fused._c, [(np.cos, np.float64), (np.exp, np.float64)]),
        (beam_steps._choice, [(np.hypot, np.float32)]),
    ]
    for module, loops in checks:
        if module is None:
            continue
        assert module.setup(*dict.fromkeys(u for u, _ in loops))
        assert loops_agree(module, loops)
        assert not loops_agree(module, [(loops[0][0], np.float16)])  # another type's values: refused

    class Idle:  # a "loop" that leaves its buffer as it is: not exp
        @staticmethod
        def probe(index: int, buf: np.ndarray, nin: int) -> None:
            return None

    assert not loops_agree(Idle, [(np.exp, np.float64)])
