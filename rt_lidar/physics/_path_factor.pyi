"""Type stub of the compiled path factor (``_path_factor.c``)."""

from typing import Any

def setup(exp: Any, power: Any, /) -> bool:
    """Take NumPy's float32 exp and float64 power loops; False when not found."""

def path_factor(
    range_m: Any,
    out: Any,
    n: int,
    c: float,
    has_gain: int,
    r10: float,
    exponent: float,
    has_focus: int,
    table: Any,
    m: int,
    inv_dr: float,
    /,
) -> None:
    """out = exp(c range) times the receiver's range law and focus loss (see the source)."""

def probe(index: int, buf: Any, nin: int, /) -> None:
    """Run one of the loops setup() took on ``buf`` in place (kernels/np_loops.py checks them)."""

def beam_focus(
    range_m: Any,
    ring: Any,
    table: Any,
    out: Any,
    n: int,
    m: int,
    k: int,
    inv_dr: float,
    /,
) -> bool:
    """out = each laser's focus loss over the preset's (see the source); False: a ring past the table."""
