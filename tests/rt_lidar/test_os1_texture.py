"""The OS1-64's ground texture against the real Ouster road (docs/realism.md change 45, a finding): what
the texture statistic can reach, and the vendored OS1-32 gen 2 road's counts read as photon counts."""

from __future__ import annotations

import numpy as np

from rt_lidar.validation.real_frames import read_frame, vendored_frames
from rt_lidar.validation.realism import _texture, fit_ground, realism_statistics
from rt_lidar.validation.realism_grid import ScanGrid


def _flat_ring_grid(values: np.ndarray) -> ScanGrid:
    """One ring of ground returns at 10 m reading ``values``."""
    n = values.size
    range_m = np.full((1, n), 10.0)
    nan3 = np.full((1, n, 3), np.nan)
    return ScanGrid(
        "ring", nan3, range_m, values[None, :].astype(np.float64), nan3, np.ones((1, n), bool), 1.0, "counts"
    )


def test_texture_of_values_spread_over_many_steps_tends_to_eight_ninths() -> None:
    # the centre point is one of the nine it is measured against: it is their median one time in nine
    rng = np.random.default_rng(3)
    wide = np.round(rng.normal(200.0, 40.0, 20_000))
    share, _ = _texture(_flat_ring_grid(wide), np.ones((1, wide.size), bool))
    assert share is not None and abs(share - 8 / 9) < 0.01
    # photon counts (Poisson, independent neighbours): the texture is set by their level alone; the
    # band's ceiling 0.84 falls near 55 counts, the real Ouster road's 31 reads ~0.82, the simulated 208 above
    for level, lo, hi in ((30.0, 0.81, 0.835), (208.0, 0.85, 0.875)):
        counts = rng.poisson(level, 20_000).astype(np.float64)
        share_counts, _ = _texture(_flat_ring_grid(counts), np.ones((1, counts.size), bool))
        assert share_counts is not None and lo < share_counts < hi, (level, share_counts)


def test_the_real_ouster_roads_counts_spread_as_photon_counts() -> None:
    frame = next(f for f in vendored_frames() if f.path.name.startswith("OS-1-32"))
    grid = read_frame(frame)
    stats = realism_statistics(grid)
    assert 0.78 < stats["ground_texture_share"] < 0.84  # 0.816 (docs/realism.md, the real frames)
    ret = grid.returned & grid.in_view
    plane = fit_ground(grid.xyz[ret], 0)
    assert plane is not None
    with np.errstate(invalid="ignore"):
        ground = ret & (np.abs(plane.distance(np.nan_to_num(grid.xyz))) <= 0.1 + 0.005 * grid.range_m)
    level, resid = [], []
    for k in range(grid.range_m.shape[0]):
        sel = np.flatnonzero(ground[k] & (grid.range_m[k] >= 5.0) & (grid.range_m[k] < 15.0))
        if sel.size < 9:
            continue
        v = grid.intensity[k, sel].astype(np.float64)
        med = np.median(np.lib.stride_tricks.sliding_window_view(v, 9), axis=1)
        level.append(v[4 : 4 + med.size])
        resid.append(v[4 : 4 + med.size] - med)
    counts, off = np.concatenate(level), np.concatenate(resid)
    assert 20 <= np.median(counts) <= 40  # the near road reads ~31 counts, not the simulated ~208
    spread = 1.4826 * np.median(np.abs(off))
    # photon counts: the spread's square is the level (Poisson), as the simulated APD noise's is not
    assert 0.7 < spread**2 / np.median(counts) < 1.4
