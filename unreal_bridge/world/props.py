"""Street furniture in object frames (x forward, y left, z up, origin on the ground): cars, trees,
street lights, signs, rocks, and building shells with glazed facades."""

from __future__ import annotations

import numpy as np

from .canopy import crown_leaves, leaf_rng
from .car_body import (
    BODY_HALF_LENGTH_M,
    CORNER_RADIUS_M,
    PLAN_CAMBER_M,
    SHOULDER_Z_M,
    add_car_body,
    body_end_x,
    body_half_width,
)
from .car_glazing import add_car_glazing
from .geometry import MeshBuilder, unit_sphere

__all__ = ["add_building", "add_car", "add_rock", "add_sign", "add_street_light", "add_tree"]

CAR_LENGTH, CAR_WIDTH = 4.5, 1.8
# door mirrors at the windscreen's foot, reaching 0.11 m beyond the body each side (a compact car: 1.80 m
# wide without them, ~2.03 m with them, as VW quotes a Golf's; set by hand around those figures)
MIRROR_X_M, MIRROR_Y_M = 1.35, 0.90
# wheels (issue 40, docs/realism.md change 48): a passenger tyre's size code gives its rim's diameter in
# inches (ISO metric tyre code, e.g. 205/55 R16: 16 in rim, 632 mm overall; 225/45 R17: 17 in, 634 mm),
# so a 0.66 m tyre carries a 16-17 in wheel whose face, to the rim flange, is ~0.43 m across; the
# rubber is the sidewall ring outside it
TYRE_RADIUS_M = 0.33
WHEEL_FACE_RADIUS_M = 0.215
WHEEL_MATERIAL = "car_paint_silver"


def add_car(b: MeshBuilder, paint: str, windscreen: str = "car_glass", rear_glass: str = "car_glass") -> None:
    """A 4.5 m sedan centred on the origin, facing +x: curved body, glazed cabin, chrome trim, door mirrors,
    tyres, plates.

    ``windscreen`` is the windscreen's material (``car_glass_ir``: a NIR-reflective coated one);
    ``rear_glass`` that of the rear side windows and the rear window, behind the B-pillar
    (``car_glass_privacy``: factory-tinted privacy glass); the front side windows are ``car_glass``."""
    # the body is curved as real bodies are: sides bowed in plan and in section, rounded corners
    # (issue 40, change 37: :mod:`car_body`); it was a 4.5 x 1.8 x 0.64 m box whose flat sides lost most
    # beams that grazed them
    add_car_body(b, paint)
    # the cabin: a roof over raked glazing that rays enter (and leave through the far side's), with a
    # sparse dark inside: floor, dashboard, two front seats and a rear bench with air between them and
    # above them. Before issue 40 a painted box sat 1 cm behind vertical glass (cars looked solid); then
    # a solid dark block whose sides faced the street. Windscreen and rear window are raked (33 and 37 deg
    # from horizontal) so their mirror echo goes to the sky, as a real car's does.
    b.box((-0.25, 0.0, 1.40), (2.3, 1.6, 0.04), paint)
    # the glazing is curved as real car glazing is (issue 40, docs/realism.md): :mod:`car_glazing`
    add_car_glazing(b, paint, windscreen, rear_glass)
    for s in (-1.0, 1.0):  # the chrome strip along each side at the shoulder, following the side's bow
        for x0 in np.arange(-1.8, 1.8, 1.2):
            xc = x0 + 0.6
            y = body_half_width(xc, SHOULDER_Z_M) + 0.005
            tilt = 2.0 * PLAN_CAMBER_M * xc / (BODY_HALF_LENGTH_M - CORNER_RADIUS_M) ** 2  # the side's -dy/dx
            b.box((xc, s * y, SHOULDER_Z_M), (1.2, 0.01, 0.05), "chrome", yaw=-s * float(np.arctan(tilt)))
    for s in (-1.0, 1.0):  # door mirrors: painted housings whose mirror glass faces back (chrome)
        b.box((MIRROR_X_M, s * MIRROR_Y_M, 1.02), (0.10, 0.24, 0.15), paint)
        b.box((MIRROR_X_M - 0.055, s * MIRROR_Y_M, 1.02), (0.01, 0.20, 0.11), "chrome")
    b.box((-0.2, 0.0, 0.95), (3.5, 1.58, 0.02), "car_interior")  # floor and parcel shelf
    # dashboard, under the windscreen (it reached through the raked glass before: its front 0.3 m stood
    # outside the car, an unglazed dark face in every car's windscreen)
    b.box((1.0, 0.0, 1.03), (0.3, 1.5, 0.14), "car_interior")
    for s in (-1.0, 1.0):
        b.box((0.3, s * 0.4, 1.01), (0.5, 0.5, 0.1), "car_interior")  # front seat cushion
        b.box((0.0, s * 0.4, 1.18), (0.1, 0.5, 0.34), "car_interior")  # front seat back
    b.box((-0.8, 0.0, 1.01), (0.5, 1.4, 0.1), "car_interior")  # rear bench
    b.box((-1.1, 0.0, 1.16), (0.1, 1.4, 0.3), "car_interior")  # rear backrest
    b.box((body_end_x(0.72) + 0.005, 0.0, 0.72), (0.01, 1.0, 0.12), "chrome")
    for s in (-1.0, 1.0):
        b.box((s * (body_end_x(0.5) + 0.01), 0.0, 0.5), (0.01, 0.52, 0.11), "plate_sheeting")
    for xw in (-1.4, 1.4):
        for s in (-1.0, 1.0):
            b.cylinder((xw, s * 0.8 + 0.11, 0.33), TYRE_RADIUS_M, 0.22, "rubber", sections=24, roll=np.pi / 2)
            # the wheel's face inside the tyre's sidewall: a painted alloy wheel (issue 40, change 48);
            # it was all tyre rubber from tread to hub. The disc stands 5 mm proud of the tyre's cap
            # (a closed cylinder), the tyre's own sidewall the ring around it.
            y_face = s * (0.8 + 0.11) + (0.005 if s > 0 else 0.0)
            b.cylinder(
                (xw, y_face, 0.33), WHEEL_FACE_RADIUS_M, 0.005, WHEEL_MATERIAL, sections=24, roll=np.pi / 2
            )


def add_tree(b: MeshBuilder, rng: np.random.Generator) -> None:
    """A tree: bark trunk and a crown of leaves (a volume that beams enter and pass through, at the
    street trees' leaf area density: :mod:`canopy`), random size."""
    trunk_h = float(rng.uniform(2.2, 3.4))
    r = float(rng.uniform(1.4, 2.4))
    b.cylinder((0.0, 0.0, 0.0), float(rng.uniform(0.14, 0.25)), trunk_h + 0.5 * r, "bark", sections=10)
    # Before issue 40's canopy change the crown was a roughened solid shell (an icosphere whose vertices
    # were jittered by these draws); the draws are still taken, and seed the leaves, so that every object
    # drawn after a tree stays where it was.
    draws = rng.uniform(-1.0, 1.0, size=(unit_sphere(3)[0].shape[0], 1))
    v, f = crown_leaves((0.0, 0.0, trunk_h + 0.8 * r), (r, r, 1.1 * r), leaf_rng(draws))
    b.add(v, f, "vegetation")


def add_street_light(b: MeshBuilder, arm_dir: float) -> None:
    """A 7 m pole with an arm reaching 1.6 m towards ``arm_dir`` * y and a lamp head."""
    b.cylinder((0.0, 0.0, 0.0), 0.09, 7.0, "metal_pole", sections=12)
    b.box((0.0, arm_dir * 0.8, 6.95), (0.08, 1.6, 0.08), "metal_pole")
    b.box((0.0, arm_dir * 1.6, 6.85), (0.35, 0.6, 0.18), "metal_pole")


def add_sign(b: MeshBuilder) -> None:
    """A 0.7 m square sign plate facing -x on a 2.8 m pole."""
    b.cylinder((0.0, 0.0, 0.0), 0.04, 2.8, "metal_pole", sections=10)
    b.box((-0.06, 0.0, 2.5), (0.02, 0.7, 0.7), "sign_sheeting")


def add_rock(b: MeshBuilder, rng: np.random.Generator) -> None:
    """A roughened, flattened boulder about 1 m across."""
    radii = (float(rng.uniform(0.5, 0.9)), float(rng.uniform(0.4, 0.7)), float(rng.uniform(0.3, 0.5)))
    b.sphere((0.0, 0.0, 0.6 * radii[2]), radii, "rock", subdivisions=2, jitter=0.2, rng=rng)


def add_building(
    b: MeshBuilder,
    width: float,
    depth: float,
    floors: int,
    wall: str,
    floor_h: float = 3.2,
    window_pitch: float = 2.6,
    window_w: float = 1.4,
    window_h: float = 1.6,
    sill: float = 0.9,
) -> None:
    """A building shell in a frame whose facade lies on y = 0 (facing -y), spanning x in [0, width] and
    y in [0, depth]. The facade is a grid of wall pieces around window openings, each opening holds a
    glass pane, and a back wall 3 m inside (the rooms' walls and furnishings, ``interior``, 0.5) stops
    rays that pass the glass."""
    th = 0.3
    height = floors * floor_h + 0.6
    cols = max(1, int(width // window_pitch))
    centers = (np.arange(cols) + 0.5) * width / cols
    # horizontal bands: below the first row, between rows, above the last row
    levels = [0.0]
    for f in range(floors):
        levels += [f * floor_h + sill, f * floor_h + sill + window_h]
    levels.append(height)
    for z0, z1 in zip(levels[0::2], levels[1::2], strict=True):
        b.box((width / 2, th / 2, (z0 + z1) / 2), (width, th, z1 - z0), wall)
    edges = np.concatenate([[0.0], np.ravel(np.c_[centers - window_w / 2, centers + window_w / 2]), [width]])
    for f in range(floors):
        z0, z1 = f * floor_h + sill, f * floor_h + sill + window_h
        for x0, x1 in zip(edges[0::2], edges[1::2], strict=True):
            b.box(((x0 + x1) / 2, th / 2, (z0 + z1) / 2), (x1 - x0, th, z1 - z0), wall)
        for c in centers:
            xa, xb = c - window_w / 2, c + window_w / 2
            y = th / 2
            b.quad([(xa, y, z0), (xb, y, z0), (xb, y, z1), (xa, y, z1)], "glass")
    inner = depth - 2 * th
    b.box((th / 2, depth / 2, height / 2), (th, depth, height), wall)
    b.box((width - th / 2, depth / 2, height / 2), (th, depth, height), wall)
    b.box((width / 2, depth - th / 2, height / 2), (width - 2 * th, th, height), wall)
    b.box((width / 2, th + inner / 2, height - 0.15), (width - 2 * th, inner, 0.3), "concrete")
    b.box((width / 2, th + 3.0, (height - 0.3) / 2), (width - 2 * th, 0.2, height - 0.3), "interior")
