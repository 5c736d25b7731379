"""Tree crowns as volumes of leaves: a beam enters the crown and returns from a leaf at some depth, or
passes through its gaps.

A crown is a medium of leaf area density ``u`` (m^2 of one-sided leaf area per m^3 of crown). A beam's
chance of crossing a path of length ``s`` inside it without meeting a leaf is Beer-Lambert's gap
probability ``P_gap(s) = exp(-G u s)``, with ``G`` the leaves' mean projection on the beam's direction
(Ross 1981, *The Radiation Regime and Architecture of Plant Stands*: ``G = 0.5`` for a spherical leaf
angle distribution, every orientation alike; the basis of LAI from gap fractions, e.g. Zhang et al.
2023, Building and Environment 245, 110811, for single urban trees along each beam's actual path
length). The crown here is that medium made of explicit leaves: ``u V / a`` flat triangles of area
``a`` at independent uniform positions in the crown's ellipsoid, each facing a uniformly random
direction, so that ``G`` is 0.5 exactly and the gap probability along any chord is ``exp(-0.5 u s)``
(Poisson positions), the depth of the first leaf a beam meets exponential with mean ``1 / (G u)``, and
nothing about it depends on where the ray caster is run (in-process, served over the bridge, on a
device). Leaves are opaque to the beam: the ~45 % a leaf transmits at 905 nm leaves it diffusely
(PROSPECT, Jacquemoud & Baret 1990), not along the beam.

Street trees: ``LEAF_AREA_DENSITY`` = 1.0 m^2/m^3, within the 0.5-2 m^2/m^3 that terrestrial laser
scans of single broadleaf trees give (voxel-based canopy profiling: Hosoi & Omasa 2006, IEEE TGRS 44(12)
3610; Li et al. 2017, Remote Sens. 9(11) 1202; Engstrom 2025, some 2,100 street trees of Malmo scanned
from the street; only the abstracts could be read here, the value is set by hand within that range): a
column of crown 4 m deep then holds a leaf area index of 4 (street trees' 2-6) and passes ``exp(-2) =
0.14`` of the beams through it. ``LEAF_AREA_M2`` = 0.01 m^2 (a 15 cm triangle: a lime's or maple's leaf;
a 905 nm beam's footprint at 10-30 m is 2-6 cm, smaller than a leaf, so each beam meets whole leaves).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["G_SPHERICAL", "LEAF_AREA_DENSITY", "LEAF_AREA_M2", "crown_leaves", "gap_probability", "leaf_rng"]

G_SPHERICAL = 0.5
LEAF_AREA_DENSITY = 1.0
LEAF_AREA_M2 = 0.01


def gap_probability(
    path_m: np.ndarray | float, lad: float = LEAF_AREA_DENSITY, g: float = G_SPHERICAL
) -> np.ndarray:
    """Beer-Lambert gap probability ``exp(-G u s)`` of paths ``path_m`` through leaf area density ``lad``."""
    return np.exp(-g * lad * np.asarray(path_m, dtype=np.float64))


def leaf_rng(draws: NDArray[np.float64]) -> np.random.Generator:
    """A generator for one crown's leaves seeded from ``draws`` already taken from the world's generator,
    so the crown follows the world seed while the world's own stream (every object drawn after the tree)
    stays as it was."""
    words = np.frombuffer(np.ascontiguousarray(draws, np.float64).tobytes(), np.uint32)
    return np.random.default_rng(np.random.SeedSequence(words[:64].tolist()))


def crown_leaves(
    center: tuple[float, float, float],
    radii: tuple[float, float, float],
    rng: np.random.Generator,
    lad: float = LEAF_AREA_DENSITY,
    leaf_area_m2: float = LEAF_AREA_M2,
) -> tuple[NDArray[np.float64], NDArray[np.int32]]:
    """(vertices (3N, 3), faces (N, 3)) of the ``N = round(lad V / leaf_area_m2)`` leaves of a crown
    filling the ellipsoid ``center``/``radii`` (volume ``V``): equilateral triangles of area
    ``leaf_area_m2`` at uniform positions, uniformly random orientations."""
    c = np.asarray(center, np.float64)
    r = np.asarray(radii, np.float64)
    volume = 4.0 / 3.0 * np.pi * float(np.prod(r))
    n = max(1, round(lad * volume / leaf_area_m2))
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    pos = c + r * d * rng.uniform(0.0, 1.0, size=(n, 1)) ** (1.0 / 3.0)
    normal = rng.normal(size=(n, 3))
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    # two unit vectors in each leaf's plane
    helper = np.where(np.abs(normal[:, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
    e1 = np.cross(normal, helper)
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    e2 = np.cross(normal, e1)
    side = np.sqrt(4.0 * leaf_area_m2 / np.sqrt(3.0))
    circum = side / np.sqrt(3.0)
    phase = rng.uniform(0.0, 2.0 * np.pi, size=(n, 1)) + np.array([[0.0, 2.0, 4.0]]) * np.pi / 3.0
    verts = pos[:, None, :] + circum * (
        np.cos(phase)[:, :, None] * e1[:, None, :] + np.sin(phase)[:, :, None] * e2[:, None, :]
    )
    faces = np.arange(3 * n, dtype=np.int32).reshape(n, 3)
    return verts.reshape(-1, 3), faces
