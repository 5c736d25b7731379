"""Type stub of the compiled echo tables of the waveform search (``_echo_table.c``)."""

from typing import Any

def echo_order(t: Any, amp: Any, order: Any, tied: Any, e: int, /) -> int:
    """Each pulse's echoes in time order into ``order``; returns the rows flagged in ``tied``."""

def gated_tables(
    ranges: Any,
    heights: Any,
    widths: Any,
    p: int,
    min_m: float,
    max_m: float,
    c_m_per_ns: float,
    t_out: Any,
    amp_out: Any,
    /,
) -> None:
    """A frame's gated (pulse, echo) tables of round-trip times and heights into ``t_out``, ``amp_out``."""
