"""Type stub of the compiled intensity chain (``_intensity_chain.c``)."""

from typing import Any

def setup(log10: Any, expm1: Any, /) -> bool:
    """Take NumPy's float32 log10 and float64 expm1 loops; False when not found."""

def chain(
    power: Any,
    sigma: Any,
    idx: Any,
    z: Any,
    refl: Any,
    range_m: Any,
    flags: Any,
    params: Any,
    m: int,
    p: int,
    refl_out: Any,
    intensity_out: Any,
    flags_out: Any,
    steps: Any,
    /,
) -> None:
    """The reflectivity, reported intensity and flags of m detections (``steps``: each one's raw-reading
    step of calibrated reflectivity, float64 (m,), or None)."""

def probe(index: int, buf: Any, nin: int, /) -> None:
    """Run one of the loops setup() took on ``buf`` in place (kernels/np_loops.py checks them)."""
