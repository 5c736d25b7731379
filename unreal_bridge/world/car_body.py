"""A car's body shaped as real car bodies are: sides bowed in plan, rounded corners, and a section that
tucks under towards the sill and leans in towards the beltline (tumblehome), tessellated finely enough that
each facet's normal follows the curve.

Before issue 40's change 37 the body below the glazing was a box: its sides were flat planes, so a beam
grazing a parked car's side met the whole side at one incidence (cos < 0.2 for the cars 20 m and more up
the street) and most such beams were lost. No real car side is a plane: seen from above a body side bows
outwards between the wheels and turns through the corners into the bumpers; in section it is widest at
the shoulder and curves in above (towards the glazing, which leans in further) and below (towards the
sill). A beam grazing such a side meets a surface turned towards it somewhere along the car.

The shape is set by hand (no body surface of a production car was read here), inside what car bodies
show: plan-view camber ``PLAN_CAMBER_M`` (the side 4 cm inside its widest point where it meets the
corners; a ~47 m radius), plan corner radius ``CORNER_RADIUS_M`` (0.30 m), section radius
``SECTION_RADIUS_M`` (1.2 m about the shoulder at ``SHOULDER_Z_M``: the sill 8.4 cm inside the shoulder,
the beltline 1.5 cm, meeting the side glass's foot, ``car_glazing.Y_LOW``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .geometry import MeshBuilder

__all__ = [
    "BODY_HALF_LENGTH_M",
    "BODY_HALF_WIDTH_M",
    "CORNER_RADIUS_M",
    "PLAN_CAMBER_M",
    "SECTION_RADIUS_M",
    "SHOULDER_Z_M",
    "add_car_body",
    "body_end_x",
    "body_half_width",
    "plan_outline",
]

BODY_HALF_LENGTH_M, BODY_HALF_WIDTH_M = 2.25, 0.9
SILL_Z_M, BELTLINE_Z_M = 0.30, 0.94  # the body's foot and top (the box spanned the same)
SHOULDER_Z_M = 0.75  # widest section, at the chrome strip's height
PLAN_CAMBER_M = 0.04
CORNER_RADIUS_M = 0.30
SECTION_RADIUS_M = 1.2
# facets: along each side, round each corner, across each end (per half), and up the section (paint is
# diffuse: no mirror lobe to resolve); the normal steps by 0.3 deg along the side, 15 deg round a
# corner, 5 deg a row
SIDE_STEPS, CORNER_STEPS, END_STEPS, ROWS = 8, 6, 2, 6


def _quadrant() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Plan outline points (x >= 0, y >= 0) from the side's middle round to the end's middle, with their
    outward unit normals: the side (a parabola of camber ``PLAN_CAMBER_M``), a corner arc of
    ``CORNER_RADIUS_M`` meeting it tangentially, and the flat end."""
    x_joint = BODY_HALF_LENGTH_M - CORNER_RADIUS_M
    xs = np.linspace(0.0, x_joint, SIDE_STEPS + 1)
    ys = BODY_HALF_WIDTH_M - PLAN_CAMBER_M * (xs / x_joint) ** 2
    slope = 2.0 * PLAN_CAMBER_M * xs / x_joint**2  # -dy/dx
    side_n = np.stack([slope, np.ones_like(xs)], 1) / np.hypot(slope, 1.0)[:, None]
    phi0 = float(np.arctan2(side_n[-1, 1], side_n[-1, 0]))  # the normal's angle where the corner begins
    centre = np.array([xs[-1], ys[-1]]) - CORNER_RADIUS_M * side_n[-1]
    phi = np.linspace(phi0, 0.0, CORNER_STEPS + 1)[1:]
    corner_n = np.stack([np.cos(phi), np.sin(phi)], 1)
    corner = centre + CORNER_RADIUS_M * corner_n
    end_y = np.linspace(centre[1], 0.0, END_STEPS + 1)[1:]
    end = np.stack([np.full_like(end_y, corner[-1, 0]), end_y], 1)
    end_n = np.tile([1.0, 0.0], (END_STEPS, 1))
    pts = np.concatenate([np.stack([xs, ys], 1), corner, end])
    return pts, np.concatenate([side_n, corner_n, end_n])


def plan_outline() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The body's widest plan outline (at the shoulder), counter-clockwise seen from above, starting at the
    front's middle, and each point's outward unit normal: (N, 2) and (N, 2)."""
    q, qn = _quadrant()  # +x +y, from the left side's middle to the front's middle (clockwise)
    flip_x = np.array([-1.0, 1.0])
    flip_y = np.array([1.0, -1.0])
    parts = [
        (q[::-1], qn[::-1]),  # front's middle -> left side's middle
        (q * flip_x, qn * flip_x),  # left side's middle -> rear's middle
        (q[::-1] * -1.0, qn[::-1] * -1.0),  # rear's middle -> right side's middle
        (q * flip_y, qn * flip_y),  # right side's middle -> front's middle
    ]
    pts = np.concatenate([p[:-1] for p, _ in parts])  # drop each part's last point: the next one's first
    nrm = np.concatenate([n[:-1] for _, n in parts])
    return pts, nrm


def _inset(z: NDArray[np.float64] | float) -> NDArray[np.float64]:
    """How far the section lies inside the shoulder's outline at height ``z``: a circular arc of
    ``SECTION_RADIUS_M`` about the shoulder (second order)."""
    z = np.asarray(z, np.float64)
    return (z - SHOULDER_Z_M) ** 2 / (2.0 * SECTION_RADIUS_M)


def body_half_width(x: float, z: float) -> float:
    """The body's half-width at ``x`` along the side (|x| below the corners' start) and height ``z``."""
    x_joint = BODY_HALF_LENGTH_M - CORNER_RADIUS_M
    if abs(x) > x_joint:
        raise ValueError("body_half_width: x lies in a corner")
    return float(BODY_HALF_WIDTH_M - PLAN_CAMBER_M * (x / x_joint) ** 2 - _inset(z))


def body_end_x(z: float) -> float:
    """Where the body's flat front (and, mirrored, rear) lies at height ``z``."""
    return float(plan_outline()[0][0, 0] - _inset(z))


def add_car_body(b: MeshBuilder, paint: str) -> None:
    """The painted body below the glazing: the plan outline lofted up the section, closed by a flat floor
    and the flat top (bonnet, boot lid and the cabin's floor line) at ``BELTLINE_Z_M``."""
    pts, nrm = plan_outline()
    n = len(pts)
    zs = np.linspace(SILL_Z_M, BELTLINE_Z_M, ROWS + 1)
    rings = [np.c_[pts - _inset(z) * nrm, np.full(n, z)] for z in zs]
    verts = np.concatenate([*rings, [[0.0, 0.0, SILL_Z_M], [0.0, 0.0, BELTLINE_Z_M]]])
    i = np.arange(n)
    j = (i + 1) % n
    faces = []
    for r in range(ROWS):
        lo, hi = r * n, (r + 1) * n
        faces += [np.stack([lo + i, lo + j, hi + j], 1), np.stack([lo + i, hi + j, hi + i], 1)]
    bottom, top = (ROWS + 1) * n, (ROWS + 1) * n + 1
    faces.append(np.stack([np.full(n, bottom), j, i], 1))  # floor, facing down
    faces.append(np.stack([np.full(n, top), ROWS * n + i, ROWS * n + j], 1))  # top, facing up
    b.add(verts, np.concatenate(faces), paint)
