"""``ring_ranks`` is computed once a frame: a ``--beam full`` frame asks it of the same firings three
times (the bundle steps, the seam probes, the ring gaps), and the ranks are kept on the firings."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rt_lidar.pipeline.beam_full import _ring_ranks, ring_ranks
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between, scan_period_ns


@pytest.mark.parametrize("name", ["HDL-64E", "VLS-128", "VLP-16"])
def test_the_ranks_are_kept_and_are_the_ones_computed(name: str) -> None:
    preset = load_preset(name)
    per = scan_period_ns(preset)
    f = firings_between(preset, per, per + per // 2)
    first = ring_ranks(f)
    assert ring_ranks(f) is first  # kept: the second frame step asks for no new ranks
    assert np.array_equal(first, _ring_ranks(f)) and first.dtype == np.int64
    assert not first.flags.writeable  # shared by the frame's steps: none may write it
    # other firings, or the same with other rings, get their own
    other = dataclasses.replace(f, ring=f.ring[::-1].copy())
    assert ring_ranks(other) is not first
    assert np.array_equal(ring_ranks(other), _ring_ranks(other))
    # the same object handed other rings (the identity guard): new ranks, not the kept ones
    reversed_rings = f.ring[::-1].copy()
    object.__setattr__(f, "ring", reversed_rings)
    again = ring_ranks(f)
    assert again is not first and np.array_equal(again, _ring_ranks(f))
