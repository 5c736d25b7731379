"""Type stub of the compiled crosstalk echoes (``_crosstalk.c``)."""

from typing import Any

def setup(cos: Any, exp: Any, /) -> bool:
    """Take NumPy's float64 cos and exp loops; False when not found."""

def pair_bounds(
    t_a: Any, t_b: Any, na: int, nb: int, before: float, after: float, lo: Any, hi: Any, /
) -> int:
    """Each A pulse's range of B pulses in its window; returns the pairs."""

def rotate_unit(q: Any, v: Any, n: int, out: Any, one: bool = ..., /) -> None:
    """Unit world directions of sensor-frame directions rotated by quaternions."""

def echoes(*args: Any) -> tuple[int, int]:
    """The scattered and direct echoes of B's pulses in A's windows; returns how many of each."""

def probe(index: int, buf: Any, nin: int, /) -> None:
    """Run one of the loops setup() took on ``buf`` in place (kernels/np_loops.py checks them)."""
