"""What the sinks that pace or stream report at the end of a run (``summary.json``'s ``sinks``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["sink_reports"]


def sink_reports(specs: Iterable[str], sinks: Iterable[object]) -> list[dict[str, Any]]:
    """Per sink that paces or streams: what it sent, dropped and how late (``summary.json``'s
    ``sinks``). A packet sink records its pacer's counts; the stream its publisher's."""
    out: list[dict[str, Any]] = []
    for spec, sink in zip(specs, sinks, strict=False):
        stats = getattr(sink, "stats", None)
        if stats is None:
            continue
        summary = getattr(stats, "summary", None)
        if callable(summary):
            out.append({"sink": spec, **summary()})
        elif hasattr(stats, "sent") and hasattr(stats, "dropped"):
            out.append({"sink": spec, "sent": int(stats.sent), "dropped": int(stats.dropped)})
    return out


def live_sink_figures(specs: Iterable[str], sinks: Iterable[object]) -> dict[str, str]:
    """The live figures of the sinks that pace packets (what the HUD and the progress line show):
    ``{"velodyne-udp": "sent 12000 dropped 40"}`` for each that has sent or dropped anything."""
    out: dict[str, str] = {}
    for spec, sink in zip(specs, sinks, strict=False):
        live = getattr(sink, "live_counts", None)
        counts = live() if callable(live) else None
        if counts is None or not any(counts):
            continue
        sent, dropped = counts
        out[spec.split(":", 1)[0]] = f"sent {sent} dropped {dropped}" if dropped else f"sent {sent}"
    return out
