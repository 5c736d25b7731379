"""The viewer's help overlay and some of the HUD's lines (text only, no Qt)."""

from __future__ import annotations

import time
from typing import Any

from rt_lidar.viewer.sources import HudStats, LiveSource, RecordingSource

__all__ = ["HELP_TEXT", "bad_frame_lines", "frame_time_text", "live_lines", "stamp_text"]

HELP_TEXT = """<b>rt-lidar viewer</b><br>
1-7 &nbsp; colour: intensity, reflectivity, ring, range, return id, flags, sensor<br>
F2-F9 or the check boxes &nbsp; a rig's sensors 1-8 on / off<br>
C &nbsp; next colour mode &nbsp;&nbsp; + / - &nbsp; point size<br>
Space &nbsp; pause / resume &nbsp;&nbsp; N or . &nbsp; single step (when paused)<br>
, &nbsp; previous scan (recording) &nbsp;&nbsp; I &nbsp; image panels on / off<br>
R &nbsp; reconnect (live) / reset the camera &nbsp;&nbsp; P &nbsp; save a screenshot<br>
E &nbsp; export the scan on screen as PCD (every field; a rig: the sensors on, vehicle frame)<br>
click a point &nbsp; its fields (range, intensity, ring, time, flags, ...) &nbsp;&nbsp; drag &nbsp; orbit<br>
--drive: W/Up throttle, S/Down reverse, A/Left D/Right steer, X brake<br>
H, F1 or ? &nbsp; this help &nbsp;&nbsp; Q or Esc &nbsp; quit"""


def stamp_text(header: dict[str, Any]) -> str:
    """The HUD's stamp line: which clock the run's sinks stamp with, and this scan's stamp on it."""
    clock, stamp = header.get("stamp_clock"), header.get("stamp_ns")
    if clock is None or stamp is None:
        return "-"
    if clock == "wall":
        utc = time.strftime("%H:%M:%S", time.gmtime(stamp // 1_000_000_000))
        return f"wall clock (PTP-like)  {utc}.{stamp // 1_000_000 % 1000:03d} UTC"
    return f"sim clock  {stamp * 1e-9:.3f} s"


def live_lines(header: dict[str, Any]) -> list[str]:
    """The HUD line of the run's live figures the scan's header carries (``rt-lidar run --realtime``:
    the pace achieved and, when behind, by how much), as ``realtime 0.62x -1.5s``."""
    live = header.get("live")
    if not isinstance(live, dict) or not live:
        return []
    return ["run      " + "   ".join(f"{key} {value}" for key, value in live.items())]


def bad_frame_lines(source: object) -> list[str]:
    """A HUD line when the stream carried bad frames or the recording unreadable scans (skipped), with
    the latest reason."""
    if isinstance(source, RecordingSource) and source.bad_frames:
        return [f"skipped  {source.bad_frames} unreadable scan(s), latest {source.last_bad_name}"]
    if not isinstance(source, LiveSource) or source.bad_frames == 0:
        return []
    why = source.subscriber.stats.last_bad
    return [f"skipped  {source.bad_frames} bad frame(s): {why:.60}"]


def frame_time_text(stats: HudStats) -> str:
    """Where a frame's time went: the viewer's preparation and the GL paint (medians)."""
    prep, paint = stats.prepare_ms(), stats.paint_ms()
    if prep is None or paint is None:
        return "   -"
    return f"{prep:6.1f} ms prepare + {paint:.1f} ms paint"
