"""The check that a compiled twin's borrowed NumPy loops are NumPy's (``unreal_bridge/_np_loops.h``).

The twins that call NumPy's exp, log, log10, expm1, cos and hypot take the inner loops from the ufunc
objects' legacy table. Should a NumPy release run other loops for those types (a new-style loop
registered beside the table), the values could differ in the last bits, silently: :func:`loops_agree`
runs each borrowed loop (the module's ``probe``) on values across its domain and its edges and compares
the bytes with the ufunc's own, once per process; a module whose loops disagree stays off and its NumPy
code runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["LoopCheck", "loops_agree", "probe_values"]


def probe_values(dtype: Any, n: int = 4096) -> np.ndarray:
    """Values across the float range and its edges (zeros, infinities, NaN, subnormals, huge), ``dtype``."""
    rng = np.random.default_rng(43)
    info = np.finfo(dtype)
    edges = [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        float(info.tiny),
        float(info.tiny) / 8,
        float(info.max),
        1.0,
        -1.0,
    ]
    spread = [rng.standard_normal(n) * s for s in (1.0, 30.0, 1e3, 1e-3)]
    with np.errstate(over="ignore"):
        return np.concatenate([np.array(edges), *spread, rng.uniform(-750, 750, n)]).astype(dtype)


def loops_agree(module: Any, loops: list[tuple[np.ufunc, Any]]) -> bool:
    """Whether ``module.probe`` (loop ``k`` of ``loops``: (ufunc, dtype)) gives the ufunc's own bytes."""
    for k, (ufunc, dtype) in enumerate(loops):
        x = probe_values(dtype)
        args = [x] if ufunc.nin == 1 else [x, probe_values(dtype)[::-1].copy()]
        with np.errstate(all="ignore"):
            want = ufunc(*args)
        buf = np.ascontiguousarray(np.concatenate(args))
        try:
            module.probe(k, buf, ufunc.nin)
        except (ValueError, TypeError, AttributeError):
            return False
        if buf[: x.size].tobytes() != np.asarray(want, dtype).tobytes():
            return False
    return True


class LoopCheck:
    """Whether a compiled twin ``module`` can run: it was built (not ``None``), its ``setup`` found the
    ``ufuncs``' loops and those ``loops`` (:func:`loops_agree`) give NumPy's bytes; checked on the first
    call, once per process. The twin's own ``enabled`` switch stays the caller's."""

    def __init__(self, module: Any, ufuncs: tuple[np.ufunc, ...], loops: list[tuple[np.ufunc, Any]]) -> None:
        self.module, self.ufuncs, self.loops = module, ufuncs, loops
        self._ready: bool | None = None

    def __call__(self) -> bool:
        """Whether the module is built and its borrowed loops are NumPy's."""
        if self.module is None:
            return False
        if self._ready is None:
            self._ready = bool(self.module.setup(*self.ufuncs)) and loops_agree(self.module, self.loops)
        return self._ready
