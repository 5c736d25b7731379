"""Type stub of the compiled choice of --beam full's bundled pulses (``_bundle_choice.c``)."""

from typing import Any

def setup(hypot: Any, /) -> bool:
    """Take NumPy's float32 hypot loop; False when not found."""

def choose(*args: Any) -> int:
    """Mark a frame's pulses by edge, glass and retro-reflector; returns the neighbour pairs (with the two
    optional outputs, the marking pairs written there and their count)."""

def seam(*args: Any) -> int:
    """Write a frame's seam probes' keys (ascending); returns their count."""

def probe(index: int, buf: Any, nin: int, /) -> None:
    """Run one of the loops setup() took on ``buf`` in place (kernels/np_loops.py checks them)."""
