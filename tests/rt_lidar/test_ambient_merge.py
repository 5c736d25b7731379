"""The false detections' merge and the return ids (``rt_lidar.physics.ambient``) give what the stable
sort and the runs' starts gave: sorted returns with false detections put between them, unsorted input,
runs longer than a uint8 holds, no returns."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.physics import ambient
from rt_lidar.physics.returns import Detections


def _detections(pulse: np.ndarray, seed: int, epw: bool) -> Detections:
    rng = np.random.default_rng(seed)
    n = pulse.size
    return Detections(
        pulse.astype(np.int64),
        rng.integers(0, 3, n).astype(np.uint8),
        rng.uniform(0, 300, n).astype(np.float32),
        rng.uniform(0, 1, n).astype(np.float32),
        rng.uniform(0, 1, n).astype(np.float32),
        rng.integers(0, 2**31, n).astype(np.uint32),
        rng.integers(0, 255, n).astype(np.uint8),
        rng.uniform(5, 9, n).astype(np.float32) if epw else None,
    )


def _reference_merge(a: Detections, b: Detections) -> Detections:
    def cat(x: np.ndarray | None, y: np.ndarray | None) -> np.ndarray | None:
        return None if x is None or y is None else np.concatenate([x, y])

    merged = Detections(*[cat(x, y) for x, y in zip(ambient._columns(a), ambient._columns(b), strict=True)])  # type: ignore[arg-type]
    return merged.take(np.argsort(merged.pulse, kind="stable"))


def _same(x: Detections, y: Detections) -> None:
    for u, v in zip(ambient._columns(x), ambient._columns(y), strict=True):
        if u is None or v is None:
            assert u is None and v is None
            continue
        assert u.dtype == v.dtype and u.tobytes() == v.tobytes()


@pytest.mark.parametrize("epw", [False, True])
@pytest.mark.parametrize("sort_a", [True, False])
def test_merge_is_the_stable_sort(epw: bool, sort_a: bool) -> None:
    rng = np.random.default_rng(int(epw) + 2 * int(sort_a))
    pa = np.repeat(np.sort(rng.choice(50_000, 20_000, replace=False)), rng.integers(1, 3, 20_000))
    if not sort_a:
        pa = rng.permutation(pa)
    pb = np.sort(rng.choice(60_000, 3_000, replace=False))  # beyond a's last pulse too, and on a's
    a, b = _detections(pa, 1, epw), _detections(pb, 2, epw)
    _same(ambient._merge(a, b), _reference_merge(a, b))
    empty = _detections(np.zeros(0, np.int64), 3, epw)
    _same(ambient._merge(empty, b), _reference_merge(empty, b))
    _same(ambient._merge(a, empty), _reference_merge(a, empty))


@pytest.mark.parametrize("longest", [1, 2, 3, 300])
def test_return_ids_are_the_runs_positions(longest: int) -> None:
    rng = np.random.default_rng(longest)
    runs = rng.integers(1, longest + 1, 5_000)
    pulse = np.repeat(np.arange(5_000) * 3, runs)
    got = ambient._renumber(pulse)
    assert got.dtype == np.uint8 and got.tobytes() == ambient._renumber_runs(pulse).tobytes()
    assert int(got.max()) == (min(longest, int(runs.max())) - 1) % 256 or longest > 255
    shuffled = rng.permutation(pulse)  # not sorted: the runs of adjacent equal indices
    assert ambient._renumber(shuffled).tobytes() == ambient._renumber_runs(shuffled).tobytes()
    assert ambient._renumber(np.zeros(0, np.int64)).size == 0
