"""``--beam full``'s probes toward an opening between two rings: unasked vertical rim probes.

The neighbour test (:func:`rt_lidar.pipeline.beam_full.neighbour_steps`) sees a step only where two
neighbouring central rays differ. A window whose pane lies between two rings is seen by neither: the
central ray ends on the wall below its sill, the ring above on the wall above its head, both at the
wall's range, so no pair marks the pulse and no probe is cast, where dense sampling's upper sub-rays
pass the glass and answer from the room behind it (a second return, a wider echo; docs/realism.md
changes 43 and 66, docs/beam-full.md "Openings between rings").

Such an opening can hide only where the rings lie farther apart on the surface than the opening is
tall: the ring gap (the elevation step to the next ring, in radians) times the central ray's range
above :data:`OPENING_MIN_M`. Each pulse whose central ray hit something that far off probes toward that
ring unasked (one ray at its footprint's rim, :func:`rt_lidar.pipeline.beam_probe.probe_pattern`, as
the frame's seam probes do, :func:`rt_lidar.pipeline.beam_probe.seam_keys`), and keeps the bundle only
where that probe sees a step (:func:`rt_lidar.pipeline.beam_probe.probe_marks`). An HDL-64E's rings (at
most 0.6 deg apart) leave such a gap only beyond 95 m, the VLP-32C's middle ones (0.33 deg) beyond 170
m; a VLP-16's 2 deg do beyond 29 m.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rt_lidar.sensor.scan_pattern import Firings

__all__ = ["OPENING_MIN_M", "opening_keys", "ring_gaps"]

OPENING_MIN_M = 1.0
"""The shortest opening (m) the unasked probes look for between two rings: below the 1.6 m windows the
worlds' buildings have (``unreal_bridge.world.props.add_building``) and an ordinary window's 1.0-1.5 m
height. An opening shorter than the rings' spacing on the surface and shorter than this stays unseen
where no neighbour meets it."""


def ring_gaps(f: Firings) -> tuple[np.ndarray, np.ndarray]:
    """(below, above) (P,) float32: the elevation step (rad) from each pulse's ring of firings ``f`` to
    the frame's next ring below and above (their mean elevations, :func:`~rt_lidar.pipeline.beam_full.
    ring_ranks`'s order); 0 where no ring lies on that side in the frame."""
    from rt_lidar.pipeline.beam_full import ring_ranks

    n = len(f)
    if n == 0:
        return np.zeros(0, np.float32), np.zeros(0, np.float32)
    rank = ring_ranks(f)
    count = np.bincount(rank)
    el = np.radians(np.bincount(rank, weights=np.asarray(f.elevation_deg, np.float64)) / np.maximum(count, 1))
    step = np.diff(el)  # rank r to r + 1
    below = np.concatenate([[0.0], step])[rank]
    above = np.concatenate([step, [0.0]])[rank]
    return below.astype(np.float32), above.astype(np.float32)


def opening_keys(xp: Any, range_m: Any, below: Any, above: Any, min_m: float = OPENING_MIN_M) -> Any:
    """(O,) int64 ``side * n + pulse`` (:data:`~rt_lidar.pipeline.beam_probe.PROBE_SIDES`: 2 downward, 3
    upward) of the unasked probes toward an opening between two rings: each of the ``n`` pulses whose
    central ray's range ``range_m`` times its ring gap (``below``, ``above``: :func:`ring_gaps`) exceeds
    ``min_m`` on that side, sorted; on array module ``xp`` (NumPy on the host, CuPy in the device frame).
    A pulse that missed (infinite range) probes nowhere."""
    n = int(range_m.shape[0])
    with np.errstate(invalid="ignore"):
        rng = xp.where(xp.isfinite(range_m), range_m, np.float32(0.0))
        down = xp.flatnonzero(rng * below > np.float32(min_m))
        up = xp.flatnonzero(rng * above > np.float32(min_m))
    return xp.concatenate([down + 2 * n, up + 3 * n]).astype(xp.int64)
