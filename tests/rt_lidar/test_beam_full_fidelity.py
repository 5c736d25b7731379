"""``--beam full`` keeps the statistics of dense (19-sub-ray) sampling within stated tolerances.

The tolerances (:data:`rt_lidar.validation.beam_full_check.TOLERANCES`, also in docs/beam-full.md), as
(relative, absolute floor) of the dense run's value:

- share of second returns in dual mode: 10 % (floor 0.0005)
- blooming-flagged points per scan: 10 % (floor 3 points)
- echo pulse width, median and 90th percentile: 2 %
- mixed-pixel points at depth edges per scan: 15 % (floor 5 points)

on the street (HDL-64E, clear and in 25 mm/h of rain) and the validation scenes (the LineTrace seed's
rain scene, :func:`rt_lidar.validation.scenes.rain_test_scene`, with a VLP-16 in rain and clear air;
the reflectance targets with their retro-reflective panels).
"""

from __future__ import annotations

import math

import pytest

from rt_lidar.validation.beam_full_check import TOLERANCES, compare_full_beam, within_tolerance
from rt_lidar.validation.scenes import rain_test_scene

CASES = [
    pytest.param("HDL-64E", "street", 0.0, 1, id="street-hdl64e"),
    # three scans: on one the bloom count sits at its 10 % bound (--beam full 63 / 62 against 19 sub-rays'
    # 69 before / after change 63's near field); over three 60.3 / 60.0 against 66.7 / 66.3, both inside
    pytest.param("VLP-32C", "street", 25.0, 3, id="street-vlp32c-rain25"),
    pytest.param("VLP-16", rain_test_scene, 25.0, 6, id="rain-scene-vlp16-rain25"),
    pytest.param("VLP-16", rain_test_scene, 0.0, 6, id="rain-scene-vlp16-clear"),
    pytest.param("HDL-64E", "targets", 0.0, 1, id="targets-hdl64e"),
]


def test_tolerances_are_the_documented_ones() -> None:
    assert TOLERANCES == {
        "second_return_share": (0.10, 0.0005),
        "bloom_points": (0.10, 3.0),
        "epw_median_ns": (0.02, 0.0),
        "epw_p90_ns": (0.02, 0.0),
        "mixed_pixel_points": (0.15, 5.0),
    }


@pytest.mark.parametrize(("preset", "scene", "rain", "scans"), CASES)
def test_full_beam_matches_dense_sampling(preset: str, scene: object, rain: float, scans: int) -> None:
    full, dense = compare_full_beam(preset, scene, rain_mm_h=rain, scans=scans)  # type: ignore[arg-type]
    report = within_tolerance(full, dense)
    bad = {k: v for k, v in report.items() if not v[2]}
    assert not bad, f"--beam full vs 19 sub-rays out of tolerance: {bad}"
    # the comparison is not vacuous: the dense run has echo widths, and the full run bundled a part only
    assert not math.isnan(dense.epw_median_ns) and dense.points > 1000
    share = full.beam["bundled_share"]
    assert full.beam["mode"] == "full" and 0.0 < share < 0.45


def test_the_statistics_that_need_the_bundle_are_there() -> None:
    """On the street the dense bundle blooms, parts echoes and leaves mixed pixels (so the comparisons
    above test something), and one ray a pulse would miss them: the tolerances are tighter than that."""
    full, dense = compare_full_beam("HDL-64E", "street", scans=1)
    assert dense.bloom_points >= 20 and dense.second_return_share > 0.005 and dense.mixed_pixel_points > 50
    from rt_lidar.sensor.beam import BeamConfig
    from rt_lidar.validation.beam_full_check import beam_statistics

    single = beam_statistics("HDL-64E", "street", BeamConfig(1, "dual"), scans=1)
    rel_single = abs(single.second_return_share - dense.second_return_share) / dense.second_return_share
    rel_full = abs(full.second_return_share - dense.second_return_share) / dense.second_return_share
    assert single.bloom_points < 0.5 * dense.bloom_points
    assert rel_full < TOLERANCES["second_return_share"][0] < rel_single
