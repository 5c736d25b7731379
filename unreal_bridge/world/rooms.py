"""The rooms behind a building's windows (issue 40, docs/realism.md change 43): what a beam that passes
a facade's glass meets, as in real rooms.

- **Depth**: a side-lit room is planned no deeper than about twice its window head's height above the
  floor (the daylighting rule of thumb: 1.5-2x the glazing's height in the 2030 Palette's side-daylighting
  guide, 2.5x with a light shelf; 1-2x with venetian blinds and up to 2.5x without in Reinhart 2005,
  IBPSA Building Simulation, "A simulation-based review of the ubiquitous window-head-height to daylit
  zone depth rule-of-thumb"). The facade's windows reach 2.5 m above each storey's
  floor, so the back wall stands **5.0 m** inside the facade's inner face (it was a dark plane 3 m in).
- **Floors and ceilings**: each storey above the ground floor has its floor slab, so a beam entering an
  upper window meets that room's ceiling or floor, not the storey below. The ground floor's rooms
  stand on the street's ground (the scene's concrete, a slab on grade, with its texture), as before.
- **Blinds**: blinds or shades covered **59 %** of the window area of 55 residential and commercial
  buildings photographed from the street over three months, whatever the sun's position (Urban Green
  Council, New York, 2013, reported by BuildingGreen, "Tenants drawing the blinds in their glass
  buildings"). Each window's blind is lowered from its head by a share drawn from the golden-ratio
  sequence over [0.18, 1.0] (mean 0.59: the survey's share), deterministically per window.
- **Panes**: of Europe's installed glazing 44 % is single glazed, 42 % early (uncoated) double glazing
  and the rest modern coated double glazing (Glass for Europe's 2015 estimate, as reported by
  bebingtonglazing.co.uk, "One billion new windows will be sold by 2030"). The coatings of insulating
  glass pass the solar near infrared (low-e coatings for thermal insulation turn from transmitting to
  reflecting near 2 um; solar-control ones near 0.7 um), so every double-glazed window is taken as
  two clear panes: **56 %** of the windows (a second sequence, independent of the blinds') get a second
  ``glass`` pane ``IGU_GAP_M`` behind the first (an insulating glass unit's 4 mm pane and 16 mm gap),
  and a beam into the room passes both.

Every room surface and blind is ``interior`` (sensor_presets/materials.toml: its reflectance and
sources).
"""

from __future__ import annotations

import numpy as np

from .geometry import MeshBuilder

__all__ = [
    "BLIND_GAP_M",
    "DOUBLE_GLAZED_SHARE",
    "IGU_GAP_M",
    "ROOM_DEPTH_M",
    "add_rooms",
    "blind_shares",
    "double_glazed",
]

ROOM_DEPTH_M = 5.0
"""The back wall's distance inside the facade's inner face: twice the window head's 2.5 m."""
BLIND_GAP_M = 0.05
"""A blind hangs this far inside the facade's inner face (behind the window's reveal)."""
DOUBLE_GLAZED_SHARE = 0.56
"""Windows with a second pane: Glass for Europe's 42 % early double glazing plus 14 % coated."""
IGU_GAP_M = 0.02
"""The second pane's distance behind the first (a 4 mm pane and a 16 mm gap)."""
_BLIND_MIN = 0.18
_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0
_SILVER = np.sqrt(2.0) - 1.0


def blind_shares(n: int) -> np.ndarray:
    """(n,) share of each window's height its blind covers, lowered from the head: the golden-ratio
    sequence spread over [0.18, 1.0], whose mean is the survey's 0.59 of window area covered."""
    u = np.mod(np.arange(1, n + 1) * _GOLDEN, 1.0)
    return _BLIND_MIN + (1.0 - _BLIND_MIN) * u


def double_glazed(n: int) -> np.ndarray:
    """(n,) bool: which of n windows are double glazed, ``DOUBLE_GLAZED_SHARE`` of them (a sqrt(2)
    sequence, independent of the blinds' golden-ratio one)."""
    return np.mod(np.arange(1, n + 1) * _SILVER, 1.0) < DOUBLE_GLAZED_SHARE


def add_rooms(
    b: MeshBuilder,
    width: float,
    height: float,
    wall_t: float,
    floor_h: float,
    floors: int,
    windows: list[tuple[float, float, float, float]],
) -> None:
    """Rooms behind a facade on y = 0 (the building's frame of ``add_building``): a back wall
    ``ROOM_DEPTH_M`` inside the facade's inner face (``wall_t``), a floor slab for each of ``floors``
    storeys (``floor_h`` apart) but the ground floor, and a blind in each window of ``windows``
    ((x0, x1, z0, z1) each), all ``interior``; the double-glazed windows' second ``glass`` pane
    ``IGU_GAP_M`` behind the first, which lies at ``wall_t / 2``."""
    inner = width - 2 * wall_t
    y_back = wall_t + ROOM_DEPTH_M
    b.box((width / 2, y_back + 0.1, (height - 0.3) / 2), (inner, 0.2, height - 0.3), "interior")
    for f in range(1, floors):
        b.box(
            (width / 2, wall_t + ROOM_DEPTH_M / 2, f * floor_h - 0.1), (inner, ROOM_DEPTH_M, 0.2), "interior"
        )
    y, y2 = wall_t + BLIND_GAP_M, wall_t / 2 + IGU_GAP_M
    n = len(windows)
    for (xa, xb, z0, z1), share, double in zip(windows, blind_shares(n), double_glazed(n), strict=True):
        if double:
            b.quad([(xa, y2, z0), (xb, y2, z0), (xb, y2, z1), (xa, y2, z1)], "glass")
        zb = z1 - share * (z1 - z0)
        b.quad([(xa, y, zb), (xb, y, zb), (xb, y, z1), (xa, y, z1)], "interior")
