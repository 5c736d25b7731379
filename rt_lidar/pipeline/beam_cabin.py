"""``--beam full`` behind glass and beside tree crowns: two kinds of pulse no neighbour pair foretells.

- **Behind glass** (a car's cabin, a window's reveal): a pulse whose central ray passes glass and ends
  within :data:`BEHIND_GLASS_M` behind the pane. The cabin's seats, head rests and pillars, the reveal's
  plaster beside the pane, are steps of a few decimetres inside one footprint that neighbouring central
  rays 3-8 mrad apart pass between. Such a pulse, where no other reason bundled it, casts two **cabin
  probes** past the pane (:func:`cabin_pattern`: the footprint's rim on its two diagonals, where the
  neighbour pairs' probes along the ring and across the rings do not look) and keeps the bundle where
  one of them meets what the central ray does not (:func:`cabin_probe_marks`: a hit where it misses, a
  range more than :data:`CABIN_STEP_M` off, another object or material, or no glass where it passed
  some). Bundling every such pulse (session 30's change 74) kept dense sampling's statistics as well,
  at twice the bundles: most cabins seen through a pane show one seat back across a footprint.
- **Beside a crown** (:func:`beside_volume`): each neighbour of a pulse that ended in a volume of
  scatterers (a tree crown's leaves) gets the bundle: its central ray may have passed a gap between the
  leaves while its footprint clips one, at a depth no neighbour's range foretells.

Every function here is written once for any array module ``xp``: NumPy on the host, CuPy in the device
frame (:class:`~rt_lidar.pipeline.device_frame.DeviceWorldSource`), which runs them on its arrays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rt_lidar.pipeline.beam_probe import _probe_hits, offsets_pattern
from rt_lidar.sensor.beam import SubRayPattern

if TYPE_CHECKING:
    from rt_lidar.pipeline.beam_full import FullBeamPlan
    from rt_lidar.pipeline.sources import Hits, WorldSource
    from rt_lidar.sensor.scan_pattern import Firings

__all__ = [
    "BEHIND_GLASS_M",
    "CABIN_SIDES",
    "CABIN_STEP_M",
    "behind_glass_marks",
    "beside_volume",
    "cabin_bundles",
    "cabin_pattern",
    "cabin_probe_marks",
]

BEHIND_GLASS_M = 2.0
"""A pulse whose central ray passes glass and ends within this (m) behind the pane probes for a step
behind it (:func:`behind_glass_marks`): a car's cabin (seats, head rests, pillars, the far pane 0.5-2 m
behind the near one) or a window's reveal and frame. Set by hand; a building's room (its back wall 3 m
in) is left to the neighbours and their probes."""

CABIN_STEP_M = 0.05
"""A cabin probe whose range differs from its central ray's by more than this (m) sees a step behind
the pane (:func:`cabin_probe_marks`). Set by hand, a little above the range noise of one ray: behind a
pane the neighbours cannot tell a step from a slant, so any depth change across the footprint counts
(on the street's VLP-32C in rain 0.225 m, half the edge step, left the echo widths 0.02 ns shorter)."""

CABIN_SIDES = 2
"""Cabin probes a pulse behind glass casts (:func:`cabin_pattern`)."""


def behind_glass_marks(
    xp: Any, rng: Any, glass_rng: Any, glass_material: Any, depth_m: float = BEHIND_GLASS_M
) -> Any:
    """(P,) bool: the pulses whose central ray passes glass (``glass_material`` >= 0, the pane at
    ``glass_rng``) and ends (``rng``) within ``depth_m`` behind it (:data:`BEHIND_GLASS_M`), on array
    module ``xp``."""
    with np.errstate(invalid="ignore"):
        behind = rng - glass_rng
        return (glass_material >= 0) & xp.isfinite(rng) & (behind < np.float32(depth_m))


def beside_volume(xp: Any, volume: Any, i: Any, j: Any) -> Any:
    """(P,) bool: the pulses beside one of ``volume`` (:func:`~rt_lidar.pipeline.beam_full.volume_marks`)
    that are not in it themselves, neighbours by the pairs ``(i, j)`` of
    :func:`~rt_lidar.pipeline.beam_full._neighbour_pairs` (along the ring and to the ring above), on
    array module ``xp``."""
    out = xp.zeros(volume.shape, bool)
    out[i[volume[j]]] = True
    out[j[volume[i]]] = True
    return out & ~volume


def cabin_pattern(pattern: SubRayPattern) -> SubRayPattern:
    """The two cabin probes of a bundle ``pattern``: two opposite corners of the box its largest
    horizontal and vertical offsets span (up and to higher azimuth, down and to lower), on the diagonals
    the neighbour pairs' probes (along the ring, across the rings) do not take. A corner lies sqrt(2)
    beyond the rim's ellipse: on the rim itself the street's VLP-32C in rain kept echo widths 0.01 ns
    short of the fidelity bound (p90 18.155 ns, >= 18.156 asked; the corners 18.167), a probe that far
    out catching the steps that cut the footprint's diagonal rim between two of its sub-rays."""
    off = np.asarray(pattern.offsets_rad, np.float64)
    h, v = float(np.abs(off[:, 0]).max()), float(np.abs(off[:, 1]).max())
    return offsets_pattern(np.array([[h, v], [-h, -v]]))


def cabin_probe_marks(central: Hits, pulse: Any, probe: Hits, xp: Any = np) -> Any:
    """(R,) bool: the cabin probes (``probe``'s rows, of pulses ``pulse``) that meet what their pulse's
    ``central`` ray does not: a hit where it misses (or the other way round), no glass where it passed
    some, a range more than :data:`CABIN_STEP_M` off, or another object or material."""
    c_rng = xp.take(central.range_m, pulse)
    q_rng = probe.range_m
    c_hit, q_hit = xp.isfinite(c_rng), xp.isfinite(q_rng)
    both = c_hit & q_hit
    with np.errstate(invalid="ignore"):
        step = both & (xp.abs(q_rng - c_rng) > np.float32(CABIN_STEP_M))
    other = both & (
        (xp.take(central.segment, pulse) != probe.segment)
        | (xp.take(central.material, pulse) != probe.material)
    )
    glass = (xp.take(central.glass_material, pulse) >= 0) != (probe.glass_material >= 0)
    return (c_hit != q_hit) | step | other | glass


def cabin_bundles(
    source: WorldSource, f: Firings, central: Hits, taken: np.ndarray, plan: FullBeamPlan
) -> np.ndarray:
    """(P,) bool: the pulses of firings ``f`` behind glass (:func:`behind_glass_marks`, from their
    ``central`` rays) not ``taken`` by another reason whose cabin probe (:func:`cabin_pattern`, cast as
    the neighbour pairs' probes are) sees a step behind the pane (:func:`cabin_probe_marks`)."""
    chosen = np.zeros(len(f), bool)
    cabin = behind_glass_marks(np, central.range_m, central.glass_range_m, central.glass_material)
    pulses = np.flatnonzero(cabin & ~taken)
    if not pulses.size:
        return chosen
    pulse = np.tile(pulses, CABIN_SIDES)
    side = np.repeat(np.arange(CABIN_SIDES, dtype=np.int64), pulses.size)
    probe = _probe_hits(source, f, pulse, side, cabin_pattern(plan.pattern))
    chosen[pulse[cabin_probe_marks(central, pulse, probe)]] = True
    return chosen
