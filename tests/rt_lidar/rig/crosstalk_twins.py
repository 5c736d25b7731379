"""The crosstalk's compiled echoes held to its NumPy code on the same pulses (shared by the rig's tests)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from rt_lidar.rig import crosstalk, crosstalk_fused


def echoes_both_ways(a: Any, pa: Any, b: Any, pb: Any, fresh: bool = False) -> tuple[np.ndarray, ...]:
    """The echoes of sensor ``a``'s pulses ``pa`` by ``b``'s ``pb``, compiled and by NumPy (with ``fresh``
    copies of the pulses for NumPy, made after the compiled call: no time order found yet), asserted
    byte for byte equal; NumPy's echoes."""
    fast = crosstalk_fused.echoes(pa, pb, *crosstalk.twin_arguments(a, pa, b, pb))
    if fresh:
        pa, pb = dataclasses.replace(pa), dataclasses.replace(pb)
    crosstalk_fused.enabled = False
    try:
        want = crosstalk.echoes(a, pa, b, pb)
    finally:
        crosstalk_fused.enabled = True
    assert fast is not None
    for g, w in zip(fast, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()
    return tuple(want)
