"""``merge_detections``' order of (pulse, return id) rows is lexsort's (``physics.beam_full``)."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.physics.beam_full import _pulse_return_order


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_order_is_lexsorts_on_sorted_parts_and_on_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 5000
    part = rng.integers(0, 4, n)
    pulses, rids = [], []
    for k in range(4):  # each part sorted by (pulse, return id), its pulses interleaved with the others'
        ps = np.flatnonzero(part == k)
        count = rng.integers(0, 3, ps.size)
        pulses.append(np.repeat(ps, count))
        rids.append(np.concatenate([np.arange(c) for c in count] + [np.zeros(0)]).astype(np.uint8))
    pulse, rid = np.concatenate(pulses).astype(np.int64), np.concatenate(rids)
    assert np.array_equal(_pulse_return_order(pulse, rid), np.lexsort((rid, pulse)))
    # ties (the same pulse and return id twice) and return ids up to 255 keep lexsort's stable order
    pulse2 = rng.integers(0, 50, 3000).astype(np.int64)
    rid2 = rng.integers(0, 256, 3000).astype(np.uint8)
    rid2[::3] = 255
    assert np.array_equal(_pulse_return_order(pulse2, rid2), np.lexsort((rid2, pulse2)))


def test_other_types_take_lexsort() -> None:
    pulse = np.array([3, 1, 1, 0], np.int32)
    rid = np.array([0, 300, 2, 1], np.int64)
    assert np.array_equal(_pulse_return_order(pulse, rid), np.lexsort((rid, pulse)))
