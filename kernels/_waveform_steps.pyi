"""Type stub of the waveform search's compiled integer steps (``_waveform_steps.c``)."""

from typing import Any

def peak_runs(wave: Any, n: int, b: int, threshold: float, ii: Any, bi: Any, lo: Any, hi: Any, /) -> int:
    """The peaks at or above the threshold and the runs above it around them; returns how many."""

def clusters(
    ts: Any, p: int, e: int, gap: float, span: float, pad: float, cid: Any, start: Any, spans: Any, /
) -> tuple[int, float]:
    """cluster_echoes' clusters of sorted echo times; returns (clusters, widest span)."""

def members(cid: Any, p: int, e: int, n: int, pi: Any, ci: Any, first: Any, count: Any, /) -> int:
    """Each cluster's first echo column and echo count; returns the largest count."""

def wave_args(
    t: Any,
    amp: Any,
    start: Any,
    pi: Any,
    first: Any,
    count: Any,
    p: int,
    e: int,
    m: int,
    b: int,
    dt: float,
    coef: float,
    arg: Any,
    amp_out: Any,
    /,
) -> None:
    """The exponents of the clusters' waveform samples and their echoes' amplitudes."""

def wave_sum(g: Any, amp: Any, n: int, m: int, b: int, wave: Any, /) -> None:
    """The clusters' waveforms: their samples times their amplitudes, added in order."""
