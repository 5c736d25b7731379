"""``--beam full`` behind glass and beside tree crowns (docs/realism.md change 76): a pulse whose central
ray passes glass and ends within ``BEHIND_GLASS_M`` behind the pane (a car's cabin, a window's reveal)
casts two cabin probes past the pane and gets the bundle where one sees a step (reason
``behind_glass``); each neighbour of a pulse that ended in a crown gets it unasked (``beside_volume``).
Before, both were left to the neighbour test and its probe, which missed most of them
(docs/beam-full.md, "Behind glass and beside crowns")."""

from __future__ import annotations

import numpy as np
from beam_street import street_full_beam

from rt_lidar.pipeline.beam_cabin import (
    BEHIND_GLASS_M,
    CABIN_SIDES,
    behind_glass_marks,
    beside_volume,
    cabin_pattern,
    cabin_probe_marks,
)
from rt_lidar.pipeline.beam_full import REASONS, _neighbour_pairs, full_beam_plan
from rt_lidar.sensor.presets import load_preset


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


def test_the_cabin_probes_lie_on_the_diagonals_the_pair_probes_do_not_take() -> None:
    for name in ("HDL-64E", "VLP-32C"):
        plan = full_beam_plan(load_preset(name), np.zeros(1))
        off = np.asarray(plan.pattern.offsets_rad)
        probes = cabin_pattern(plan.pattern)
        assert len(probes) == CABIN_SIDES == 2
        h, v = np.abs(off[:, 0]).max(), np.abs(off[:, 1]).max()
        assert np.allclose(probes.offsets_rad, [[h, v], [-h, -v]])


class _Rays:
    def __init__(self, rng: list[float], seg: list[int], mat: list[int], glass: list[int]) -> None:
        self.range_m = np.array(rng, np.float32)
        self.segment = np.array(seg, np.uint32)
        self.material = np.array(mat, np.int16)
        self.glass_material = np.array(glass, np.int16)


def test_a_cabin_probe_sees_a_step_a_miss_another_surface_or_the_pane_left() -> None:
    central = _Rays([6.0], [7], [2], [5])
    pulse = np.zeros(6, np.int64)
    probe = _Rays(
        [6.03, 6.2, np.inf, 6.0, 6.0, 6.0],  # the same seat; 20 cm behind; nothing; ...
        [7, 7, 0, 8, 7, 7],  # ... another object; ...
        [2, 2, -1, 2, 3, 2],  # ... another material; ...
        [5, 5, 5, 5, 5, -1],  # ... past the pane's edge (no glass)
    )
    marks = cabin_probe_marks(central, pulse, probe)  # type: ignore[arg-type]
    assert marks.tolist() == [False, True, True, True, True, True]


def test_on_the_street_cabins_with_a_step_and_crown_gaps_get_the_bundle() -> None:
    """HDL-64E on the street, in-process: every neighbour of a pulse ending in a crown is among the
    bundled ones; of the pulses behind glass within 2 m some keep one ray (their probes see the same seat
    or panel), the rest get the bundle, and summary.json counts both reasons."""
    materials, sensed, summary = street_full_beam()
    leaves = materials.index("vegetation")
    cabins = cabins_bundled = beside = 0
    for s in sensed:
        hits = s.hits
        bundled = np.zeros(len(hits.firings), bool)
        if hits.bundle is not None:
            bundled[hits.bundle.pulses] = True
        cabin = behind_glass_marks(np, hits.range_m, hits.glass_range_m, hits.glass_material)
        crown = np.isfinite(hits.range_m) & (hits.material == leaves)
        near = beside_volume(np, crown, *_neighbour_pairs(hits.firings))
        assert bundled[near].all()
        cabins += int(cabin.sum())
        cabins_bundled += int(bundled[cabin].sum())
        beside += int(near.sum())
    assert set(summary["bundled_by_reason"]) == set(REASONS)
    assert summary["bundled_by_reason"]["beside_volume"] == beside > 0
    assert 0 < summary["bundled_by_reason"]["behind_glass"] <= cabins_bundled < cabins
    assert summary["bundled_share"] < 0.2
