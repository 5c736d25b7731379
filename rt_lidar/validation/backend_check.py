"""The determinism contract across backends: the statistics every backend's scans must share.

Within one backend, configuration and seed a run gives the same bytes; the compiled twins give the NumPy
bytes. Across backends whose arithmetic differs (the weather and waveform kernels in float32 on a GPU,
or their CUDA source compiled for the CPU; another instruction set's ``powf``) a few outcomes at a
threshold may flip, so the scans agree in the statistics of :func:`backend_statistics` within
:data:`CROSS_BACKEND_TOLERANCES` (docs/determinism.md; tests/rt_lidar/test_backends.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rt_lidar.backend import PhysicsBackend
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.points import PointFlag
from rt_lidar.sensor.beam import BeamConfig

__all__ = [
    "CROSS_BACKEND_TOLERANCES",
    "BackendStatistics",
    "backend_scans",
    "backend_statistics",
    "compare_statistics",
]

CROSS_BACKEND_TOLERANCES: dict[str, tuple[float, float]] = {
    "points_per_scan": (0.005, 20.0),
    "second_return_share": (0.02, 0.0005),
    "rain_clutter_share": (0.05, 0.0005),
    "median_range_m": (0.001, 0.01),
    "median_intensity": (0.01, 1.0),
    "mean_reflectivity": (0.002, 0.0),
}
"""Per statistic (relative, absolute floor): two backends agree where ``|a - ref| <= max(rel * |ref|,
floor)``, ``ref`` the NumPy backend's value."""


@dataclass(frozen=True)
class BackendStatistics:
    """What a scan reports, summed over a few scans of one run."""

    points_per_scan: float
    second_return_share: float
    """Points with return id 1 over all points."""
    rain_clutter_share: float
    """Points flagged RAIN_CLUTTER over all points."""
    median_range_m: float
    median_intensity: float
    mean_reflectivity: float

    def as_dict(self) -> dict[str, float]:
        """A plain dict (for JSON)."""
        return asdict(self)


def backend_scans(
    backend: PhysicsBackend,
    preset: str = "VLP-16",
    scene: str = "street",
    *,
    scans: int = 2,
    seed: int = 3,
    sub_rays: int = 7,
    return_mode: str = "dual",
    rain_mm_h: float = 25.0,
) -> list[Scan]:
    """``scans`` whole scans (after the first, which may be partial) of ``preset`` in ``scene`` with
    ``sub_rays`` sub-rays, ``return_mode``, echo pulse width and rain: every kind of the physics' array
    work (radar equation, detection, range noise, weather, echo waveform), on ``backend``."""
    weather = WeatherConfig(rain_mm_h=rain_mm_h) if rain_mm_h > 0 else None
    cfg = PhysicsConfig(beam=BeamConfig(sub_rays, return_mode, True), weather=weather)
    pipe = build_pipeline(preset, scene, seed=seed, physics=cfg, backend=backend).pipeline
    try:
        return pipe.scans(scans + 1)[1:]
    finally:
        pipe.close()


def backend_statistics(scans: list[Scan]) -> BackendStatistics:
    """:class:`BackendStatistics` of ``scans``."""
    pts = np.concatenate([s.points for s in scans])
    n = max(pts.size, 1)
    r = np.sqrt(pts["x"].astype(np.float64) ** 2 + pts["y"] ** 2 + pts["z"] ** 2)
    clutter = np.count_nonzero(pts["flags"] & np.uint8(PointFlag.RAIN_CLUTTER))
    return BackendStatistics(
        points_per_scan=pts.size / max(len(scans), 1),
        second_return_share=float(np.count_nonzero(pts["return_id"] == 1)) / n,
        rain_clutter_share=float(clutter) / n,
        median_range_m=float(np.median(r)) if pts.size else float("nan"),
        median_intensity=float(np.median(pts["intensity"])) if pts.size else float("nan"),
        mean_reflectivity=float(np.mean(pts["reflectivity"], dtype=np.float64)) if pts.size else float("nan"),
    )


def compare_statistics(
    got: BackendStatistics, ref: BackendStatistics
) -> dict[str, tuple[float, float, bool]]:
    """Per statistic of :data:`CROSS_BACKEND_TOLERANCES`: (got, reference, within its tolerance)."""
    out: dict[str, Any] = {}
    for name, (rel, floor) in CROSS_BACKEND_TOLERANCES.items():
        a, b = float(getattr(got, name)), float(getattr(ref, name))
        out[name] = (a, b, abs(a - b) <= max(rel * abs(b), floor))
    return out
