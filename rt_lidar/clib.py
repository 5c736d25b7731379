"""The C library's functions that Python does not wrap (glibc's ``mallopt``, Linux's ``sync_file_range``)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from typing import Any

__all__ = ["libc_function"]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def libc_function(name: str, argtypes: list[Any], restype: Any) -> Any | None:
    """The C library's function ``name`` with its argument and result types set, or None off Linux
    and where the library lacks it (another C library)."""
    libc = _libc()
    func = getattr(libc, name, None) if libc is not None else None
    if func is None:
        return None
    func.argtypes, func.restype = argtypes, restype
    return func
