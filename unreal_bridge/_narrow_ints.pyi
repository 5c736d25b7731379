"""Type stub of the compiled narrow-int reader (``_narrow_ints.c``)."""

from typing import Any

def narrow_ints(buf: Any, p: int, n: int, out: Any, /) -> tuple[int, int]:
    """Decode ``n`` msgpack ints of 1 or 2 bytes at ``p`` into the int16 buffer ``out``.

    Returns ``(0, end)``, ``(1, read)`` for an element of another type, ``(2, complete)`` when cut short.
    """

def simd_used() -> bool:
    """Whether the 16-byte (SSSE3) path runs on this CPU (else the one-pass byte walk)."""
