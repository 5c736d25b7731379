"""One ``summary.json`` for a run made of parts (``rt-lidar run --reconnect``: a part per connection).

Each part is the summary :func:`~rt_lidar.pipeline.scan_loop.drive_scans` wrote for it. The run's
summary adds up what adds up (frames, times, bridge counters, ``--beam full``'s counts), weights the
per-scan means by frames, recomputes the real-time factors from the sums, and lists every part with
its folder and outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["combine_parts"]

_SUMS = ("frames", "sim_frames", "scans_written", "sim_time_s", "wall_time_s", "pipeline_time_s")
_PER_SCAN = ("points_per_scan_mean", "drop_fraction")
_BRIDGE_SUMS = ("frames", "sector_mismatches", "fetch_time_s")
_PART_KEYS = (
    *_SUMS,
    "points_per_scan_mean",
    "drop_fraction",
    "realtime_factor",
    "stopped_early",
    "bridge",
)


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else float("inf")


def _bridge(parts: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    bridges = [p["bridge"] for p in parts if isinstance(p.get("bridge"), dict)]
    if not bridges:
        return None
    out = dict(bridges[-1])  # the server's capabilities as the last connection found them
    for key in _BRIDGE_SUMS:
        out[key] = sum(b.get(key, 0) or 0 for b in bridges)
    out["mismatch_detail"] = [d for b in bridges for d in b.get("mismatch_detail", [])][:100]
    return out


def _beam(parts: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The run's ``beam`` section: the beam that ran (the parts share it), with ``--beam full``'s counts
    (each part's: the frames it handed on) added up and their share taken from the sums; where the parts'
    modes differ, ``mode`` is ``mixed`` with each part's mode and section."""
    beams = [p["beam"] for p in parts if isinstance(p.get("beam"), dict)]
    if not beams:
        return None
    modes = [b.get("mode") for b in beams]
    if len(set(modes)) > 1:  # a part fell back (a server without the bundle call): say so, each part's own
        return {"mode": "mixed", "part_modes": modes, "parts": beams}
    out = dict(beams[0])
    if out.get("mode") != "full":
        return out
    pulses = sum(b.get("pulses", 0) or 0 for b in beams)
    bundled = sum(b.get("bundled_pulses", 0) or 0 for b in beams)
    reasons: dict[str, int] = {}
    for b in beams:
        for reason, n in (b.get("bundled_by_reason") or {}).items():
            reasons[reason] = reasons.get(reason, 0) + n
    out.update(
        pulses=pulses,
        bundled_pulses=bundled,
        bundled_share=bundled / pulses if pulses else 0.0,
        bundled_by_reason=reasons,
    )
    return out


def combine_parts(
    parts: Sequence[dict[str, Any]],
    dirs: Sequence[str],
    elapsed_s: float,
    stopped_early: str | None = None,
) -> dict[str, Any]:
    """The run's summary from its parts' summaries (``dirs``: each part's folder, relative to the run's).

    ``elapsed_s`` is the run's whole wall time; what the parts did not spend of it (connecting, waiting
    for the server to come back) is ``outside_parts_s``. ``stopped_early`` says why the run ended
    short, if it did.
    """
    if not parts:
        raise ValueError("combine_parts: a run has at least one part")
    if len(dirs) != len(parts):
        raise ValueError(f"combine_parts: {len(dirs)} folders for {len(parts)} parts")
    summary: dict[str, Any] = dict(parts[0])  # preset, sim_hz, rays_per_scan, scenario
    for key in _SUMS:
        summary[key] = sum(p.get(key, 0) or 0 for p in parts)
    frames = summary["frames"]
    for key in _PER_SCAN:
        weighted = sum((p.get(key, 0.0) or 0.0) * (p.get("frames", 0) or 0) for p in parts)
        summary[key] = weighted / frames if frames else 0.0
    summary["realtime_factor"] = _ratio(summary["sim_time_s"], summary["wall_time_s"])
    summary["pipeline_realtime_factor"] = _ratio(summary["sim_time_s"], summary["pipeline_time_s"])
    summary["stopped_early"] = stopped_early
    summary["bridge"] = _bridge(parts)
    beam = _beam(parts)
    if beam is not None:
        summary["beam"] = beam
    summary["parts"] = len(parts)
    summary["reconnects"] = len(parts) - 1
    summary["elapsed_s"] = elapsed_s
    summary["outside_parts_s"] = max(0.0, elapsed_s - summary["wall_time_s"])
    summary["part_summaries"] = [
        {"dir": d, **{k: p.get(k) for k in _PART_KEYS}} for p, d in zip(parts, dirs, strict=True)
    ]
    return summary
