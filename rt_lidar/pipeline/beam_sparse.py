"""``--beam full``'s sparse bundle: every other sub-ray of each ring of the dense bundle, each weighted
for two.

The dense bundle (:func:`~rt_lidar.sensor.beam.subray_pattern`, 19 sub-rays: the centre, a ring of 6 at
half the footprint's radius, a ring of 12 at its rim) samples the footprint of a pulse that
``--beam full`` found at a step (:mod:`rt_lidar.pipeline.beam_full`). :func:`sparse_bundle` keeps the
centre and, of each ring, the sub-rays at even places (the first, the third ...); each kept sub-ray
takes its own weight and that of the sub-ray after it, which it stands for. Of 19, 10 remain: a
triangle of the inner ring and a hexagon of the rim, whose widest offsets in the horizontal and the
vertical are the dense bundle's (the footprint, and the probes at its rim, are the same).

A step crossing the footprint covers an arc of each ring: the kept sub-rays see, on average over where
the step lies, the share of the weight the dense ring sees there, so the echo's energy on each side of
the step, and what follows from it (second returns, blooming at a retro-reflector's edge, the echo's
width, mixed pixels), keep the dense bundle's statistics within the tolerances of
:data:`rt_lidar.validation.beam_full_check.TOLERANCES` (docs/beam-full.md, "The sparse bundle"). It costs
10 rays where the dense bundle costs 19, and a waveform of 10 sub-rays.
"""

from __future__ import annotations

import numpy as np

from rt_lidar.sensor.beam import SubRayPattern

__all__ = ["sparse_bundle"]

_RING_DECIMALS = 9


def sparse_bundle(dense: SubRayPattern) -> SubRayPattern:
    """Every other sub-ray of each ring of ``dense`` (its centre kept), each weighted with its own and the
    next sub-ray's weight (module docstring). ``dense`` must be a hexagonal pattern of full rings (its
    first sub-ray the centre, each ring's sub-rays in turn around it, an even number of them: 7, 19, 37
    ... sub-rays); ValueError otherwise."""
    radius = np.round(np.asarray(dense.radius, np.float64), _RING_DECIMALS)
    n = len(dense)
    if n < 3 or radius[0] != 0.0:
        raise ValueError(f"a sparse bundle needs a dense one of full rings around a centre, got {n} sub-rays")
    keep: list[int] = [0]
    weight: list[float] = [float(dense.weights[0])]
    start = 1
    while start < n:
        end = start
        while end < n and radius[end] == radius[start]:
            end += 1
        if (end - start) % 2:
            raise ValueError(f"a sparse bundle needs rings of an even count, got {end - start}")
        for k in range(start, end, 2):
            keep.append(k)
            weight.append(float(dense.weights[k]) + float(dense.weights[k + 1]))
        start = end
    rows = np.asarray(keep, np.int64)
    off = np.asarray(dense.offsets_rad, np.float64)[rows].copy()
    w = np.asarray(weight, np.float64)
    w = (w / w.sum()).astype(np.float32)
    r = np.asarray(dense.radius, np.float64)[rows].copy()
    for a in (off, w, r):
        a.setflags(write=False)
    return SubRayPattern(off, w, r)
