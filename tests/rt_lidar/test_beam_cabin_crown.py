"""``--beam full`` behind glass and beside tree crowns (issue 43 item 1): a pulse whose central ray passes
glass and ends within ``BEHIND_GLASS_M`` behind the pane (a car's cabin, a window's reveal) gets the bundle
(reason ``behind_glass``), and so does each neighbour of a pulse that ended in a crown (``beside_volume``:
its central ray may have passed a gap between the leaves). Before, both were left to the neighbour test
and its probe, which missed most of them (docs/beam-full.md, "Behind glass and beside crowns")."""

from __future__ import annotations

import numpy as np

from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.beam_full import (
    BEHIND_GLASS_M,
    REASONS,
    _neighbour_pairs,
    beam_summary,
    behind_glass_marks,
    beside_volume,
)
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.beam import BeamConfig


def test_behind_glass_marks_take_shallow_spaces_behind_a_pane() -> None:
    rng = np.array([5.5, 8.0, 6.0, np.inf, 4.0], np.float32)
    glass_rng = np.array([5.0, 5.0, np.inf, 5.0, 3.0], np.float32)
    glass_mat = np.array([3, 3, -1, 3, 4], np.int16)
    # 0.5 m behind: a cabin; 3 m behind: a room; no glass; glass then nothing; 1 m behind
    assert behind_glass_marks(np, rng, glass_rng, glass_mat).tolist() == [True, False, False, False, True]
    assert BEHIND_GLASS_M == 2.0


def test_beside_volume_takes_the_neighbours_not_the_crown_pulses() -> None:
    volume = np.array([False, True, False, False, True])
    i = np.array([0, 1, 2, 3], np.int64)
    j = np.array([1, 2, 3, 4], np.int64)
    assert beside_volume(np, volume, i, j).tolist() == [True, False, True, True, False]
    assert not beside_volume(np, np.zeros(5, bool), i, j).any()


def test_on_the_street_cabins_and_crown_gaps_get_the_bundle() -> None:
    """HDL-64E on the street, in-process: every pulse whose central ray passes glass and ends within 2 m
    behind it, and every neighbour of a pulse ending in a crown, is among the bundled ones (on the code
    before this change 3,113 of the first frame's 4,226 such cabin pulses kept one ray), and summary.json
    counts them."""
    beam = BeamConfig(return_mode="dual", full=True)
    cfg = PhysicsConfig(beam=beam, receiver_noise=False, range_noise=False)
    built = build_pipeline("HDL-64E", "street", seed=3, physics=cfg)
    sensed: list = []
    built.pipeline.on_sensed = sensed.append
    try:
        for _ in range(3):
            built.pipeline.step()
    finally:
        built.pipeline.close()
    leaves = built.world.material_names.index("vegetation")
    cabins = beside = 0
    for s in sensed:
        hits = s.hits
        bundled = np.zeros(len(hits.firings), bool)
        if hits.bundle is not None:
            bundled[hits.bundle.pulses] = True
        with np.errstate(invalid="ignore"):
            cabin = (hits.glass_material >= 0) & (hits.range_m - hits.glass_range_m < BEHIND_GLASS_M)
        assert bundled[cabin].all()
        crown = np.isfinite(hits.range_m) & (hits.material == leaves)
        near = beside_volume(np, crown, *_neighbour_pairs(hits.firings))
        assert bundled[near].all()
        cabins += int(cabin.sum())
        beside += int(near.sum())
    summary = beam_summary(built.pipeline)
    assert set(summary["bundled_by_reason"]) == set(REASONS)
    assert summary["bundled_by_reason"]["behind_glass"] == cabins > 100
    assert summary["bundled_by_reason"]["beside_volume"] == beside > 0
    assert summary["bundled_share"] < 0.45
