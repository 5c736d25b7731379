"""The lidar reads of the embedded sim, prepared under the server's call lock and cast outside it: each
takes its interval and a frozen view of the world at once (:meth:`Sim.take_interval`); :attr:`rays`
and ``run()`` then need no lock (``rtLidarGetHits`` / ``rtLidarGetBeamHits``: :class:`HitsRead`;
``getLidarData``: :class:`DataRead`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rt_lidar.bridge.full_beam_wire import full_beam_to_wire
from rt_lidar.bridge.hits import hits_to_wire
from rt_lidar.pipeline.beam_full import full_beam_hits, plan_of_pattern
from rt_lidar.pipeline.sources import Hits, WorldSource
from rt_lidar.sensor.beam import SubRayPattern
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import Firings, firings_between
from rt_lidar.unreal_bridge import FluPose, LidarFrame, LidarHits
from rt_lidar.unreal_bridge.beam_call import FullBeamRequest
from rt_lidar.unreal_bridge.world import World

__all__ = ["DataRead", "FullBeamRead", "HitsRead", "PreparedRead", "Sim", "SimLidar"]


@dataclass
class SimLidar:
    """One lidar of the vehicle: its preset, its caster (at its mount) and its readers' cursors."""

    name: str
    preset: SensorPreset
    source: WorldSource
    cursors: dict[str, int] = field(default_factory=lambda: {"hits": 0, "data": 0})
    frames: dict[str, int] = field(default_factory=lambda: {"hits": 0, "data": 0})
    full_beam_rays_per_firing: float = 0.0
    """Rays a firing took in this lidar's last ``--beam full`` answer (its central ray and its share of
    the bundles' rows: what :meth:`FullBeamRead.run` counts against the ray budget); 0: none yet. A
    prepared read claims its turn in the server's cast queue by it (:attr:`FullBeamRead.rays`)."""


class Sim(Protocol):
    """What a read needs of its sim (:class:`~rt_lidar.server.embedded_sim.EmbeddedSim`)."""

    world: World

    def take_interval(self, reader: str, lidar: SimLidar) -> tuple[WorldSource, int, int, int]:
        """The read's source on a frozen world, t0, t1 and frame number (the reader's cursor moved on)."""
        ...

    def plan_firings(self, preset: SensorPreset, t0: int, t1: int, sub_rays: int) -> tuple[Firings, int]:
        """The firings of [t0, t1) within the ray budget and the interval's start after any cut."""
        ...

    def weather_config(self) -> dict[str, Any] | None:
        """The weather the answer reports (None: clear)."""
        ...

    @property
    def max_rays_per_call(self) -> int:
        """The ray budget of one answer."""
        ...

    def skip_ns(self, ns: int) -> None:
        """Count ``ns`` of sweep left out of an answer to keep its ray budget."""
        ...


class PreparedRead:
    """One lidar read of a :class:`Sim`, prepared: built under the call lock (it takes the interval and a
    frozen view of the world at once); :attr:`rays` and ``run()`` need no lock."""

    reader = "hits"

    def __init__(self, sim: Sim, lidar: SimLidar, pattern: SubRayPattern | None = None) -> None:
        self._sim, self._lidar, self._pattern = sim, lidar, pattern
        self._source, self._t0, self.t1, self.frame = sim.take_interval(self.reader, lidar)
        self._firings: Firings | None = None

    def _budget_sub_rays(self) -> int:
        """Rays a firing counts in the server's ray budget."""
        return 1 if self._pattern is None else max(len(self._pattern.weights), 1)

    def _planned(self) -> tuple[Firings, int]:
        if self._firings is None:
            sub_rays = self._budget_sub_rays()
            self._firings, self._t0 = self._sim.plan_firings(self._lidar.preset, self._t0, self.t1, sub_rays)
        return self._firings, self._t0

    @property
    def rays(self) -> int:
        """Rays the cast takes (firings x sub-rays, within the budget)."""
        firings, _ = self._planned()
        sub_rays = 1 if self._pattern is None else max(len(self._pattern.weights), 1)
        return len(firings.t_ns) * sub_rays  # a full beam's bundles at most

    def _hits(self, sun: np.ndarray | None = None) -> tuple[Hits, int]:
        firings, t0 = self._planned()
        if self._pattern is None:
            return self._source.hits(firings, t0, self.t1), t0
        return self._source.beam_hits(firings, t0, self.t1, self._pattern, sun), t0

    def _sensor_pose(self, t_ns: int) -> FluPose:
        pos, quat = self._source.sensor_pose_ns(t_ns)
        return FluPose(tuple(float(v) for v in pos), tuple(float(v) for v in quat))  # type: ignore[arg-type]


class HitsRead(PreparedRead):
    """``rtLidarGetHits`` / ``rtLidarGetBeamHits``, prepared."""

    def __init__(
        self,
        sim: Sim,
        lidar: SimLidar,
        pattern: SubRayPattern | None,
        sun: np.ndarray | None,
        omit: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(sim, lidar, pattern)
        self._sun = sun
        self._omit = omit
        self._weather = sim.weather_config()
        # a wet road (Roadwetness > 0): the extension's rays also carry the road mask, mirror rays and
        # spray (set on this cast's own copy of the source: other casts keep theirs)
        self._source.use_wet_road(float((self._weather or {}).get("road_wetness", 0.0)))

    def run(self) -> LidarHits:
        """Cast; the answer of ``EmbeddedSim.lidar_hits`` / ``lidar_beam_hits``."""
        hits, t0 = self._hits(self._sun)
        return hits_to_wire(hits, self._sensor_pose(self.t1), self.t1, info=self._info(t0), omit=self._omit)

    def _info(self, t0: int) -> dict[str, Any]:
        info: dict[str, Any] = {
            "materials": list(self._sim.world.material_names),
            "t0_ns": t0,
            "t1_ns": self.t1,
            "frame": self.frame,
            "weather": self._weather,
            "preset": self._lidar.preset.name,
        }
        if self._sun is not None:
            info["sun_direction"] = [float(v) for v in self._sun]
        return info


class FullBeamRead(HitsRead):
    """``rtLidarGetBeamHits`` with a ``full`` entry, prepared: every firing's central ray, and the
    bundle (``pattern``) for the pulses :func:`~rt_lidar.pipeline.beam_full.bundle_pulses` picks with
    the request's thresholds and this world's retro-reflectors and volumes (``retro_gain`` and
    ``volume`` per material)."""

    def __init__(
        self,
        sim: Sim,
        lidar: SimLidar,
        pattern: SubRayPattern,
        sun: np.ndarray | None,
        request: FullBeamRequest,
        retro_gain: np.ndarray,
        volume: np.ndarray | None = None,
        omit: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(sim, lidar, pattern, sun, omit)
        self._plan = plan_of_pattern(pattern, retro_gain, request.edge_m, request.spread_m, volume)

    def _budget_sub_rays(self) -> int:
        return 1  # the central rays; the bundles are a share of them

    @property
    def rays(self) -> int:
        """Rays the cast's answer is expected to hold: its firings at the rays a firing took in this
        lidar's last ``--beam full`` answer (:attr:`SimLidar.full_beam_rays_per_firing`), every firing
        as the whole bundle before the first. A claim of every firing as the bundle (13 rays a firing
        for the sparse bundle, where 1.1-1.3 are cast) made each frame heavier than the cast queue's
        budget, so the frames a client asked ahead were cast one at a time (on one thread each, as the
        demo's server casts): one core idle while the other cast."""
        firings, _ = self._planned()
        per_firing = self._lidar.full_beam_rays_per_firing
        if per_firing <= 0.0:
            return super().rays
        return max(int(np.ceil(len(firings.t_ns) * per_firing)), len(firings.t_ns))

    def run(self) -> LidarHits:
        """Cast; the answer of ``EmbeddedSim.lidar_full_beam_hits`` (:func:`full_beam_to_wire`). Within
        the ray budget: where the central rays and the chosen bundles exceed it (a backlog), the
        oldest firings are left out (counted as skipped) and the rest cast again."""
        firings, t0 = self._planned()
        budget = self._sim.max_rays_per_call
        for _ in range(4):
            hits = full_beam_hits(self._source, firings, t0, self.t1, self._plan, self._sun)
            rays = np.ones(hits.pulses, np.int64)
            if hits.bundle is not None:
                rays[hits.bundle.pulses] += hits.bundle.hits.subrays
            newest = np.cumsum(rays[::-1])  # rays of the newest k + 1 firings
            keep = max(int(np.searchsorted(newest, budget, side="right")), 1)
            if keep >= hits.pulses:
                break
            cut = int(firings.t_ns[hits.pulses - keep])
            self._sim.skip_ns(cut - t0)
            t0 = cut
            firings = firings_between(self._lidar.preset, t0, self.t1)
        self._lidar.full_beam_rays_per_firing = float(rays.sum()) / max(hits.pulses, 1)
        pose = self._sensor_pose(self.t1)
        counts = hits.bundle_counts
        assert counts is not None  # full_beam_hits counts every batch it casts
        return full_beam_to_wire(hits, pose, self.t1, self._info(t0), counts.by_reason, self._omit)


class DataRead(PreparedRead):
    """``getLidarData``, prepared."""

    reader = "data"

    def run(self) -> LidarFrame:
        """Cast; the answer of :meth:`~rt_lidar.server.embedded_sim.EmbeddedSim.lidar_data`."""
        hits, _t0 = self._hits()
        opaque = np.isfinite(hits.range_m)
        glass_only = ~opaque & np.isfinite(hits.glass_range_m)
        rng = np.where(opaque, hits.range_m, hits.glass_range_m)
        keep = opaque | glass_only
        seg = np.where(opaque, hits.segment, hits.glass_segment)[keep].astype(np.int32)
        points = hits.direction[keep] * rng[keep][:, None]
        if hits.firings.origin is not None:  # beams off the axis: the hit is where the echo came from
            points = hits.firings.origin[keep] + points
        return LidarFrame(points.astype(np.float32), seg, self._sensor_pose(self.t1), self.t1)
