"""The beam footprint: a pulse as a bundle of sub-rays over the preset's divergence.

A pulse of a real sensor is a cone, not a line: its divergence (``optics.beam_divergence_h/v_mrad``,
full angles at 1/e^2 of the peak for a Gaussian beam) spreads it over a footprint that grows with range,
and the receiver's sensitivity over that footprint shapes what comes back. :func:`subray_pattern`
samples the footprint with N sub-rays on concentric hexagonal rings (1, 6, 12, 18 ... per ring; a last,
partly filled ring is spread evenly), each weighted by the combined transmitter x receiver profile of
the preset (Gaussian, top hat or a measured 2-D table) so that the weights sum to 1. One sub-ray is the
nominal direction with weight 1: the single-ray model exactly.

:class:`BeamConfig` holds the run's choices (sub-ray count, return mode, echo pulse width output) that
override the preset's.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.schema import Where, check_fields, spec
from rt_lidar.sensor.presets import RETURN_MODES, SensorPreset

__all__ = [
    "FULL_BEAM_BUNDLES",
    "FULL_BEAM_SUB_RAYS",
    "BeamConfig",
    "SubRayPattern",
    "exit_m_per_rad",
    "exit_offsets",
    "pattern_from_offsets",
    "profile_weight",
    "subray_directions",
    "subray_pattern",
]

MAX_SUB_RAYS = 127
FULL_BEAM_SUB_RAYS = 19
"""Sub-rays of the bundle ``--beam full`` casts where it casts one (the dense sampling it stands for)."""
FULL_BEAM_BUNDLES = ("sparse", "dense")
"""``--beam full``'s bundle: ``sparse`` (the dense pattern's rim thinned to every other sub-ray, each
weighted for two: :func:`rt_lidar.pipeline.beam_sparse.sparse_bundle`) or ``dense`` (the whole pattern)."""
MAX_OFFSET_RAD = 0.1
"""Largest sub-ray offset :func:`pattern_from_offsets` accepts (~5.7 deg; real divergences are mrad)."""


@dataclass(frozen=True)
class BeamConfig:
    """Run settings of the beam model; None takes the preset's value."""

    sub_rays: int | None = spec(None, 1, MAX_SUB_RAYS)
    """Sub-rays per pulse (1..127), None = ``optics.sub_rays``."""
    return_mode: str | None = spec(None, choices=RETURN_MODES)
    """strongest / last / first / dual / multi, None = ``returns.default``."""
    epw: bool = False
    """Report each return's echo pulse width (``PhysicsResult.epw_ns``, ``Scan.extras['epw_ns']``)."""
    full: bool = False
    """``--beam full``: cast the bundle of ``sub_rays`` (default :data:`FULL_BEAM_SUB_RAYS`) only for the
    pulses whose footprint meets a depth edge, glass or a retro-reflector, one exact ray elsewhere
    (:mod:`rt_lidar.pipeline.beam_full`)."""
    bundle: str = spec("sparse", choices=FULL_BEAM_BUNDLES)
    """With ``full``: cast the bundle ``sparse`` (its rim thinned to every other sub-ray, each weighted
    for two; the default, ``--beam full``) or ``dense`` (every sub-ray, ``--beam full-dense``)."""

    def __post_init__(self) -> None:
        check_fields(self, "beam")

    def validate(self, what: Where) -> None:
        """``--beam full`` casts a bundle: at least two sub-rays."""
        if self.full and self.sub_rays is not None and self.sub_rays < 2:
            problem = f"--beam full casts a bundle of 2..{MAX_SUB_RAYS} sub-rays, got {self.sub_rays}"
            raise what.fail("sub_rays", problem)

    def resolve(self, preset: SensorPreset) -> tuple[int, str]:
        """(sub-rays, return mode) for ``preset``; a mode the sensor does not offer is an error."""
        default = FULL_BEAM_SUB_RAYS if self.full else preset.optics.sub_rays
        n = self.sub_rays if self.sub_rays is not None else default
        mode = self.return_mode or preset.returns.default
        if mode not in preset.returns.modes:
            raise ConfigError(
                f"{preset.name} has no return mode '{mode}'; it offers {', '.join(preset.returns.modes)}"
            )
        return n, mode


@dataclass(frozen=True)
class SubRayPattern:
    """Angular offsets of the sub-rays from the nominal direction and their weights (sum 1)."""

    offsets_rad: np.ndarray  # (N, 2) float64: horizontal, vertical angle
    weights: np.ndarray  # (N,) float32, sub-ray 0 is the nominal direction
    radius: np.ndarray  # (N,) float64, normalised ring radius (0 centre .. 1 outer ring)

    def __len__(self) -> int:
        return int(self.weights.shape[0])


def _hex_rings(n: int) -> np.ndarray:
    """(n, 2) unit-disc points: the centre, then rings k = 1, 2 ... of 6k points; the last ring that n
    does not fill is spread evenly over the circle. Ring radii are k / K (K = number of rings)."""
    pts = [(0.0, 0.0)]
    rings: list[int] = []
    left = n - 1
    k = 1
    while left > 0:
        rings.append(min(6 * k, left))
        left -= rings[-1]
        k += 1
    big = len(rings)
    for k, m in enumerate(rings, start=1):
        phase = 0.0 if k % 2 else math.pi / (6 * k)
        for j in range(m):
            a = phase + 2.0 * math.pi * j / m
            pts.append((k / big * math.cos(a), k / big * math.sin(a)))
    return np.array(pts, dtype=np.float64)


def profile_weight(preset: SensorPreset, h_rad: np.ndarray, v_rad: np.ndarray) -> np.ndarray:
    """Relative sensitivity of the footprint at angular offsets (h, v) from the beam axis (peak 1 for the
    analytic profiles; the table's own scale for a measured one)."""
    o = preset.optics
    if o.beam_profile == "table":
        assert o.beam_profile_h_mrad is not None and o.beam_profile_v_mrad is not None
        assert o.beam_profile_table is not None
        gh = np.asarray(o.beam_profile_h_mrad) * 1e-3
        gv = np.asarray(o.beam_profile_v_mrad) * 1e-3
        tab = np.asarray(o.beam_profile_table, np.float64).reshape(gv.size, gh.size)
        return _bilinear(gh, gv, tab, np.asarray(h_rad, np.float64), np.asarray(v_rad, np.float64))
    wh = max(o.beam_divergence_h_mrad, 1e-6) * 0.5e-3  # 1/e^2 half angles
    wv = max(o.beam_divergence_v_mrad, 1e-6) * 0.5e-3
    q = (np.asarray(h_rad) / wh) ** 2 + (np.asarray(v_rad) / wv) ** 2
    if o.beam_profile == "top_hat":
        return np.where(q <= 1.0 + 1e-9, 1.0, 0.0)
    return np.exp(-2.0 * q)


def _bilinear(gh: np.ndarray, gv: np.ndarray, tab: np.ndarray, h: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Bilinear interpolation of ``tab`` (rows = v, cols = h); 0 outside the grid."""
    inside = (h >= gh[0]) & (h <= gh[-1]) & (v >= gv[0]) & (v <= gv[-1])
    i = np.clip(np.searchsorted(gh, h) - 1, 0, gh.size - 2)
    j = np.clip(np.searchsorted(gv, v) - 1, 0, gv.size - 2)
    fx = np.clip((h - gh[i]) / (gh[i + 1] - gh[i]), 0.0, 1.0)
    fy = np.clip((v - gv[j]) / (gv[j + 1] - gv[j]), 0.0, 1.0)
    top = tab[j, i] * (1 - fx) + tab[j, i + 1] * fx
    bot = tab[j + 1, i] * (1 - fx) + tab[j + 1, i + 1] * fx
    return np.where(inside, top * (1 - fy) + bot * fy, 0.0)


@functools.lru_cache(maxsize=32)
def subray_pattern(preset: SensorPreset, n: int) -> SubRayPattern:
    """The N-sub-ray footprint of ``preset`` (cached); N = 1 is the nominal ray with weight 1."""
    if not 1 <= n <= MAX_SUB_RAYS:
        raise ConfigError(f"sub-rays must be in [1, {MAX_SUB_RAYS}], got {n}")
    unit = _hex_rings(n)
    o = preset.optics
    if o.beam_profile == "table":
        assert o.beam_profile_h_mrad is not None and o.beam_profile_v_mrad is not None
        half_h = 0.5e-3 * (o.beam_profile_h_mrad[-1] - o.beam_profile_h_mrad[0])
        half_v = 0.5e-3 * (o.beam_profile_v_mrad[-1] - o.beam_profile_v_mrad[0])
        ch = 0.5e-3 * (o.beam_profile_h_mrad[-1] + o.beam_profile_h_mrad[0])
        cv = 0.5e-3 * (o.beam_profile_v_mrad[-1] + o.beam_profile_v_mrad[0])
        off = np.stack([ch + unit[:, 0] * half_h, cv + unit[:, 1] * half_v], axis=1)
    else:
        ext = o.footprint_extent if o.beam_profile == "gaussian" else 1.0
        wh = o.beam_divergence_h_mrad * 0.5e-3 * ext
        wv = o.beam_divergence_v_mrad * 0.5e-3 * ext
        off = np.stack([unit[:, 0] * wh, unit[:, 1] * wv], axis=1)
    if n == 1:
        off = np.zeros((1, 2))
        w = np.ones(1)
    else:
        w = profile_weight(preset, off[:, 0], off[:, 1])
        if float(w.sum()) <= 0.0:
            raise ConfigError(f"{preset.name}: the beam profile is zero at every sub-ray")
        w = w / w.sum()
    radius = np.hypot(unit[:, 0], unit[:, 1])
    for a in (off, radius):
        a.setflags(write=False)
    weights = w.astype(np.float32)
    weights.setflags(write=False)
    return SubRayPattern(off, weights, radius)


def pattern_from_offsets(offsets_rad: np.ndarray, weights: np.ndarray) -> SubRayPattern:
    """A pattern of explicit sub-ray offsets (N, 2) rad and weights (N,), as a controller sends them to
    the embedded server (``rtLidarGetBeamHits``); checked: 1..MAX_SUB_RAYS rays, offsets within
    MAX_OFFSET_RAD, weights >= 0. Weights are kept as given (float32); radii are normalised distances
    from the first sub-ray."""
    off = np.array(offsets_rad, dtype=np.float64).reshape(-1, 2)
    w = np.array(weights, dtype=np.float32).ravel()
    n = w.shape[0]
    if not 1 <= n <= MAX_SUB_RAYS or off.shape[0] != n:
        raise ConfigError(
            f"beam: need 1..{MAX_SUB_RAYS} sub-rays with one offset each, got {off.shape[0]} / {n}"
        )
    if not (np.isfinite(off).all() and np.isfinite(w).all()) or float(np.abs(off).max()) > MAX_OFFSET_RAD:
        raise ConfigError(f"beam: sub-ray offsets must be finite and within {MAX_OFFSET_RAD} rad")
    if (w < 0).any() or float(w.sum()) <= 0.0:
        raise ConfigError("beam: sub-ray weights must be >= 0 and not all 0")
    dist = np.hypot(off[:, 0] - off[0, 0], off[:, 1] - off[0, 1])
    radius = dist / dist.max() if dist.max() > 0 else dist
    for a in (off, w, radius):
        a.setflags(write=False)
    return SubRayPattern(off, w, radius)


def exit_m_per_rad(preset: SensorPreset) -> tuple[float, float]:
    """Metres across the exit aperture per radian of sub-ray offset, horizontal and vertical: a sub-ray
    ``a`` rad off the axis starts ``a * d0 / theta`` off it, so the footprint is ``d0 + theta R`` at every
    range R (the beam leaves an aperture of diameter d0, it does not start from a point)."""
    o = preset.optics
    d0 = o.beam_exit_diameter_m

    def per(theta_mrad: float) -> float:
        return d0 / (theta_mrad * 1e-3) if theta_mrad > 0 else 0.0

    return per(o.beam_divergence_h_mrad), per(o.beam_divergence_v_mrad)


def exit_offsets(
    directions: np.ndarray, pattern: SubRayPattern, m_per_rad: tuple[float, float]
) -> np.ndarray:
    """(P * N, 3) float64 start points of the sub-rays across the exit aperture (sensor frame, from the
    sensor origin), pulse-major, in the beam frame of :func:`subray_directions`."""
    d = directions.astype(np.float64)
    h, v = _beam_frame(d)
    oh = pattern.offsets_rad[:, 0] * m_per_rad[0]
    ov = pattern.offsets_rad[:, 1] * m_per_rad[1]
    out = oh[None, :, None] * h[:, None, :] + ov[None, :, None] * v[:, None, :]
    return out.reshape(-1, 3)


def _beam_frame(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Horizontal (``z x d``) and vertical (``d x h``) unit vectors of beams ``d`` (P, 3) float64."""
    h = np.stack([-d[:, 1], d[:, 0], np.zeros(d.shape[0])], axis=1)
    hn = np.linalg.norm(h, axis=1)
    vertical = hn < 1e-9
    h[vertical] = (0.0, 1.0, 0.0)
    h /= np.linalg.norm(h, axis=1)[:, None]
    return h, np.cross(d, h)


def subray_directions(directions: np.ndarray, pattern: SubRayPattern) -> np.ndarray:
    """(P * N, 3) float32 unit sub-ray directions, pulse-major, for (P, 3) nominal ``directions``.

    Offsets are applied in the beam's own frame: horizontal along ``z x d`` (the scan direction of a
    spinning head), vertical along ``d x h``; a vertical beam takes x as its horizontal reference.
    """
    d = directions.astype(np.float64)
    n = len(pattern)
    if n == 1:
        return directions.astype(np.float32, copy=False)
    h, v = _beam_frame(d)
    th = np.tan(pattern.offsets_rad[:, 0])
    tv = np.tan(pattern.offsets_rad[:, 1])
    out = d[:, None, :] + th[None, :, None] * h[:, None, :] + tv[None, :, None] * v[:, None, :]
    out /= np.linalg.norm(out, axis=2, keepdims=True)
    if not pattern.offsets_rad[0].any():
        out[:, 0, :] = d  # the nominal ray stays bit-exact
    return out.reshape(-1, 3).astype(np.float32)
