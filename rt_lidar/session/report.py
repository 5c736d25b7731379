"""What a run prints when it ends: a few lines (where the outputs are, the real-time factor, anything
the user must know), not the whole summary (that is ``OUT/summary.json``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, TextIO

__all__ = ["print_report", "warnings_of"]


def warnings_of(summary: Mapping[str, Any]) -> list[str]:
    """The lines a user must read of ``summary``: scans dropped or lost, packets late or dropped."""
    lines: list[str] = []
    partial = summary.get("partial_first_scan")
    if partial:
        lines.append(
            f"the first scan (index {partial['index']}) was partial and is not written: the server's "
            f"clock was inside a rotation when the run started ({partial['fired']} of "
            f"{summary.get('rays_per_scan')} pulses)"
        )
    for sink in summary.get("sinks") or []:
        dropped = int(sink.get("dropped_late", 0)) + int(sink.get("dropped_full", 0))
        dropped += int(sink.get("dropped", 0))
        late = float(sink.get("lateness_p99_us", 0.0))
        if dropped:
            lines.append(
                f"{sink['sink']}: {dropped} of {int(sink.get('sent', 0)) + dropped} packets or frames "
                f"dropped (the simulation ran slower than the sensor sends: real-time factor "
                f"{summary.get('realtime_factor', 0):.2f}x)"
            )
        elif late > 1000.0:
            lines.append(f"{sink['sink']}: packets up to {late / 1000:.1f} ms late (99th percentile)")
    mismatches = (summary.get("bridge") or {}).get("sector_mismatches")
    if mismatches:
        lines.append(f"{mismatches} frames did not sweep what the preset fires (summary.json: bridge)")
    if summary.get("stopped_early"):
        lines.append(f"stopped early: {summary['stopped_early']}")
    return lines


def print_report(command: str, summary: Mapping[str, Any], out: str, stream: TextIO | None = None) -> None:
    """Print the end of a run: where its outputs are, its real-time factor, and its warnings."""
    stream = stream or sys.stdout
    scans = summary.get("frames", 0)
    rtf = float(summary.get("realtime_factor", 0.0))
    sim_s = float(summary.get("sim_time_s", 0.0))
    wall_s = float(summary.get("wall_time_s", 0.0))
    points = float(summary.get("points_per_scan_mean", 0.0))
    drop = float(summary.get("drop_fraction", 0.0))
    print(
        f"rt-lidar {command}: {scans} {summary.get('preset', '')} scans in {out}/ (summary.json)", file=stream
    )
    print(
        f"  real time {rtf:.2f}x ({sim_s:.2f} s simulated in {wall_s:.2f} s); "
        f"{points:,.0f} points a scan, {100 * drop:.1f} % of pulses without a return",
        file=stream,
    )
    beam = summary.get("beam")
    if isinstance(beam, Mapping) and beam.get("mode") == "full":
        share = 100 * float(beam.get("bundled_share", 0.0))
        bundle = f"the {beam.get('sub_rays')}-sub-ray bundle"
        if beam.get("bundle") == "sparse":
            bundle += f", sparse ({beam.get('cast_sub_rays')} sub-rays)"
        print(f"  --beam full: {share:.1f} % of pulses cast as {bundle}", file=stream)
    for line in warnings_of(summary):
        print(f"rt-lidar {command}: warning: {line}", file=sys.stderr)
