"""A car's glazing as real glazing is shaped: curved windscreen and rear window, curved side windows with
tumblehome, tessellated finely enough that each facet's normal follows the curve.

Real car glazing is bent. A windscreen is curved across its width (its primary curvature, a radius of
roughly 2-4 m seen from above) and less along its rake (the cross curvature, ~6-15 m); side windows are
cylinders about the car's length (radius ~1-2 m) leaning inwards towards the roof (tumblehome) (the
bending tolerances of ECE R43 and the glass makers' design guides quote such radii; set by hand here:
``WINDSCREEN_RADIUS_M`` 2.5 m across, ``WINDSCREEN_CROSS_RADIUS_M`` 8 m along the rake, side windows
``SIDE_RADIUS_M`` 1.4 m leaning 8 deg), in facets fine enough that neighbouring facets' normals differ
by about the width of glass's mirror lobe. The normal a beam meets then depends on where it meets the pane:
across a windscreen it turns by +-20 deg, so the pane's Fresnel transmission (``rt_lidar.sensor.glazing``)
and its mirror ray (the ghosts of ``rt_lidar.physics.glass_ghost``, cast by ``WorldSource._mirror_cast``)
spread over a fan of directions instead of one plane's, as a curved mirror's reflections do. Nothing in
the caster changes: the facets' own normals are what it reads.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from .geometry import MeshBuilder

__all__ = [
    "SIDE_RADIUS_M",
    "WINDSCREEN_CROSS_RADIUS_M",
    "WINDSCREEN_RADIUS_M",
    "add_car_glazing",
    "side_half_width",
]

WINDSCREEN_RADIUS_M = 2.5
WINDSCREEN_CROSS_RADIUS_M = 8.0
SIDE_RADIUS_M = 1.4

# the cabin's glazing line (object frame, origin on the ground under the car's centre, x forward)
Z_LOW, Z_TOP = 0.96, 1.38
Y_LOW, Y_TOP = 0.87, 0.81  # the side glass's half-width at its foot and at the roof: tumblehome
X_WS_LOW, X_WS_TOP = 1.55, 0.9  # windscreen foot and head (raked 33 deg from horizontal)
X_RW_LOW, X_RW_TOP = -1.95, -1.4  # rear window foot and head (37 deg)
X_B_PILLAR = -0.25
# facets across a pane and up it: up the side glass's arc the normal steps by 0.7 deg a facet, about the
# glass mirror lobe's half-width (0.5 deg), so no facet is a flat mirror much larger than the stripe of a
# curved pane that glints (with 4 rows, 3.5 deg steps, whole facets glinted or none did)
ACROSS, ALONG = 8, 24

Surface = Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.float64]]


def _bulge(t: NDArray[np.float64], chord: float, radius: float) -> NDArray[np.float64]:
    """Sagitta of a circular arc of ``radius`` over ``chord`` at fraction ``t`` along it (second order)."""
    return chord * chord / (2.0 * radius) * t * (1.0 - t)


def side_half_width(t: NDArray[np.float64] | float) -> NDArray[np.float64]:
    """The side glass's half-width at fraction ``t`` of its height (0 = foot, 1 = roof): leaning in from
    ``Y_LOW`` to ``Y_TOP`` and bulging outwards on its ``SIDE_RADIUS_M`` arc."""
    t = np.asarray(t, np.float64)
    chord = float(np.hypot(Z_TOP - Z_LOW, Y_LOW - Y_TOP))
    return Y_LOW + (Y_TOP - Y_LOW) * t + _bulge(t, chord, SIDE_RADIUS_M)


def _add_surface(b: MeshBuilder, surface: Surface, nu: int, nv: int, material: str) -> None:
    u, v = np.meshgrid(np.linspace(-1.0, 1.0, nu + 1), np.linspace(0.0, 1.0, nv + 1), indexing="ij")
    pts = surface(u.ravel(), v.ravel())
    i, j = np.meshgrid(np.arange(nu), np.arange(nv), indexing="ij")
    a = (i * (nv + 1) + j).ravel()
    c, d, e = a + (nv + 1), a + (nv + 2), a + 1
    b.add(pts, np.concatenate([np.stack([a, c, d], 1), np.stack([a, d, e], 1)]), material)


def _raked_pane(x_low: float, x_top: float, out: float) -> Surface:
    """The windscreen (``out`` = +1, bowed forwards) or rear window (-1, bowed backwards): u across
    (-1..1, edges on the side glass), v up the rake (0..1)."""
    length = float(np.hypot(x_top - x_low, Z_TOP - Z_LOW))
    normal = out * np.array([Z_TOP - Z_LOW, 0.0, x_low - x_top]) / length  # outwards (and upwards)

    def surface(u: NDArray[np.float64], v: NDArray[np.float64]) -> NDArray[np.float64]:
        edge = side_half_width(v)
        y = u * edge
        r = WINDSCREEN_RADIUS_M
        bow = np.sqrt(r * r - y * y) - np.sqrt(r * r - edge * edge)  # 0 at the edges, ~y_e^2 / 2R mid-pane
        cross = _bulge(v, length, WINDSCREEN_CROSS_RADIUS_M)
        x = x_low + (x_top - x_low) * v + out * bow + normal[0] * cross
        z = Z_LOW + (Z_TOP - Z_LOW) * v + normal[2] * cross
        return np.stack([x, y, z], 1)

    return surface


def _side_pane(
    x_foot: Callable[[NDArray[np.float64]], NDArray[np.float64]], x_other: float, s: float
) -> Surface:
    """A side window of side ``s`` (+-1) between the raked pane's edge ``x_foot(v)`` and ``x_other``: u
    along the car, v up the glass."""

    def surface(u: NDArray[np.float64], v: NDArray[np.float64]) -> NDArray[np.float64]:
        w = (u + 1.0) / 2.0
        x = x_foot(v) + (x_other - x_foot(v)) * w
        return np.stack([x, s * side_half_width(v), Z_LOW + (Z_TOP - Z_LOW) * v], 1)

    return surface


def add_car_glazing(b: MeshBuilder, paint: str, windscreen: str, rear_glass: str) -> None:
    """The cabin's curved glazing and B-pillars (``paint``): windscreen, rear window (``rear_glass``), front
    side windows (``car_glass``) and rear side windows (``rear_glass``)."""
    _add_surface(b, _raked_pane(X_WS_LOW, X_WS_TOP, 1.0), ACROSS, ALONG, windscreen)
    _add_surface(b, _raked_pane(X_RW_LOW, X_RW_TOP, -1.0), ACROSS, ALONG, rear_glass)
    lean = float(np.arctan2(Y_LOW - Y_TOP, Z_TOP - Z_LOW))
    for s in (-1.0, 1.0):

        def front(v: NDArray[np.float64]) -> NDArray[np.float64]:
            return X_WS_LOW + (X_WS_TOP - X_WS_LOW) * v

        def rear(v: NDArray[np.float64]) -> NDArray[np.float64]:
            return X_RW_LOW + (X_RW_TOP - X_RW_LOW) * v

        _add_surface(b, _side_pane(front, X_B_PILLAR + 0.05, s), 2, ALONG, "car_glass")
        _add_surface(b, _side_pane(rear, X_B_PILLAR - 0.05, s), 2, ALONG, rear_glass)
        y_mid = float(side_half_width(0.5))
        b.box((X_B_PILLAR, s * y_mid, (Z_LOW + Z_TOP) / 2), (0.1, 0.03, Z_TOP - Z_LOW), paint, roll=s * lean)
