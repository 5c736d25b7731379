"""Type stub of the compiled standard-normal twin (``_normals.c``)."""

from typing import Any

def open_numpy(path: str) -> bool:
    """Look NumPy's draws up in the loaded module at ``path`` and read its ziggurat tables."""

def fill(
    state_hi: int, state_lo: int, inc_hi: int, inc_lo: int, has_uint32: int, uinteger: int, out: Any
) -> tuple[int, int, int, int]:
    """Draw ``out``'s standard normals (float64 or float32) from the PCG64 state; returns the state
    after (state_hi, state_lo, has_uint32, uinteger)."""

def uniform_below(
    state_hi: int, state_lo: int, inc_hi: int, inc_lo: int, empty: Any, p: Any, out: Any
) -> tuple[int, int, int]:
    """Draw ``empty.size`` uniform doubles from the PCG64 state and write the positions ``j`` where
    ``empty[j]`` and the draw is below ``p[j]`` (or ``p[0]``) to ``out``; returns (state_hi, state_lo,
    count)."""

def tables() -> tuple[bytes, bytes, bytes, bytes]:
    """The tables read: widths and limits, float64 then float32."""
