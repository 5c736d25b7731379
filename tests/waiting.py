"""Waiting in tests for what another thread or process does."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(cond: Callable[[], bool], timeout_s: float = 5.0, poll_s: float = 0.005) -> bool:
    """Whether ``cond()`` came true within ``timeout_s`` (checked every ``poll_s``)."""
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(poll_s)
    return True
