"""Taking pulses apart for ``--beam full`` (``np.take`` for fancy indexing) gives the rows indexing
gives, for index arrays and boolean masks, one ray a pulse and bundles."""

from __future__ import annotations

import numpy as np

from rt_lidar.pipeline.beam_full import _rows, take_firings
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between


def test_rows_equal_fancy_indexing() -> None:
    rng = np.random.default_rng(5)
    for a in (rng.random((1000, 3)).astype(np.float32), rng.integers(0, 9, 1000).astype(np.uint8)):
        idx = np.sort(rng.choice(1000, 300, replace=False))
        mask = rng.random(1000) < 0.3
        assert _rows(a, idx).tobytes() == a[idx].tobytes()
        assert _rows(a, mask).tobytes() == a[mask].tobytes()
        assert _rows(a, idx).shape == a[idx].shape


def test_take_firings_equals_indexing_every_field() -> None:
    f = firings_between(load_preset("VLP-16"), 0, 5_000_000)
    idx = np.flatnonzero(np.arange(len(f)) % 3 == 1)
    got = take_firings(f, idx)
    for name in ("ring", "t_ns", "azimuth_deg", "elevation_deg", "column"):
        assert getattr(got, name).tobytes() == getattr(f, name)[idx].tobytes(), name
    assert len(got) == idx.size > 100
