"""Surface texture: a reflectance factor fixed in world coordinates, so the same spot of road reads the same
from every ray, scan and run, and neighbouring spots differ as real asphalt's aggregate and patches do.

Two components multiply (their logs add), each log-normal with mean 1 (``exp(s z - s^2 / 2)``):

- **Aggregate** (``sigma`` at ``cell_m``): the spread of independent cubes of ``cell_m`` (the chips and
  binder of the surface course). A pulse's footprint of area ``A`` averages ``N = A / cell_m^2`` of them,
  so its log spread is ``sigma / sqrt(N)`` (the variance of a mean of N independent cells; ``sigma`` where
  the footprint is smaller than a cell). It is drawn from one cube at the hit: ``L = cell_m 2^k``, the
  largest no wider than the footprint across the incidence plane (``A / along_m``; k <= 16; a cell
  without ``along_m``). Neighbouring shots on a ring lie about a footprint's width apart, so they share
  a cube, and read alike, about as often as their footprints overlap: a cube fitted to the footprint's
  area instead (its long side along a grazing road) made shots whose footprints barely touch read the
  same value.
- **Patches** (``patch_sigma`` at ``patch_m``; only where ``patch_sigma`` > 0): value noise on a
  horizontal lattice (x, y) of ``patch_m`` (repairs, wear in the wheel paths, stains: features of the
  road's plane), a unit-variance value at each lattice corner, interpolated bilinearly and divided by the
  root of the weights' squares (unit variance everywhere), so it varies smoothly over metres and
  neighbouring shots read the same patch. A corner's value is cheap (:func:`_corner_sums`): one
  splitmix64 round of its coordinates times two odd constants, xor-ed, and the sum of the hash's four
  16-bit fields, centred and scaled to unit variance (Irwin-Hall of four: near normal, within +-3.46;
  no log or cos), so the four corners cost less than one aggregate draw. A footprint longer than a
  patch along the incidence plane (``along_m``: metres on the far road at grazing incidence) averages
  ``along_m / patch_m`` of them, so their spread shrinks as the aggregate's does.

The world is cut into cubes shifted by a fraction of a cube (0.318, 0.577, 0.414 of it on x, y, z: a flat
road at z = 0 then lies mid-cube, not on a face where the last bits of a hit decide the cube); each
aggregate cube's ``z`` ~ N(0, 1) comes from a hash of its integer coordinates, the material's seed and the
octave ``k``: splitmix64 of the coordinates, then Box-Muller, so it needs no state and no table (the
patches' corners hash under their own salt, above). With no footprint (``A`` = 0) and no patches it is
the single-cell texture of change 21, bit for bit.
"""

from __future__ import annotations

from typing import Any

from rt_lidar.kernels.xp import array_module

__all__ = ["MAX_OCTAVE", "texture_factor"]

_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_GOLDEN = 0x9E3779B97F4A7C15
_PATCH_SALT = 0xD6E8FEB86659FD93
_CORNER_PRIMES = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F)
_IRWIN_HALL_MEAN = 131070.0
"""Mean of the sum of four uniform 16-bit fields (4 x 65535 / 2)."""
_IRWIN_HALL_SD = 37837.22723720648
"""Its standard deviation, sqrt(4 (65536^2 - 1) / 12)."""
_SHIFT = (0.3183098861837907, 0.5772156649015329, 0.4142135623730951)
MAX_OCTAVE = 16
"""Largest octave k of the aggregate's footprint-scale cube (``cell_m 2^16``: far beyond any footprint)."""


def _mix(xp: Any, h: Any) -> Any:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    h = h ^ (h >> xp.uint64(30))
    h = h * xp.uint64(_M1)
    h = h ^ (h >> xp.uint64(27))
    h = h * xp.uint64(_M2)
    return h ^ (h >> xp.uint64(31))


def _normal(xp: Any, cells: Any, key: Any) -> Any:
    """N(0, 1) (float64) of integer cubes ``cells`` (N, 3) uint64 under hash key ``key`` (N,) uint64."""
    h = _mix(xp, cells[:, 0] ^ key)
    h = _mix(xp, h ^ cells[:, 1])
    h = _mix(xp, h ^ cells[:, 2])
    h2 = _mix(xp, h ^ xp.uint64(_GOLDEN))
    u1 = ((h >> xp.uint64(11)).astype(xp.float64) + 0.5) / float(1 << 53)
    u2 = (h2 >> xp.uint64(11)).astype(xp.float64) / float(1 << 53)
    return xp.sqrt(-2.0 * xp.log(u1)) * xp.cos(2.0 * xp.pi * u2)


def _corner_sums(xp: Any, hashed: Any) -> Any:
    """The sum (float64) of each already-mixed corner hash's (uint64) four 16-bit fields: Irwin-Hall of
    four, mean ``_IRWIN_HALL_MEAN`` and spread ``_IRWIN_HALL_SD``."""
    m16 = xp.uint64(0xFFFF)
    total = (
        (hashed & m16)
        + ((hashed >> xp.uint64(16)) & m16)
        + ((hashed >> xp.uint64(32)) & m16)
        + (hashed >> xp.uint64(48))
    )
    return total.astype(xp.float64)


def _patch_field(xp: Any, points_m: Any, patch_m: Any, key: Any) -> Any:
    """Value noise of unit variance (float64) at ``points_m`` (N, 3) on a horizontal lattice (x, y) of
    ``patch_m`` (N,), under hash keys ``key`` (N,) uint64: the four corners' values (:func:`_corner_sums`,
    centred), bilinear weights, over the root of the weights' squares and the values' spread."""
    shift = xp.asarray(_SHIFT[:2])
    scaled = points_m[:, :2] / patch_m.astype(xp.float64)[:, None] + shift[None, :]
    base = xp.floor(scaled)
    t = scaled - base
    corner0 = base.astype(xp.int64).view(xp.uint64)
    axis_hash = []  # per axis, (corner, corner + 1) times its odd constant (wrapping)
    axis_weight = []  # per axis, the weights of (corner, corner + 1)
    for ax, prime in enumerate(_CORNER_PRIMES):
        lo = corner0[:, ax] * xp.uint64(prime)
        axis_hash.append((lo, lo + xp.uint64(prime)))
        axis_weight.append((1.0 - t[:, ax], t[:, ax]))
    pkey = key ^ xp.uint64(_PATCH_SALT)
    num = xp.zeros(key.shape, xp.float64)
    wsq = xp.zeros(key.shape, xp.float64)
    for bx, by in ((0, 0), (1, 0), (0, 1), (1, 1)):
        w = axis_weight[0][bx] * axis_weight[1][by]
        h = _mix(xp, pkey ^ axis_hash[0][bx] ^ axis_hash[1][by])
        num = num + w * (_corner_sums(xp, h) - _IRWIN_HALL_MEAN)
        wsq = wsq + w * w
    return num / (_IRWIN_HALL_SD * xp.sqrt(wsq))


def _cubes(xp: Any, scaled: Any) -> Any:
    """Integer cubes (uint64 bits of int64) of points already divided by the cube size, shifted."""
    shift = xp.asarray(_SHIFT)
    return xp.floor(scaled + shift[None, :]).astype(xp.int64).view(xp.uint64)


def texture_factor(
    points_m: Any,
    seed: Any,
    cell_m: Any,
    sigma: Any,
    footprint_m2: Any = None,
    patch_m: Any = None,
    patch_sigma: Any = None,
    along_m: Any = None,
) -> Any:
    """Per point, the texture factor (float32, mean 1) of the world-frame ``points_m`` (N, 3), with each
    point's material ``seed`` (N,) uint64, aggregate cube size ``cell_m`` (N,) and log spread ``sigma``
    (N,), its pulse's footprint area ``footprint_m2`` (N,) float64 (None: a point), and the patches'
    lattice ``patch_m`` (N,) and log spread ``patch_sigma`` (N,) (None: no patches), and the footprint's
    length along the incidence plane ``along_m`` (N,) float64 (None: a point), over which the patches
    average: their log spread is ``patch_sigma sqrt(patch_m / along_m)`` where the footprint is longer than
    a patch (the variance of a mean of ``along_m / patch_m`` independent patches in a row); the
    aggregate's cube is no wider than the footprint across (``footprint_m2 / along_m``)."""
    xp = array_module(points_m)
    cell = cell_m.astype(xp.float64)
    s = sigma.astype(xp.float64)
    key = seed.astype(xp.uint64) * xp.uint64(_GOLDEN)
    if footprint_m2 is None:
        z = _normal(xp, _cubes(xp, points_m / cell[:, None]), key)
        return xp.exp(s * z - 0.5 * s * s).astype(xp.float32)
    area = footprint_m2.astype(xp.float64)
    scale = cell.copy()
    octave = xp.zeros(scale.shape, xp.uint64)
    if along_m is not None:  # the cube: cell 2^k, the largest no wider than the footprint across
        across = area / along_m.astype(xp.float64)
        for _ in range(MAX_OCTAVE):
            grow = scale * 2.0 <= across
            scale = xp.where(grow, scale * 2.0, scale)
            octave = octave + grow.astype(xp.uint64)
    z = _normal(xp, _cubes(xp, points_m / scale[:, None]), key ^ (octave * xp.uint64(_M2)))
    s = xp.where(area > cell * cell, s * (cell / xp.sqrt(xp.maximum(area, 1e-300))), s)
    log_f = s * z - 0.5 * s * s
    if patch_m is not None and patch_sigma is not None:
        ps_all = patch_sigma.astype(xp.float64)
        on = xp.flatnonzero(ps_all > 0)  # materials without patches skip them (nothing to add)
        if on.size:
            ps = ps_all[on]
            if along_m is not None:
                pm, al = patch_m[on].astype(xp.float64), along_m[on].astype(xp.float64)
                ps = xp.where(al > pm, ps * xp.sqrt(pm / al), ps)
            zp = _patch_field(xp, points_m[on], patch_m[on], key[on])
            log_f[on] = log_f[on] + (ps * zp - 0.5 * ps * ps)
    return xp.exp(log_f).astype(xp.float32)
