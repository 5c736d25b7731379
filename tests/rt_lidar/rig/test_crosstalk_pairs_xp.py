"""Crosstalk's pulse pairing runs on the device-resident frame's array module (docs/gpu.md): it must use
only what CuPy offers. CuPy before 14 (``cupy-cuda12x>=13`` is allowed) refuses ``repeat`` with an array
of counts, which NumPy accepts, so a NumPy run alone cannot catch it: here a NumPy namespace with CuPy
13's ``repeat`` stands in for the device's module."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from rt_lidar.rig import crosstalk


def _cupy13_like() -> Any:
    """NumPy, but ``repeat`` refuses an array of counts as CuPy 13's does."""

    def repeat(a: Any, repeats: Any, axis: Any = None) -> Any:
        if isinstance(repeats, np.ndarray):
            raise ValueError("cupy.ndaray cannot be specified as `repeats` argument.")
        return np.repeat(a, repeats, axis)

    names = {n: getattr(np, n) for n in dir(np) if not n.startswith("__")}
    return SimpleNamespace(**{**names, "repeat": repeat})


def _brute_pairs(t_a: np.ndarray, t_b: np.ndarray, before: float, after: float) -> set[tuple[int, int]]:
    return {
        (i, j)
        for i in range(t_a.size)
        for j in range(t_b.size)
        if t_a[i] - before <= t_b[j] <= t_a[i] + after
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pairs_use_no_array_valued_repeat(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rng = np.random.default_rng(seed)
    t_a = np.sort(rng.integers(0, 100_000, 60)).astype(np.int64)
    t_b = np.sort(rng.integers(0, 100_000, 80)).astype(np.int64)
    before, after = 1_500.0, 2_500.0  # some pulses of A pair with none of B, some with several
    want = _brute_pairs(t_a, t_b, before, after)
    monkeypatch.setattr(crosstalk, "array_module", lambda *a: _cupy13_like())
    i, j = crosstalk._pairs(t_a, t_b, before, after)
    assert set(zip(i.tolist(), j.tolist(), strict=True)) == want
    assert len(i) == len(want)  # each pair once
    assert np.all(np.diff(i) >= 0)  # grouped by A's pulse, as the echoes' order expects


def test_no_pairs_and_no_pulses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crosstalk, "array_module", lambda *a: _cupy13_like())
    none = np.zeros(0, np.int64)
    far = np.array([10**9], np.int64)
    for t_a, t_b in ((none, far), (far, none), (np.array([0, 5], np.int64), far)):
        i, j = crosstalk._pairs(t_a, t_b, 1.0, 1.0)
        assert i.size == 0 and j.size == 0
