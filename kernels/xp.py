"""Choosing the array module (NumPy or CuPy) from the arrays themselves."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["array_module", "cupy_available", "to_numpy"]


def _cupy() -> ModuleType | None:
    try:
        import cupy
    except Exception:  # ImportError, or a CUDA runtime error on a machine without a GPU
        return None
    return cupy


def cupy_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    cp = _cupy()
    if cp is None:
        return False
    try:
        return bool(cp.cuda.runtime.getDeviceCount() > 0)
    except Exception:
        return False


def array_module(*arrays: Any) -> ModuleType:
    """``cupy`` if any argument is a CuPy array, else ``numpy``; never imports CuPy for NumPy input."""
    for a in arrays:
        if type(a).__module__.startswith("cupy"):
            cp = _cupy()
            if cp is not None:
                return cp
    return np


def to_numpy(a: Any) -> np.ndarray:
    """Host copy of an array from either module (no copy for NumPy input)."""
    if type(a).__module__.startswith("cupy"):
        return np.asarray(a.get())
    return np.asarray(a)
