"""Surface texture: a reflectance factor fixed in world coordinates, so the same spot of road reads the same
from every ray, scan and run, and neighbouring spots differ as real asphalt's aggregate and patches do.

The world is cut into cubes of ``cell_m``, shifted by a fraction of a cube (0.318, 0.577, 0.414 of it on
x, y, z: a flat road at z = 0 then lies mid-cube, not on a face where the last bits of a hit decide the
cube); each cube's factor is ``exp(sigma z - sigma^2 / 2)`` (mean 1,
log-normal), with ``z`` ~ N(0, 1) drawn from a hash of the cube's integer coordinates and the material's
seed (splitmix64 of the coordinates, then Box-Muller), so it needs no state and no table.
"""

from __future__ import annotations

from typing import Any

from rt_lidar.kernels.xp import array_module

__all__ = ["texture_factor"]

_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_GOLDEN = 0x9E3779B97F4A7C15


def _mix(xp: Any, h: Any) -> Any:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    h = h ^ (h >> xp.uint64(30))
    h = h * xp.uint64(_M1)
    h = h ^ (h >> xp.uint64(27))
    h = h * xp.uint64(_M2)
    return h ^ (h >> xp.uint64(31))


def texture_factor(points_m: Any, seed: Any, cell_m: Any, sigma: Any) -> Any:
    """Per point, the texture factor (float32, mean 1) of the world-frame ``points_m`` (N, 3), with each
    point's material ``seed`` (N,) uint64, cube size ``cell_m`` (N,) and log spread ``sigma`` (N,)."""
    xp = array_module(points_m)
    shift = xp.asarray([0.3183098861837907, 0.5772156649015329, 0.4142135623730951])
    cells = xp.floor(points_m / cell_m[:, None] + shift[None, :]).astype(xp.int64).view(xp.uint64)
    with_seed = seed.astype(xp.uint64) * xp.uint64(_GOLDEN)
    h = _mix(xp, cells[:, 0] ^ with_seed)
    h = _mix(xp, h ^ cells[:, 1])
    h = _mix(xp, h ^ cells[:, 2])
    h2 = _mix(xp, h ^ xp.uint64(_GOLDEN))
    u1 = ((h >> xp.uint64(11)).astype(xp.float64) + 0.5) / float(1 << 53)
    u2 = (h2 >> xp.uint64(11)).astype(xp.float64) / float(1 << 53)
    z = xp.sqrt(-2.0 * xp.log(u1)) * xp.cos(2.0 * xp.pi * u2)
    s = sigma.astype(xp.float64)
    return xp.exp(s * z - 0.5 * s * s).astype(xp.float32)
