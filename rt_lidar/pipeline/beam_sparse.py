"""``--beam full``'s sparse bundle: the dense bundle's rim thinned to every other sub-ray, each kept one
weighted for two.

The dense bundle (:func:`~rt_lidar.sensor.beam.subray_pattern`, 19 sub-rays: the centre, a ring of 6 at
half the footprint's radius, a ring of 12 at its rim) samples the footprint of a pulse that
``--beam full`` found at a step (:mod:`rt_lidar.pipeline.beam_full`). :func:`sparse_bundle` keeps the
centre and every inner ring whole and, of the rim, the sub-rays at even places (the first, the third
...); each kept rim sub-ray takes its own weight and that of the sub-ray after it, which it stands for.
Of 19, 13 remain: the rim's hexagon of 6 whose widest offsets in the horizontal and the vertical are the
dense rim's (the footprint, and the probes at its rim, are the same).

A step crossing the footprint covers an arc of the rim: the kept rim sub-rays see, on average over
where the step lies, the share of the weight the dense rim sees there (4 % of the beam's weight for an
HDL-64E's Gaussian beam: the rim decides little but blooming, where a retro-reflector's gain of
several hundred makes it count). The inner rings carry the rest and stay whole: thinning them too (10
sub-rays of 19) lowered the share of second returns by 4-9 % against dense sampling (a VLS-128's by
8.7 %, near the 10 % tolerance); thinning the rim alone moves it by 1-2 %, as casting the dense bundle
at the same pulses does. The statistics keep the tolerances of
:data:`rt_lidar.validation.beam_full_check.TOLERANCES` (docs/beam-full.md, "The sparse bundle").
"""

from __future__ import annotations

import numpy as np

from rt_lidar.sensor.beam import SubRayPattern

__all__ = ["sparse_bundle"]

_RING_DECIMALS = 9


def sparse_bundle(dense: SubRayPattern) -> SubRayPattern:
    """``dense`` with its rim (the last ring) thinned to every other sub-ray, each kept one weighted with
    its own and the next sub-ray's weight; the centre and the inner rings whole (module docstring).
    ``dense`` must be a hexagonal pattern of rings around a centre (its first sub-ray), each ring's
    sub-rays in turn around it, at least one inner ring and a rim of an even count (19, 37 ... sub-rays);
    ValueError otherwise."""
    radius = np.round(np.asarray(dense.radius, np.float64), _RING_DECIMALS)
    n = len(dense)
    rim = np.flatnonzero(radius == radius.max()) if n else np.zeros(0, np.int64)
    inner = np.unique(radius[radius < radius.max()]) if n else np.zeros(0)
    if n < 3 or radius[0] != 0.0 or inner.size < 2 or rim[0] + rim.size != n:
        raise ValueError(f"a sparse bundle needs a centre, an inner ring and a rim, got {n} sub-rays")
    if rim.size % 2:
        raise ValueError(f"a sparse bundle needs a rim of an even count, got {rim.size}")
    keep = np.concatenate([np.arange(rim[0]), rim[::2]])
    w = np.asarray(dense.weights, np.float64).copy()
    w[rim[::2]] += w[rim[1::2]]
    w = w[keep]
    off = np.asarray(dense.offsets_rad, np.float64)[keep].copy()
    weights = (w / w.sum()).astype(np.float32)
    r = np.asarray(dense.radius, np.float64)[keep].copy()
    for a in (off, weights, r):
        a.setflags(write=False)
    return SubRayPattern(off, weights, r)
