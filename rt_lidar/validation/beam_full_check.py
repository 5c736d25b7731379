"""``--beam full`` against dense sub-ray sampling: the statistics the adaptive beam must keep.

:func:`beam_statistics` runs one configuration for a few scans and measures what the divergent beam
changes in a scan: the share of second returns (dual mode), the blooming-flagged points, the echo pulse
width distribution (median and 90th percentile) and the mixed-pixel points at depth edges
(:func:`mixed_pixel_points`). :func:`compare_full_beam` runs the same scene with ``--beam full`` and
with every pulse as the dense bundle (19 sub-rays) and returns both; the tolerances that hold them
together are :data:`TOLERANCES` (docs/beam-full.md; tests/rt_lidar/pipeline/test_beam_full_fidelity.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.beam_full import beam_summary
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.points import PointFlag
from rt_lidar.sensor.beam import FULL_BEAM_SUB_RAYS, BeamConfig
from rt_lidar.unreal_bridge.world import Scene

__all__ = [
    "TOLERANCES",
    "BeamStatistics",
    "beam_statistics",
    "compare_full_beam",
    "mixed_pixel_points",
    "scan_statistics",
    "within_tolerance",
]

MIXED_EDGE_M = 2.0
"""A point's two azimuth neighbours (same ring) differ by at least this: it sits at a depth edge."""
MIXED_MARGIN_M = 0.3
"""... and it floats between them, at least this far from both: a mixed pixel."""

TOLERANCES: dict[str, tuple[float, float]] = {
    "second_return_share": (0.10, 0.0005),
    "bloom_points": (0.10, 3.0),
    "epw_median_ns": (0.02, 0.0),
    "epw_p90_ns": (0.02, 0.0),
    "mixed_pixel_points": (0.15, 5.0),
}
"""Per statistic (relative, absolute): ``--beam full`` passes where ``|full - dense| <= max(rel *
|dense|, abs)`` (the absolute floor keeps a statistic near zero from failing on a handful of points)."""


@dataclass(frozen=True)
class BeamStatistics:
    """What the beam model changes in a scan, over a few scans of one configuration."""

    points: int
    second_return_share: float
    """Points with return id 1 over all points."""
    bloom_points: float
    """Points flagged :attr:`PointFlag.BLOOM`, per scan."""
    epw_median_ns: float
    epw_p90_ns: float
    mixed_pixel_points: float
    """:func:`mixed_pixel_points` per scan."""
    beam: dict[str, Any]
    """summary.json's beam section of the run (the bundled share for ``--beam full``)."""

    def as_dict(self) -> dict[str, Any]:
        """A plain dict (for JSON)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def mixed_pixel_points(points: np.ndarray) -> int:
    """First returns (not rain clutter) that float between their two azimuth neighbours of the same ring,
    where those differ by at least :data:`MIXED_EDGE_M`, at least :data:`MIXED_MARGIN_M` from both (the
    veil of points a divergent beam leaves between a foreground edge and the background)."""
    first = points[(points["return_id"] == 0) & (points["flags"] & np.uint8(PointFlag.RAIN_CLUTTER) == 0)]
    order = np.lexsort((first["t"], first["ring"]))
    p = first[order]
    r = np.sqrt(p["x"].astype(np.float64) ** 2 + p["y"] ** 2 + p["z"] ** 2)
    same = (p["ring"][:-2] == p["ring"][1:-1]) & (p["ring"][1:-1] == p["ring"][2:])
    lo = np.minimum(r[:-2], r[2:])
    hi = np.maximum(r[:-2], r[2:])
    mid = r[1:-1]
    mixed = same & (hi - lo >= MIXED_EDGE_M) & (mid > lo + MIXED_MARGIN_M) & (mid < hi - MIXED_MARGIN_M)
    return int(np.count_nonzero(mixed))


def scan_statistics(scans: list[Scan], beam: dict[str, Any]) -> BeamStatistics:
    """:class:`BeamStatistics` of ``scans`` (made with ``epw`` on) of a run whose summary beam section is
    ``beam`` (a run over the bridge, say)."""
    pts = np.concatenate([s.points for s in scans])
    epw = np.concatenate([s.extras["epw_ns"] for s in scans]) if "epw_ns" in scans[0].extras else None
    n = max(len(scans), 1)
    return BeamStatistics(
        points=int(pts.size),
        second_return_share=float(np.count_nonzero(pts["return_id"] == 1)) / max(pts.size, 1),
        bloom_points=float(np.count_nonzero(pts["flags"] & np.uint8(PointFlag.BLOOM))) / n,
        epw_median_ns=float(np.median(epw)) if epw is not None and epw.size else float("nan"),
        epw_p90_ns=float(np.percentile(epw, 90)) if epw is not None and epw.size else float("nan"),
        mixed_pixel_points=float(sum(mixed_pixel_points(s.points) for s in scans)) / n,
        beam=beam,
    )


def beam_statistics(
    preset: str,
    scene: str | Callable[[], Scene],
    beam: BeamConfig,
    *,
    scans: int = 2,
    seed: int = 3,
    rain_mm_h: float = 0.0,
    sim_hz: float = 20.0,
) -> BeamStatistics:
    """:class:`BeamStatistics` of ``scans`` whole scans of ``preset`` in ``scene`` (a name, or a function
    giving the scene) with ``beam`` (``epw`` is switched on), in ``rain_mm_h`` of rain."""
    world = build_world(scene if isinstance(scene, str) else scene(), seed=seed)
    weather = WeatherConfig(rain_mm_h=rain_mm_h) if rain_mm_h > 0 else None
    cfg = PhysicsConfig(beam=dataclasses.replace(beam, epw=True), weather=weather)
    built = build_pipeline(preset, world, seed=seed, sim_hz=sim_hz, physics=cfg)
    pipe = built.pipeline
    try:
        got = pipe.scans(scans + 1)[1:]  # the first scan may be partial
    finally:
        pipe.close()
    return scan_statistics(got, beam_summary(pipe))


def compare_full_beam(
    preset: str,
    scene: str | Callable[[], Scene],
    *,
    return_mode: str = "dual",
    scans: int = 2,
    seed: int = 3,
    rain_mm_h: float = 0.0,
    bundle: str = "sparse",
) -> tuple[BeamStatistics, BeamStatistics]:
    """(``--beam full`` casting ``bundle``, every pulse as the dense 19-sub-ray bundle) statistics of the
    same run."""
    kw: dict[str, Any] = {"scans": scans, "seed": seed, "rain_mm_h": rain_mm_h}
    full_beam = BeamConfig(return_mode=return_mode, full=True, bundle=bundle)
    full = beam_statistics(preset, scene, full_beam, **kw)
    dense = beam_statistics(preset, scene, BeamConfig(FULL_BEAM_SUB_RAYS, return_mode), **kw)
    return full, dense


def within_tolerance(full: BeamStatistics, dense: BeamStatistics) -> dict[str, tuple[float, float, bool]]:
    """Per statistic of :data:`TOLERANCES`: (full, dense, within its tolerance)."""
    out = {}
    for name, (rel, floor) in TOLERANCES.items():
        a, b = float(getattr(full, name)), float(getattr(dense, name))
        ok = bool(np.isnan(a) and np.isnan(b)) or abs(a - b) <= max(rel * abs(b), floor)
        out[name] = (a, b, ok)
    return out
