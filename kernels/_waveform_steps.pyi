"""Type stub of the waveform search's compiled integer steps (``_waveform_steps.c``)."""

from typing import Any

def peak_runs(wave: Any, n: int, b: int, threshold: float, ii: Any, bi: Any, lo: Any, hi: Any, /) -> int:
    """The peaks at or above the threshold and the runs above it around them; returns how many."""

def clusters(
    ts: Any, p: int, e: int, gap: float, span: float, pad: float, cid: Any, start: Any, spans: Any, /
) -> tuple[int, float]:
    """cluster_echoes' clusters of sorted echo times; returns (clusters, widest span)."""
