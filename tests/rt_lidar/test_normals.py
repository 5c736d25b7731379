"""The compiled standard normals (``rt_lidar.physics._normals``) are NumPy's: the same values bit for bit
and the generator left in the same state, over long runs that take every kind of slow draw."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.physics import fused, normals

needs_twin = pytest.mark.skipif(normals._c is None, reason="the _normals extension was not built")

_R = 3.6541528853610088  # where the ziggurat's base strip hands over to the normal tail


def _pair(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    return (
        np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 7]))),
        np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 7]))),
    )


@needs_twin
def test_the_twin_passed_its_check_against_numpy() -> None:
    assert normals.check() and normals.available()


@needs_twin
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", range(3))
def test_long_runs_are_numpy_s_draws_and_leave_numpy_s_state(seed: int, dtype: type) -> None:
    ours, numpy_s = _pair(seed)
    got = normals.standard_normal(ours, 1_500_000, dtype)
    want = numpy_s.standard_normal(1_500_000, dtype)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert ours.bit_generator.state == numpy_s.bit_generator.state
    # the draws that leave the ziggurat's fast path were there: the tail beyond its base strip
    assert np.count_nonzero(np.abs(got) > _R) > 100


@needs_twin
def test_draws_interleaved_with_other_draws_and_shapes_stay_numpy_s() -> None:
    """Odd sizes, a half 64-bit output left buffered by float32 and uniform draws between, empty and
    two-dimensional draws: every value and the state after each step are NumPy's."""
    ours, numpy_s = _pair(11)
    steps: list[tuple[object, type]] = [(1, np.float32), (0, np.float64), (3, np.float64), (5, np.float32)]
    steps += [((7, 9), np.float64), (100_001, np.float32), ((33, 4), np.float32), (2, np.float64)]
    for size, dtype in steps:
        got = normals.standard_normal(ours, size, dtype)  # type: ignore[arg-type]
        want = numpy_s.standard_normal(size, dtype)  # type: ignore[call-overload]
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), (size, dtype)
        assert ours.bit_generator.state == numpy_s.bit_generator.state
        assert ours.random(3, np.float32).tobytes() == numpy_s.random(3, np.float32).tobytes()
        assert ours.integers(0, 1000, 5).tolist() == numpy_s.integers(0, 1000, 5).tolist()


def test_other_bit_generators_and_the_switch_take_numpy_s_own_draw() -> None:
    for make in (np.random.Philox, np.random.MT19937, np.random.PCG64DXSM):
        a, b = np.random.Generator(make(5)), np.random.Generator(make(5))
        assert normals.standard_normal(a, 1000).tobytes() == b.standard_normal(1000).tobytes()
    fused.enabled = False
    try:
        assert not normals.available()
        ours, numpy_s = _pair(2)
        assert (
            normals.standard_normal(ours, 999, np.float32).tobytes()
            == numpy_s.standard_normal(999, np.float32).tobytes()
        )
    finally:
        fused.enabled = True


@needs_twin
def test_the_tables_read_from_numpy_are_a_ziggurat_s() -> None:
    """The strips' widths grow towards the base strip and their fast-path limits are fractions of the
    magnitude range, as a 256-strip normal ziggurat's are; the base strip's edge is the tail's start."""
    wi, ki, wf, kf = (
        np.frombuffer(b, t)
        for b, t in zip(normals._c.tables(), (np.float64, np.uint64, np.float32, np.uint32), strict=True)
    )
    assert wi.shape == ki.shape == wf.shape == kf.shape == (256,)
    assert np.all(ki <= 1 << 52) and np.all(kf <= 1 << 23)
    assert 0.97 < ki[2:].mean() / 2.0**52 < 1.0 and 0.97 < kf[2:].mean() / 2.0**23 < 1.0
    assert float(ki[0]) * wi[0] == pytest.approx(_R, rel=1e-6)
    assert float(kf[0]) * float(wf[0]) == pytest.approx(_R, rel=1e-5)


@needs_twin
@pytest.mark.parametrize("seed", range(3))
def test_uniform_below_is_numpy_s_draws_compared(seed: int) -> None:
    ours, numpy_s = _pair(seed)
    ours.standard_normal(3, np.float32)  # a 32-bit half left buffered: the uniform draws leave it there
    numpy_s.standard_normal(3, np.float32)
    for n, p in ((1_000_003, 1e-3), (200_000, None), (0, 0.5), (7, 1.0)):
        empty = numpy_s.random(n) < 0.7
        ours.random(n)
        if p is None:  # one probability per position
            p = numpy_s.random(n).astype(np.float32)
            ours.random(n)
        twin = np.random.Generator(np.random.PCG64())
        twin.bit_generator.state = ours.bit_generator.state
        direct = normals._below(twin.bit_generator, empty, np.asarray(p, np.float64).reshape(-1))
        got = normals.uniform_below(ours, empty, p)
        want = np.nonzero(empty & (numpy_s.random(n) < p))[0]
        assert got.dtype == np.intp and np.array_equal(got, want)
        assert np.array_equal(direct, want)  # the compiled loop itself, whatever the check said
        assert ours.bit_generator.state == numpy_s.bit_generator.state == twin.bit_generator.state
    assert want.size == 7 - np.count_nonzero(~empty)  # p = 1 keeps every empty position


def test_uniform_below_takes_numpy_s_draw_off_pcg64_and_when_switched_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for make in (np.random.Philox, np.random.MT19937):
        a, b = np.random.Generator(make(3)), np.random.Generator(make(3))
        empty = np.ones(5000, bool)
        assert np.array_equal(normals.uniform_below(a, empty, 0.2), np.nonzero(b.random(5000) < 0.2)[0])
    monkeypatch.setattr(fused, "enabled", False)
    monkeypatch.setattr(normals, "_c", None)  # a call that reached the twin would fail
    a, b = _pair(1)
    assert np.array_equal(normals.uniform_below(a, empty, 0.2), np.nonzero(b.random(5000) < 0.2)[0])


@needs_twin
def test_uniform_below_refuses_a_wrong_probability_array() -> None:
    out = np.empty(10, np.int64)
    with pytest.raises(ValueError, match="p needs 1 or 10"):
        normals._c.uniform_below(1, 2, 3, 5, np.ones(10, bool), np.ones(3), out)
    with pytest.raises(ValueError, match="empty has the wrong type"):
        normals._c.uniform_below(1, 2, 3, 5, np.ones(10, np.int32), np.ones(1), out)
