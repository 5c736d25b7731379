"""Type stub of the compiled surface texture (``_texture.c``)."""

from typing import Any

def setup(log: Any, cos: Any, exp: Any, /) -> bool:
    """Take NumPy's float64 log, cos and exp loops; False when not found."""

def apply(
    direction: Any,
    range_m: Any,
    material: Any,
    sigma: Any,
    cell: Any,
    seed: Any,
    pose: Any,
    n: int,
    m: int,
    power: Any,
    refl: Any,
    /,
) -> int:
    """Scale the echoes by the texture at each hit; returns the textured rays."""

def probe(index: int, buf: Any, nin: int, /) -> None:
    """Run one of the loops setup() took on ``buf`` in place (kernels/np_loops.py checks them)."""
