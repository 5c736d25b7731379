"""``--beam full``'s steps in one compiled pass each (``_beam_steps``, ``_bundle_choice``), where built.

:func:`choose_bundles` marks the pulses that get the bundle as
:func:`~rt_lidar.pipeline.beam_full.neighbour_marks` does; :func:`seam_probe_keys` gives the seam
probes' keys :func:`~rt_lidar.pipeline.beam_probe.seam_keys` computes; :func:`bundle_rays` (and chosen
rows of it alone, :func:`bundle_rows`) gives what
:meth:`rt_lidar.backend.source_ops.NumpySourceOps.subray_starts` computes with
:func:`~rt_lidar.sensor.beam.subray_directions`, :func:`~rt_lidar.sensor.beam.exit_offsets`,
``np.repeat`` and :func:`~rt_lidar.unreal_bridge.world.pose.quat_rotate`. Both bit for bit
(``tests/rt_lidar/test_beam_steps.py``), or None when off or given arrays they do not take; the
compiled source operations (:class:`rt_lidar.backend.source_ops.CompiledSourceOps`) then run the NumPy
code.
"""

from __future__ import annotations

import os

import numpy as np

from rt_lidar.kernels.np_loops import LoopCheck
from rt_lidar.sensor.beam import SubRayPattern

try:
    from rt_lidar.pipeline import _beam_steps as _c
except ImportError:  # built without a C compiler: the NumPy code runs
    _c = None  # type: ignore[assignment]
try:
    from rt_lidar.pipeline import _bundle_choice as _choice
except ImportError:
    _choice = None  # type: ignore[assignment]

__all__ = ["available", "bundle_rays", "bundle_rows", "choose_bundles", "seam_probe_keys"]

enabled = not os.environ.get("RT_LIDAR_NO_TWINS")
"""Switch the compiled step off (tests compare both; ``RT_LIDAR_NO_TWINS=1`` switches every twin off)."""


def available() -> bool:
    """Whether the compiled step runs."""
    return _c is not None and enabled


def _bundle_tables(
    directions: np.ndarray,
    pattern: SubRayPattern,
    m_per_rad: tuple[float, float],
    pos: np.ndarray,
    quat: np.ndarray,
) -> tuple[int, int, tuple[np.ndarray, ...]] | None:
    """(P, N, the pattern's (tan h, tan v, exit offset h, v) float64 tables) for the compiled bundle
    steps; None when off, for one sub-ray, or for arrays of other types."""
    n = len(pattern)
    p = directions.shape[0] if isinstance(directions, np.ndarray) else -1
    if not available() or n < 2 or p < 0 or directions.dtype != np.float32 or directions.shape != (p, 3):
        return None
    if pos.dtype != np.float64 or pos.shape != (p, 3) or quat.dtype != np.float64 or quat.shape != (p, 4):
        return None
    off = pattern.offsets_rad
    th, tv = np.tan(off[:, 0]), np.tan(off[:, 1])
    oh, ov = off[:, 0] * m_per_rad[0], off[:, 1] * m_per_rad[1]
    return p, n, tuple(np.ascontiguousarray(a, np.float64) for a in (th, tv, oh, ov))


def bundle_rays(
    directions: np.ndarray,
    pattern: SubRayPattern,
    m_per_rad: tuple[float, float],
    pos: np.ndarray,
    quat: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(sub-ray directions (P * N, 3) float32 in the sensor frame, their start points (P * N, 3) and
    poses (P * N, 4) float64) of the bundles ``pattern`` of nominal ``directions`` (P, 3) float32 fired
    from ``pos`` (P, 3) / ``quat`` (P, 4) float64, started across the exit aperture when ``m_per_rad``
    (:func:`~rt_lidar.sensor.beam.exit_m_per_rad`) is not zero. None when off, for one sub-ray, or for
    arrays of other types."""
    tables = _bundle_tables(directions, pattern, m_per_rad, pos, quat)
    if tables is None:
        return None
    p, n, (th, tv, oh, ov) = tables
    d_out = np.empty((p * n, 3), np.float32)
    pos_out, quat_out = np.empty((p * n, 3)), np.empty((p * n, 4))
    _c.bundle_rays(
        np.ascontiguousarray(directions), th, tv, oh, ov,
        np.ascontiguousarray(pos), np.ascontiguousarray(quat),
        p, n, int(not pattern.offsets_rad[0].any()), int(any(m_per_rad)), d_out, pos_out, quat_out,
    )  # fmt: skip
    return d_out, pos_out, quat_out


def bundle_rows(
    directions: np.ndarray,
    pattern: SubRayPattern,
    m_per_rad: tuple[float, float],
    pos: np.ndarray,
    quat: np.ndarray,
    pulse: np.ndarray,
    sub: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Rows ``pulse * N + sub`` ((R,) int64 each) of what :func:`bundle_rays` gives for the same
    arguments, made alone (the probes of ``--beam full`` cast one or two of their four sides a pulse):
    the same bits as its rows taken by ``np.take``. None where :func:`bundle_rays` would be None or for
    index arrays of other types."""
    r = pulse.shape[0] if isinstance(pulse, np.ndarray) else -1
    if r < 0 or pulse.shape != (r,) or not isinstance(sub, np.ndarray) or sub.shape != (r,):
        return None
    if pulse.dtype != np.int64 or sub.dtype != np.int64:
        return None
    tables = _bundle_tables(directions, pattern, m_per_rad, pos, quat)
    if tables is None:
        return None
    p, n, (th, tv, oh, ov) = tables
    d_out = np.empty((r, 3), np.float32)
    pos_out, quat_out = np.empty((r, 3)), np.empty((r, 4))
    _c.bundle_rows(
        np.ascontiguousarray(directions), th, tv, oh, ov,
        np.ascontiguousarray(pos), np.ascontiguousarray(quat),
        np.ascontiguousarray(pulse), np.ascontiguousarray(sub),
        p, n, r, int(not pattern.offsets_rad[0].any()), int(any(m_per_rad)), d_out, pos_out, quat_out,
    )  # fmt: skip
    return d_out, pos_out, quat_out


_choice_loops_ok = LoopCheck(_choice, (np.hypot,), [(np.hypot, np.float32)])


def _choice_available() -> bool:
    return enabled and _choice_loops_ok()


def choose_bundles(
    rank: np.ndarray,
    azimuth_deg: np.ndarray,
    elevation_deg: np.ndarray,
    range_m: np.ndarray,
    segment: np.ndarray,
    glass: np.ndarray,
    glass_range_m: np.ndarray,
    retro: np.ndarray,
    limits: tuple[float, float, float, float],
    with_pairs: bool = False,
) -> dict[str, np.ndarray] | tuple[dict[str, np.ndarray], np.ndarray, np.ndarray] | None:
    """The pulses each reason marks (``edge``, ``glass``, ``retro``: (P,) bool) among firings of ring ranks
    ``rank`` (int64, each ring's rank in elevation) at ``azimuth_deg`` / ``elevation_deg`` (float64),
    their central rays' ``range_m``, ``segment``, ``glass`` (bool), ``glass_range_m`` (inf without glass)
    and ``retro`` (bool), with ``limits`` (neighbours' largest azimuth step in degrees, the footprint in
    rad, the spread and edge in m), as ``rt_lidar.pipeline.beam_full.neighbour_marks`` marks them; None
    when off or for arrays of other types. ``with_pairs``: also the (i, j) pairs of neighbours that marked
    their pulses, in the order ``rt_lidar.pipeline.beam_full.neighbour_steps`` gives them."""
    n = rank.shape[0]
    want = [
        (rank, np.int64), (azimuth_deg, np.float64), (elevation_deg, np.float64), (range_m, np.float32),
        (segment, np.uint32), (glass, np.bool_), (glass_range_m, np.float32), (retro, np.bool_),
    ]  # fmt: skip
    if not _choice_available() or any(a.dtype != d or a.shape != (n,) for a, d in want):
        return None
    c = np.ascontiguousarray
    az = c(np.radians(azimuth_deg).astype(np.float32))
    el = c(np.radians(elevation_deg).astype(np.float32))
    marks = {k: np.empty(n, np.uint8) for k in ("edge", "glass", "retro")}
    pairs: tuple[np.ndarray, ...] = (np.empty(2 * n + 1, np.int64), np.empty(2 * n + 1, np.int64))
    if not with_pairs:
        pairs = ()
    try:
        got = _choice.choose(
            c(rank), c(azimuth_deg), az, el, c(np.cos(el)), c(range_m), c(segment), c(glass).view(np.uint8),
            c(glass_range_m), c(retro).view(np.uint8), n, *limits, marks["edge"], marks["glass"],
            marks["retro"], *pairs,
        )  # fmt: skip
    except TypeError:  # an extension built before the marking pairs: the NumPy code runs
        if with_pairs:
            return None
        raise
    out = {k: v.view(np.bool_) for k, v in marks.items()}
    if with_pairs:
        return out, pairs[0][:got].copy(), pairs[1][:got].copy()
    return out


def seam_probe_keys(
    rank: np.ndarray, azimuth_deg: np.ndarray, seam_steps: float, max_deg: float
) -> np.ndarray | None:
    """(S,) int64 the keys :func:`~rt_lidar.pipeline.beam_probe.seam_keys` gives for ``n`` firings of ring
    ranks ``rank`` (int64, :func:`~rt_lidar.pipeline.beam_full.ring_ranks`: each in [0, n)) at
    ``azimuth_deg`` (float64, every one finite), with ``seam_steps`` and ``max_deg`` (its bounds); None
    when off, for arrays of other types, or an extension built before it (the NumPy code runs)."""
    n = rank.shape[0]
    if (
        not enabled
        or _choice is None
        or not hasattr(_choice, "seam")
        or rank.dtype != np.int64
        or azimuth_deg.dtype != np.float64
        or rank.shape != (n,)
        or azimuth_deg.shape != (n,)
        or (n and (int(rank.min()) < 0 or int(rank.max()) >= n))
        or not bool(np.isfinite(azimuth_deg).all())
    ):
        return None
    keys = np.empty(2 * n, np.int64)
    got = _choice.seam(
        np.ascontiguousarray(rank), np.ascontiguousarray(azimuth_deg), n, seam_steps, max_deg, keys
    )
    return keys[:got].copy()
