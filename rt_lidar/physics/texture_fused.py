"""The surface texture of a batch in one compiled pass (``_texture``), where it was built.

:func:`apply` does what :func:`rt_lidar.physics.texture.texture_apply`'s NumPy code does (the textured
rays' world points, their footprints' areas, the factor of each footprint's cube and patch, the echoes
scaled by it), bit for bit
(``tests/rt_lidar/test_texture_fused.py``), with the GIL released; False when off or given arrays it
does not take (the compiled backend, :meth:`rt_lidar.backend.CompiledBackend.texture_apply`, then runs
the NumPy code).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from rt_lidar.kernels.np_loops import LoopCheck

if TYPE_CHECKING:
    from rt_lidar.pipeline.sources import Hits
    from rt_lidar.sensor.materials import MaterialArrays

try:
    from rt_lidar.physics import _texture as _c
except ImportError:  # built without a C compiler: the NumPy code runs
    _c = None  # type: ignore[assignment]

__all__ = ["apply", "available"]

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled step off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` switches every twin off)."""

_loops_ok = LoopCheck(
    _c, (np.log, np.cos, np.exp), [(np.log, np.float64), (np.cos, np.float64), (np.exp, np.float64)]
)


def available() -> bool:
    """Whether the compiled step runs (built, on, and NumPy's log, cos and exp loops found)."""
    return enabled and _loops_ok()


def apply(
    materials: MaterialArrays,
    seeds: np.ndarray,
    hits: Hits,
    power: np.ndarray,
    refl: np.ndarray,
    beam: tuple[float, float, float] | None = None,
) -> bool:
    """Scale ``power`` and ``refl`` (float32, one per ray, in place) by the texture at each hit of
    ``hits`` (materials' seeds ``seeds``), averaged over each pulse's footprint of ``beam``
    (:func:`rt_lidar.physics.texture.footprint_beam`; None: a point); False (nothing done) when off or
    for other arrays."""
    sig, cell = materials.texture_sigma, materials.texture_cell_m
    n = hits.range_m.shape[0]
    if not available() or sig is None or cell is None:
        return False
    want: list[tuple[np.ndarray, type, tuple[int, ...]]] = [
        (hits.direction, np.float32, (n, 3)),
        (hits.range_m, np.float32, (n,)),
        (hits.cos_incidence, np.float32, (n,)),
        (hits.material, np.int16, (n,)),
        (power, np.float32, (n,)),
        (refl, np.float32, (n,)),
    ]
    if any(not isinstance(a, np.ndarray) or a.dtype != d or a.shape != s for a, d, s in want):
        return False
    if not (power.flags.c_contiguous and refl.flags.c_contiguous):
        return False
    pose = None
    if hits.pose_start is not None:
        p0, q0 = (np.asarray(v, np.float32).astype(np.float64) for v in hits.pose_start)
        pose = np.concatenate([p0.reshape(3), (q0 / np.linalg.norm(q0)).reshape(4)])
    c = np.ascontiguousarray
    tables = [c(np.asarray(t).astype(np.float64)) for t in (sig, cell)]
    m = int(tables[0].shape[0])
    if tables[1].shape[0] != m or seeds.shape != (m,) or seeds.dtype != np.uint64:
        return False
    seeds_i8 = c(seeds).view(np.int64)  # the same 64 bits (the buffer protocol names uint64 "L")
    psig, pm = materials.texture_patch_sigma, materials.texture_patch_m
    patch_sigma = None if psig is None or pm is None else c(np.asarray(psig).astype(np.float64))
    patch_m = c(np.asarray(pm if pm is not None else np.ones(m)).astype(np.float64))
    if patch_m.shape != (m,) or (patch_sigma is not None and patch_sigma.shape != (m,)):
        return False
    beam_arr = None if beam is None else np.asarray(beam, np.float64).reshape(3)
    _c.apply(
        c(hits.direction), c(hits.range_m), c(hits.cos_incidence), c(hits.material), tables[0], tables[1],
        seeds_i8, patch_sigma, patch_m, pose, beam_arr, int(hits.subrays), n, m, power, refl,
    )  # fmt: skip
    return True
