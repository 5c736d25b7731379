"""A run's summary from its parts: sums, frame-weighted means, ratios from the sums, every part listed."""

from __future__ import annotations

import pytest

from rt_lidar.session.run_summary import combine_parts


def part(frames: int, sim_s: float, wall_s: float, points: float, stopped: str | None) -> dict[str, object]:
    return {
        "preset": "VLP-16",
        "frames": frames,
        "sim_frames": 2 * frames,
        "scans_written": frames,
        "sim_time_s": sim_s,
        "wall_time_s": wall_s,
        "pipeline_time_s": wall_s / 2,
        "points_per_scan_mean": points,
        "drop_fraction": 0.1,
        "realtime_factor": sim_s / wall_s,
        "stopped_early": stopped,
        "bridge": {
            "server": "x",
            "frames": 2 * frames,
            "sector_mismatches": 1,
            "fetch_time_s": 0.5,
            "mismatch_detail": ["a"],
        },
    }


def test_parts_add_up_and_are_all_listed() -> None:
    parts = [part(3, 0.3, 0.6, 100.0, "ConnectionLost: gone"), part(5, 0.5, 0.5, 200.0, None)]
    s = combine_parts(parts, [".", "part01"], elapsed_s=3.0)
    assert s["frames"] == 8 and s["sim_frames"] == 16 and s["scans_written"] == 8
    assert s["sim_time_s"] == pytest.approx(0.8) and s["wall_time_s"] == pytest.approx(1.1)
    assert s["realtime_factor"] == pytest.approx(0.8 / 1.1)
    assert s["points_per_scan_mean"] == pytest.approx((3 * 100 + 5 * 200) / 8)
    assert s["stopped_early"] is None and s["parts"] == 2 and s["reconnects"] == 1
    assert s["outside_parts_s"] == pytest.approx(1.9)
    assert s["bridge"]["frames"] == 16 and s["bridge"]["mismatch_detail"] == ["a", "a"]
    assert [p["dir"] for p in s["part_summaries"]] == [".", "part01"]
    assert s["part_summaries"][0]["stopped_early"] == "ConnectionLost: gone"


def full_beam(pulses: int, bundled: int, edge: int, volume: int) -> dict[str, object]:
    return {
        "mode": "full",
        "sub_rays": 19,
        "return_mode": "dual",
        "pulses": pulses,
        "bundled_pulses": bundled,
        "bundled_share": bundled / pulses,
        "bundled_by_reason": {"edge": edge, "glass": 0, "retro": 0, "volume": volume},
    }


def test_full_beam_counts_add_up_over_the_parts() -> None:
    """A reconnected run's ``--beam full`` counts are those of every part's frames, not the first's."""
    parts = [part(3, 0.3, 0.6, 100.0, "ConnectionLost: gone"), part(5, 0.5, 0.5, 200.0, None)]
    parts[0]["beam"] = full_beam(1000, 100, 80, 30)
    parts[1]["beam"] = full_beam(3000, 600, 500, 150)
    s = combine_parts(parts, [".", "part01"], elapsed_s=3.0)
    assert s["beam"]["pulses"] == 4000 and s["beam"]["bundled_pulses"] == 700
    assert s["beam"]["bundled_share"] == pytest.approx(700 / 4000)
    assert s["beam"]["bundled_by_reason"] == {"edge": 580, "glass": 0, "retro": 0, "volume": 180}
    assert s["beam"]["mode"] == "full" and s["beam"]["sub_rays"] == 19
    assert parts[0]["beam"]["pulses"] == 1000  # the parts' own sections are left as they were


def test_a_fixed_beam_is_the_parts_one() -> None:
    parts = [part(3, 0.3, 0.6, 100.0, None), part(5, 0.5, 0.5, 200.0, None)]
    for p in parts:
        p["beam"] = {"mode": "fixed", "sub_rays": 1, "return_mode": "strongest"}
    s = combine_parts(parts, [".", "part01"], elapsed_s=3.0)
    assert s["beam"] == {"mode": "fixed", "sub_rays": 1, "return_mode": "strongest"}


def test_parts_of_different_beams_are_reported_as_mixed() -> None:
    """A part that fell back to the fixed beam is not hidden behind the first part's mode."""
    parts = [part(3, 0.3, 0.6, 100.0, "ConnectionLost: gone"), part(5, 0.5, 0.5, 200.0, None)]
    parts[0]["beam"] = full_beam(1000, 100, 80, 30)
    parts[1]["beam"] = {"mode": "fixed", "sub_rays": 1, "return_mode": "dual"}
    s = combine_parts(parts, [".", "part01"], elapsed_s=3.0)
    assert s["beam"]["mode"] == "mixed" and s["beam"]["part_modes"] == ["full", "fixed"]
    assert s["beam"]["parts"] == [parts[0]["beam"], parts[1]["beam"]]


def test_a_run_has_parts() -> None:
    with pytest.raises(ValueError, match="at least one part"):
        combine_parts([], [], 0.0)
