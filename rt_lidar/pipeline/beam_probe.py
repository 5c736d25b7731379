"""``--beam full``'s second look: one probe ray at the footprint's rim toward each neighbour that marked a
pulse, and the bundle only where the probe sees the step.

Two neighbouring central rays that differ (a depth edge, the edge of glass or of a retro-reflector,
:func:`rt_lidar.pipeline.beam_full.neighbour_steps`) say that a step lies somewhere between them, not
in whose footprint. The rings of a spinning sensor are 3-8 mrad apart and its footprint 2-4 mrad
across, so a step between two rings lies in neither footprint more often than in one, and when it lies
in one it is not in the other: bundling both pulses (what the neighbour test alone does) casts most
bundles where every sub-ray would say what the central ray says.

Here each pulse marked by a pair casts one **probe**: a ray at its footprint's rim (the bundle's
largest offset, :func:`probe_pattern`) on the side of the neighbour, horizontal for a neighbour along
the ring and vertical for one in the next ring (:func:`probe_rows`). The pulse keeps the bundle only
where its probe sees what the pair saw, within the footprint (:func:`probe_marks`):

- a depth edge: the probe misses where the central ray hits (or the other way round), or its range
  differs from the central ray's by more than half the spread a footprint may hold on one smooth
  surface (``spread_m / 2``: the footprint reaches as far on the other side) and the probe is not on
  the central ray's plane (:func:`on_one_plane`: the same object and material, and its range the one
  the central ray's plane gives at its incidence) with a round footprint and a slant within
  :data:`PLANE_MAX_SPREAD`. A footprint on one oblique plane is what the single-ray model broadens
  analytically (:mod:`rt_lidar.physics.pulse_spread`), so it keeps one ray;
- the edge of glass: the probe passes glass where the central ray does not (or the other way round),
  or their glass ranges differ by more than ``edge_m / 2``;
- the edge of a retro-reflector: the probe ends on one where the central ray does not (or the other
  way round).

A pulse whose ring neighbour fired beyond the sim frame's seam (a Velodyne's lasers fire at their own
azimuth offsets, so at a seam a ring's neighbour fired in the frame before or after over up to 100
columns) has no pair on that side: it probes toward that ring unasked (:func:`seam_keys`), and keeps the
bundle on what that probe sees, as above.

A probe costs one ray where the bundle costs 19; the pulses that keep the bundle are cast as the whole
bundle as before (bit for bit the dense bundle), the others keep their central ray (the single-ray model
exactly).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rt_lidar.pipeline.beam_steps import seam_probe_keys
from rt_lidar.pipeline.pose_samples import interpolate_pose_samples, sensor_pose_samples
from rt_lidar.sensor.beam import SubRayPattern
from rt_lidar.sensor.scan_pattern import Firings

if TYPE_CHECKING:
    from rt_lidar.pipeline.beam_full import FullBeamPlan
    from rt_lidar.pipeline.sources import Hits, WorldSource

__all__ = [
    "PLANE_MAX_SPREAD",
    "PLANE_TOLERANCE_M",
    "PROBE_SIDES",
    "ROUND_FOOTPRINT",
    "SEAM_STEPS",
    "on_one_plane",
    "plane_tolerance_m",
    "probe_keys",
    "probe_marks",
    "probe_pattern",
    "probe_rows",
    "probe_sides",
    "refine_bundles",
    "seam_keys",
]

SEAM_STEPS = 1.5
"""A pulse's ring neighbour is missing (:func:`seam_keys`) when the nearest pulse of that ring in the
frame lies more than this many of the pulse's own azimuth steps away: in a seamless scan the ring next
to it fires within half a column of it (a step where that ring fires at half the rate)."""
PROBE_SIDES = 4
"""Probe offsets of a pulse: toward lower azimuth, higher azimuth, lower elevation, higher elevation."""
PLANE_TOLERANCE_M = 0.02
"""A probe is on its central ray's plane when the plane's distances from the two rays' starts differ by
no more than the starts do (the exit aperture) and this (a gently bent surface: a car's body, a road's
camber; :func:`on_one_plane`). On the street the probes on their pulse's surface differ by the aperture's
8 mm exactly, those on another face of the same object by 1 m or more."""
ROUND_FOOTPRINT = 0.01
"""A footprint is round when its horizontal and vertical rims differ by at most this share
(:func:`plane_tolerance_m`)."""
PLANE_MAX_SPREAD = 2.0
"""A probe on its central ray's plane keeps one ray only while its range differs from the central
ray's by at most this share of ``spread_m`` (its rim within two pulse lengths in range of its centre).
Beyond, the dense bundle's 19 echoes no longer blend into one broadened pulse: they part into peaks
(second returns, points between their neighbours) that the single-ray model's one broadened echo does
not give, and ``--beam full`` is held to the dense bundle's statistics (docs/beam-full.md; on the street
an HDL-64E's mixed pixels came to 16 % above dense sampling's without this bound, 7 % with it)."""


def probe_pattern(pattern: SubRayPattern) -> SubRayPattern:
    """The four probe rays of a bundle ``pattern``: its largest offsets to either side in the horizontal
    and the vertical, each on its own axis (in the order of :data:`PROBE_SIDES`)."""
    off = np.asarray(pattern.offsets_rad, np.float64)
    h_lo, h_hi = float(off[:, 0].min()), float(off[:, 0].max())
    v_lo, v_hi = float(off[:, 1].min()), float(off[:, 1].max())
    return offsets_pattern(np.array([[h_lo, 0.0], [h_hi, 0.0], [0.0, v_lo], [0.0, v_hi]]))


def offsets_pattern(probes: np.ndarray) -> SubRayPattern:
    """A read-only pattern of the probe rays at ``probes`` (K, 2) offsets (rad): equal weights, each
    ray's radius over the farthest's."""
    weights = np.full(len(probes), 1.0 / len(probes), np.float32)
    radius = np.hypot(probes[:, 0], probes[:, 1])
    radius = radius / radius.max() if radius.max() > 0 else radius
    for a in (probes, weights, radius):
        a.setflags(write=False)
    return SubRayPattern(probes, weights, radius)


def probe_sides(f: Firings, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """(K,) int64 the side (:data:`PROBE_SIDES`) on which pulse ``i`` of each neighbour pair ``(i, j)`` of
    firings ``f`` probes toward ``j`` (the larger of the azimuth and elevation steps between them; ``j``
    probes on the opposite side, ``side ^ 1``)."""
    az_i, az_j = np.take(f.azimuth_deg, i), np.take(f.azimuth_deg, j)
    el_i, el_j = np.take(f.elevation_deg, i), np.take(f.elevation_deg, j)
    d_h = (np.remainder(az_j - az_i + 180.0, 360.0) - 180.0) * np.cos(np.radians(el_i))
    d_v = el_j - el_i
    return np.where(np.abs(d_h) >= np.abs(d_v), (d_h > 0).astype(np.int64), 2 + (d_v > 0).astype(np.int64))


def probe_keys(xp: Any, n: int, i: Any, j: Any, side_i: Any, seam: Any = None) -> Any:
    """(R,) int64 ``side * n + pulse`` of the probes of the marked pairs ``(i, j)`` of ``n`` pulses
    whose pulse ``i`` probes on ``side_i`` (:func:`probe_sides`), and the ``seam`` probes' keys
    (:func:`seam_keys`, None: none), each once, sorted (by side, then pulse), on array module ``xp``
    (NumPy on the host, CuPy in the device frame)."""
    wanted = xp.zeros(PROBE_SIDES * n, bool)
    wanted[side_i * n + i] = True
    wanted[(side_i ^ 1) * n + j] = True
    if seam is not None:
        wanted[seam] = True
    return xp.flatnonzero(wanted)


def seam_keys(f: Firings) -> np.ndarray:
    """(S,) int64 ``side * n + pulse`` of the probes toward a ring neighbour that fired outside the
    frame: each pulse of firings ``f`` (``n`` of them) whose ring next above (below) in elevation fires
    in the frame, but none of its pulses within :data:`SEAM_STEPS` of the pulse's own azimuth steps
    along its ring (nor within :data:`~rt_lidar.pipeline.beam_full.NEIGHBOUR_MAX_DEG`), probes upward
    (downward) unasked, sorted.

    A sim frame is a slice of time, and each laser fires at the head's azimuth plus its own azimuth
    offset (a Velodyne HDL-64E's rotational corrections, -8 to +10 deg): at a frame's seam the ring
    next to a pulse fired at that pulse's azimuth in the frame before or after, over as many columns
    as their two offsets differ (up to 18 deg, 100 columns of an HDL-64E). No pair can mark such a
    pulse from that side, so its probe looks there itself: it keeps the bundle only where it sees a
    step (:func:`probe_marks`), as a marked pulse's does. (A pulse whose nearest ring neighbour in the
    frame lies a few columns off would be paired with it and probe sideways, toward it, not toward the
    ring: hence the bound in steps.)"""
    from rt_lidar.pipeline.beam_full import NEIGHBOUR_MAX_DEG, ring_ranks

    n = len(f)
    if n < 2:
        return np.zeros(0, np.int64)
    rank = ring_ranks(f)
    az = np.asarray(f.azimuth_deg, np.float64)
    got = seam_probe_keys(rank, az, SEAM_STEPS, NEIGHBOUR_MAX_DEG)  # compiled, where built: the same keys
    return numpy_seam_keys(rank, az) if got is None else got


def numpy_seam_keys(rank: np.ndarray, az: np.ndarray) -> np.ndarray:
    """:func:`seam_keys` by NumPy of firings of ring ranks ``rank`` (:func:`ring_ranks`, two or more) at
    azimuths ``az`` (float64 deg)."""
    from rt_lidar.pipeline.beam_full import NEIGHBOUR_MAX_DEG, nearest_in_ring, ring_sorted

    n = rank.size
    order, r_s, a_s, key = ring_sorted(rank, az)
    present = np.zeros(int(rank.max()) + 2, bool)
    present[rank] = True
    # each pulse's step along its ring: the nearer of its azimuth neighbours (none: NEIGHBOUR_MAX_DEG)
    gap = np.where(r_s[1:] == r_s[:-1], np.abs(np.diff(a_s)), np.inf)
    own = np.minimum(np.concatenate([[np.inf], gap]), np.concatenate([gap, [np.inf]]))
    far = np.minimum(SEAM_STEPS * own, NEIGHBOUR_MAX_DEG)
    found = []
    for step, side in ((1, 3), (-1, 2)):  # the ring above: probe upward; below: downward
        _, _, d_lo, d_hi = nearest_in_ring(r_s, a_s, key, step)
        there = present[np.maximum(r_s + step, 0)] & (r_s + step >= 0)
        lone = there & (np.minimum(d_lo, d_hi) > far)
        found.append(side * n + order[lone])
    return np.sort(np.concatenate(found)).astype(np.int64)


def probe_rows(
    f: Firings, i: np.ndarray, j: np.ndarray, seam: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(pulse, side) int64 of the probes of the marked neighbour pairs ``(i, j)`` of firings ``f``: each
    pulse of a pair probes on the side of the other (:func:`probe_sides`), and the ``seam`` probes'
    keys (:func:`seam_keys`; None: none); each (pulse, side) once, by side and then pulse (rays of one
    side of neighbouring pulses run side by side: Embree's packets of them stay coherent)."""
    n = len(f)
    if not i.size and (seam is None or not seam.size):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    key = probe_keys(np, n, i, j, probe_sides(f, i, j), seam)
    return key % n, key // n


def _probe_hits(
    source: WorldSource, f: Firings, pulse: np.ndarray, side: np.ndarray, probes: SubRayPattern
) -> Hits:
    """The probe ray of each (``pulse``, ``side``) of firings ``f``, one row each, cast as the bundle's
    sub-rays are (from the pose at the firing time, started across the exit aperture), without the glass
    ghosts' mirror rays (:func:`probe_marks` reads none of their fields)."""
    from rt_lidar.pipeline.beam_full import take_firings
    from rt_lidar.pipeline.sources import _beam_starts

    in_use = np.zeros(len(f), bool)
    in_use[pulse] = True
    pulses = np.flatnonzero(in_use)
    # each probe's pulse's place among the probed pulses: the probed pulses up to it, less one (the
    # integers a search of ``pulses`` gives, in one pass over the frame's pulses)
    place = np.cumsum(in_use, dtype=np.int64) - 1
    fu = take_firings(f, pulses)
    samples = sensor_pose_samples(source.world, fu.t_ns, source.mount)
    pos, quat = _beam_starts(source.ops, fu, *interpolate_pose_samples(fu.t_ns, samples))
    # only the sides cast (18,900 of a rain-row frame's 4 x 13,700), not all four of every probed pulse
    rays = source.ops.subray_rows(
        fu.directions(), probes, source.exit_m_per_rad, pos, quat, np.take(place, pulse), side
    )
    return source._cast(take_firings(f, pulse), *rays, None, ghosts=False)


def on_one_plane(
    c_rng: Any,
    c_cos: Any,
    q_rng: Any,
    q_cos: Any,
    same_surface: Any,
    tol_m: float,
    xp: Any = np,
) -> Any:
    """(R,) bool: the probes (range ``q_rng``, incidence cosine ``q_cos``) that lie on the plane of their
    central ray (``c_rng``, ``c_cos``): ``same_surface`` (the same object and material) and the plane's
    distance from the two rays' starts the same within ``tol_m``. A ray meets a plane ``d`` away from
    its start at range ``d / cos(i)``, so on one plane ``q_rng * q_cos == c_rng * c_cos`` up to the
    offset of the two starts along the plane's normal. On array module ``xp`` (CuPy in the device frame)."""
    with np.errstate(invalid="ignore"):
        off = xp.abs(q_rng * q_cos - c_rng * c_cos)
        return same_surface & (off <= np.float32(tol_m))


def plane_tolerance_m(exit_m_per_rad: tuple[float, float], probes: SubRayPattern) -> float | None:
    """The tolerance of :func:`on_one_plane` for ``probes`` started across an exit aperture of
    ``exit_m_per_rad`` (horizontal, vertical): the largest start offset of a probe, plus
    :data:`PLANE_TOLERANCE_M`; None for a footprint that is not round (its horizontal and vertical rims
    more than :data:`ROUND_FOOTPRINT` apart). The single-ray model broadens the echo by the beam's
    vertical divergence, the tilt taken as the ground's (:mod:`rt_lidar.physics.pulse_spread`): right
    for a round beam whichever way the plane tilts, too narrow for a wall met at a slant by a beam
    twice as wide as tall (a VLP-16's 3 x 1.5 mrad: echo widths 2.6 % below the dense bundle's on the
    validation scene), so an oval beam keeps the bundle on every slant."""
    off = np.asarray(probes.offsets_rad, np.float64)
    h_rim, v_rim = float(np.abs(off[:, 0]).max()), float(np.abs(off[:, 1]).max())
    if abs(h_rim - v_rim) > ROUND_FOOTPRINT * max(h_rim, v_rim):
        return None
    starts = np.hypot(off[:, 0] * exit_m_per_rad[0], off[:, 1] * exit_m_per_rad[1])
    return float(starts.max(initial=0.0)) + PLANE_TOLERANCE_M


def probe_marks(
    central: Hits,
    pulse: Any,
    probe: Hits,
    retro: Any,
    plan: FullBeamPlan,
    plane_tol_m: float | None = None,
    xp: Any = np,
) -> dict[str, Any]:
    """Per reason (``edge``, ``glass``, ``retro``), the (R,) bool probes (``probe``'s rows, of pulses
    ``pulse``) that see a step from their pulse's ``central`` ray within the footprint (module docstring);
    ``retro`` the world materials' retro flags; ``plane_tol_m`` that of :func:`on_one_plane` (None: no
    probe counts as on its central ray's plane, every slant beyond ``spread_m / 2`` keeps the bundle).
    Written once for any array module ``xp``: NumPy on the host, CuPy (or NumPy, on its CPU twin) in the
    device frame (:class:`~rt_lidar.pipeline.device_frame.DeviceWorldSource`), every array on it."""
    c_rng = xp.take(central.range_m, pulse)
    q_rng = probe.range_m
    c_hit, q_hit = xp.isfinite(c_rng), xp.isfinite(q_rng)
    c_glass = xp.take(central.glass_material, pulse) >= 0
    q_glass = probe.glass_material >= 0
    c_mat = xp.take(central.material, pulse)
    c_retro = c_hit & (c_mat >= 0) & retro[xp.maximum(c_mat, 0)]
    q_retro = q_hit & (probe.material >= 0) & retro[xp.maximum(probe.material, 0)]
    with np.errstate(invalid="ignore"):
        dr = xp.abs(q_rng - c_rng)
        g_dr = xp.abs(probe.glass_range_m - xp.take(central.glass_range_m, pulse))
    both = c_hit & q_hit
    slanted = both & (dr > np.float32(plan.spread_m / 2.0))
    if plane_tol_m is not None and bool(slanted.any()):
        # of those, the probes on their central ray's plane see no step
        k = xp.flatnonzero(slanted)
        pk = xp.take(pulse, k)
        same = (xp.take(central.segment, pk) == xp.take(probe.segment, k)) & (
            xp.take(c_mat, k) == xp.take(probe.material, k)
        )
        plane = on_one_plane(
            xp.take(c_rng, k),
            xp.take(central.cos_incidence, pk),
            xp.take(q_rng, k),
            xp.take(probe.cos_incidence, k),
            same,
            plane_tol_m,
            xp,
        )
        plane &= xp.take(dr, k) <= np.float32(PLANE_MAX_SPREAD * plan.spread_m)
        slanted[k[plane]] = False
    return {
        "edge": (c_hit != q_hit) | slanted,
        "glass": (c_glass != q_glass) | (c_glass & q_glass & (g_dr > np.float32(plan.edge_m / 2.0))),
        "retro": c_retro != q_retro,
    }


def refine_bundles(
    source: WorldSource,
    f: Firings,
    central: Hits,
    pairs: tuple[np.ndarray, np.ndarray],
    plan: FullBeamPlan,
) -> tuple[np.ndarray, dict[str, int], int]:
    """(P,) bool: the pulses of firings ``f`` whose probe toward a neighbour of a marked pair ``pairs``,
    or toward a ring neighbour beyond the frame's seam (:func:`seam_keys`) or across a ring gap an
    opening may hide in (:func:`~rt_lidar.pipeline.beam_openings.opening_keys`), sees the step (module
    docstring), from their ``central`` rays; how many of them each reason marked; and how many probe
    rays were cast."""
    chosen = np.zeros(len(f), bool)
    reasons = {"edge": 0, "glass": 0, "retro": 0}
    from rt_lidar.pipeline.beam_openings import opening_keys, ring_gaps

    unasked = np.concatenate([seam_keys(f), opening_keys(np, central.range_m, *ring_gaps(f))])
    pulse, side = probe_rows(f, *pairs, unasked)  # pulse: every probe's, unsorted
    if not pulse.size:
        return chosen, reasons, 0
    probes = probe_pattern(plan.pattern)
    probe = _probe_hits(source, f, pulse, side, probes)
    marks = probe_marks(
        central, pulse, probe, plan.retro, plan, plane_tolerance_m(source.exit_m_per_rad, probes)
    )
    for name, m in marks.items():
        by = np.zeros(len(f), bool)
        by[pulse[m]] = True
        reasons[name] = int(np.count_nonzero(by))
        chosen |= by
    return chosen, reasons, int(pulse.size)
