"""Type stub of the compiled surface texture (``_texture.c``)."""

from typing import Any

def setup(log: Any, cos: Any, exp: Any, /) -> bool:
    """Take NumPy's float64 log, cos and exp loops; False when not found."""

def apply(
    direction: Any,
    range_m: Any,
    cos_incidence: Any,
    material: Any,
    sigma: Any,
    cell: Any,
    seed: Any,
    patch_sigma: Any,
    patch_m: Any,
    pose: Any,
    beam: Any,
    subrays: int,
    n: int,
    m: int,
    power: Any,
    refl: Any,
    /,
) -> int:
    """Scale the echoes by the texture at each hit, averaged over each pulse's footprint (``beam``: exit
    diameter and divergences; None: a point) with the patches (``patch_sigma`` None: none); returns the
    textured rays."""

def probe(index: int, buf: Any, nin: int, /) -> None:
    """Run one of the loops setup() took on ``buf`` in place (kernels/np_loops.py checks them)."""
