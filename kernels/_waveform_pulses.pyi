"""Type stub of the compiled CPU waveform search (``_waveform_pulses.c``)."""

from typing import Any

def setup(exp: Any, log: Any, /) -> bool:
    """Take NumPy's float32/float64 exp and float32 log loops; False when not found."""

def pulse_returns(
    t: Any,
    amp: Any,
    order: Any,
    sigma: Any,
    z: Any,
    p: int,
    e: int,
    d: int,
    consts: Any,
    kind: int,
    max_returns: int,
    r: int,
    pulse: Any,
    rid: Any,
    t_out: Any,
    amp_out: Any,
    epw_out: Any,
    echo: Any,
    fallback: Any,
    /,
) -> tuple[int, int]:
    """The waveform search pulse by pulse; returns (returns written, pulses left to NumPy)."""

def probe(index: int, buf: Any, nin: int, /) -> None:
    """Run one of the loops setup() took on ``buf`` in place (kernels/np_loops.py checks them)."""
