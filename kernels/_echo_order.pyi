"""Type stub of the compiled echo order of the waveform search (``_echo_order.c``)."""

from typing import Any

def echo_order(t: Any, amp: Any, order: Any, tied: Any, e: int, /) -> int:
    """Each pulse's echoes in time order into ``order``; returns the rows flagged in ``tied``."""
