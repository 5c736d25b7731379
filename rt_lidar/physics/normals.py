"""Standard normals of a frame's random stream, drawn by a compiled twin of NumPy's own draw.

The physics draws ~130,000 standard normals a HDL-64E sim frame (the detection draw against the noise
floor, the range noise). NumPy's ``Generator.standard_normal`` takes ~11 ns a draw on this project's CI
machine; ``_normals`` draws the same values, bit for bit and leaving the generator in the same state,
in ~3 ns where the generator is NumPy's PCG64 (what :meth:`Pipeline._rng` makes): the ziggurat's fast
path with the PCG64 steps inline, and NumPy's own function for the ~1.5 % of draws that leave it
(``rt_lidar/physics/_normals.c`` says how). Before its first use the twin is held to NumPy's draws
(:func:`check`); where it is not built, fails that check, or the twins are switched off
(``RT_LIDAR_NO_TWINS=1``, :data:`rt_lidar.physics.fused.enabled`), NumPy draws.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import numpy as np

try:
    from rt_lidar.physics import _normals as _c
except ImportError:  # built without a C compiler: NumPy draws
    _c = None  # type: ignore[assignment]

__all__ = ["available", "check", "standard_normal", "uniform_below"]

_MASK64 = (1 << 64) - 1
_check_lock = threading.Lock()


def standard_normal(
    rng: np.random.Generator, size: int | tuple[int, ...], dtype: Any = np.float64
) -> np.ndarray:
    """``rng.standard_normal(size, dtype)``: the same values, and ``rng`` left in the same state."""
    dtype = np.dtype(dtype)
    bit_generator = rng.bit_generator
    if type(bit_generator) is not np.random.PCG64 or dtype not in (np.float64, np.float32) or not available():
        return rng.standard_normal(size, dtype)
    out = np.empty(size, dtype)
    with bit_generator.lock:
        _fill(bit_generator, out)
    return out


def uniform_below(rng: np.random.Generator, empty: np.ndarray, p: np.ndarray | float) -> np.ndarray:
    """``np.nonzero(empty & (rng.random(empty.size) < p))[0]``: the same positions, and ``rng`` left in the
    same state, without the draws' array where the compiled twin draws. ``empty`` is a bool (N,) array,
    ``p`` a probability per position or one for all."""
    p64 = np.asarray(p, np.float64).reshape(-1)
    if type(rng.bit_generator) is not np.random.PCG64 or p64.size not in (1, empty.size) or not available():
        return np.nonzero(empty & (rng.random(empty.size) < p))[0]
    with rng.bit_generator.lock:
        return _below(rng.bit_generator, np.ascontiguousarray(empty, bool), p64)


def _below(bit_generator: np.random.BitGenerator, empty: np.ndarray, p64: np.ndarray) -> np.ndarray:
    out = np.empty(empty.size, np.int64)
    state = bit_generator.state
    s, inc = state["state"]["state"], state["state"]["inc"]
    s_hi, s_lo, count = _c.uniform_below(s >> 64, s & _MASK64, inc >> 64, inc & _MASK64, empty, p64, out)
    state["state"]["state"] = (s_hi << 64) | s_lo
    bit_generator.state = state
    return out[:count].astype(np.intp, copy=False)


def _fill(bit_generator: np.random.BitGenerator, out: np.ndarray) -> None:
    state = bit_generator.state
    s, inc = state["state"]["state"], state["state"]["inc"]
    buffered = state["has_uint32"], state["uinteger"]
    s_hi, s_lo, has_uint32, uinteger = _c.fill(
        s >> 64, s & _MASK64, inc >> 64, inc & _MASK64, *buffered, out.reshape(-1)
    )
    bit_generator.state = {
        "bit_generator": state["bit_generator"],
        "state": {"state": (s_hi << 64) | s_lo, "inc": inc},
        "has_uint32": has_uint32,
        "uinteger": uinteger,
    }


def available() -> bool:
    """Whether the compiled twin draws (built, switched on with the other twins, and it passed
    :func:`check`)."""
    from rt_lidar.physics import fused  # the twins' switch; fused uses this module

    return _c is not None and fused.enabled and check()


@functools.cache
def check() -> bool:
    """Open NumPy's draws and tables (``_normals.open_numpy``) and hold the twin to NumPy's own
    ``standard_normal``: float64 and float32 draws from several seeded PCG64 streams, one with half of
    a 64-bit output buffered, long enough to take every kind of slow draw, and the generator's state
    after them. Checked once a process (~30 ms; :func:`rt_lidar.physics.fused.prepare` does it before
    a run's clock starts)."""
    with _check_lock:
        return _check()


def _check() -> bool:
    if _c is None:
        return False
    import numpy.random._generator as numpy_generator

    try:
        if not _c.open_numpy(numpy_generator.__file__):
            return False
    except OSError:
        return False
    for seed in range(3):
        for dtype in (np.float64, np.float32):
            ours = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 20_240_101])))
            numpy_s = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 20_240_101])))
            if seed == 1:  # leave the upper half of a 64-bit output buffered
                ours.random(1, np.float32)
                numpy_s.random(1, np.float32)
            for n in (1, 3, 150_001):
                got = np.empty(n, dtype)
                _fill(ours.bit_generator, got)
                if got.tobytes() != numpy_s.standard_normal(n, dtype).tobytes():
                    return False
            if ours.bit_generator.state != numpy_s.bit_generator.state:
                return False
        if not _uniform_matches(seed):
            return False
    return True


def _uniform_matches(seed: int) -> bool:
    """The compiled uniform draws against NumPy's ``random``: positions and state, one probability for
    all and one per position (the check's share for :func:`uniform_below`)."""
    ours = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 20_240_102])))
    numpy_s = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 20_240_102])))
    for n in (1, 5, 100_003):
        empty = numpy_s.random(n) < 0.8
        ours.random(n)
        for p in (numpy_s.random(n), np.float64(0.3)):
            if isinstance(p, np.ndarray):
                ours.random(n)
            got = _below(ours.bit_generator, empty, np.asarray(p, np.float64).reshape(-1))
            want = np.nonzero(empty & (numpy_s.random(n) < p))[0]
            if not np.array_equal(got, want):
                return False
    return ours.bit_generator.state == numpy_s.bit_generator.state
