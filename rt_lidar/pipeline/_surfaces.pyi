"""Type stub of the compiled first-surface step (``_surfaces.c``)."""

from typing import Any

def first_surfaces(*arrays: Any) -> int:
    """The per-ray fields after the first surfaces, and the rays that pass glass; returns how many."""
