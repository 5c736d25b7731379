"""Hit sources: where the laser hits of a batch of firings come from.

A :class:`HitSource` answers, for the firings of one sim frame, each ray's range (or miss), incidence
angle, material, segmentation id and any glass it passed on the way. :class:`WorldSource` casts the
rays into the embedded world in-process, each from the sensor pose at the ray's own firing time and
against the moving objects posed at that time, so ego and object motion distort the sweep exactly as
on a rotating sensor.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from rt_lidar.backend.source_ops import NumpySourceOps, dot_f32, select_source_ops, sun_cosines
from rt_lidar.pipeline.pose_samples import (
    PoseSamples,
    interpolate_pose_samples,
    sensor_pose_samples,
)
from rt_lidar.sensor.beam import SubRayPattern
from rt_lidar.sensor.glazing import glass_angle_table, table_lookup_ratio
from rt_lidar.sensor.scan_pattern import Firings
from rt_lidar.unreal_bridge.beam_call import SCENE_SUN, SunArg
from rt_lidar.unreal_bridge.world import Pose as MountPose
from rt_lidar.unreal_bridge.world import RayHits, Trajectory, World
from rt_lidar.unreal_bridge.world.spray import spray_segments

if TYPE_CHECKING:
    from rt_lidar.pipeline.beam_full import BundleCounts, FullBeamPlan

__all__ = [
    "GLASS_MAX_CROSSINGS",
    "ROAD_MATERIALS",
    "ROAD_NORMAL_MIN_Z",
    "BeamBundle",
    "BeamGrant",
    "Capabilities",
    "HitSource",
    "Hits",
    "Pose",
    "PoseSamples",
    "ThreadedCaster",
    "WorldSource",
    "WorldTruthSource",
    "interpolate_pose_samples",
    "pose_at",
    "sensor_pose_samples",
    "sun_unit",
]

GLASS_MAX_CROSSINGS = 4
"""Transmissive surfaces a ray may pass before the cast gives up (a car has two windscreens)."""

ROAD_MATERIALS = ("asphalt", "lane_paint")
"""World materials that carry a water film when the road is wet (see :mod:`rt_lidar.physics.wet_road`)."""
ROAD_NORMAL_MIN_Z = 0.9
"""A road surface faces up: its world normal's z at least this (kerb sides and walls stay dry)."""

_EPS_M = 1e-3
_POSE_MEMO_SIZE = 4

Pose = tuple[np.ndarray, np.ndarray]
"""A sensor pose: world position (3,) and orientation quaternion (w, x, y, z)."""


@dataclass
class Hits:
    """What each fired ray found, in firing order. All arrays have one row per ray: one per firing, or
    ``subrays`` consecutive rows per firing (pulse-major) when the pulse was cast as a sub-ray bundle."""

    firings: Firings
    direction: np.ndarray  # (N,3) float32, sensor frame at the firing time
    range_m: np.ndarray  # (N,) float32, np.inf = nothing within range
    cos_incidence: np.ndarray  # (N,) float32, 0 for misses
    material: np.ndarray  # (N,) int16, index into the source's material_names, -1 = miss
    segment: np.ndarray  # (N,) uint32
    glass_range_m: np.ndarray  # (N,) float32 range of the first transmissive surface, inf = none
    glass_cos: np.ndarray  # (N,) float32 incidence cosine there
    glass_material: np.ndarray  # (N,) int16 material of that surface, -1 = none
    glass_segment: np.ndarray  # (N,) uint32
    glass_transmission: np.ndarray  # (N,) float32 two-way transmission of every surface passed (1 = none)
    interval: tuple[int, int] | None = None
    """The sim-time slice [t0, t1) these firings cover, when the source chose it (a free-running sim)."""
    subrays: int = 1
    """Rays per firing (the sub-ray dimension; 1 = one ray along each firing's direction)."""
    subray_weight: np.ndarray | None = None
    """(subrays,) float32 share of the pulse energy x receiver sensitivity of each sub-ray (sum 1)."""
    sun_cos: np.ndarray | None = None
    """(rays,) float32 cosine between the (ray-facing) surface normal and the sun, 0 for misses / night;
    None when the source does not know it."""
    beam_sun_cos: np.ndarray | None = None
    """(rays,) float32 cosine between each ray's world direction and the direction to the sun."""
    pose_start: Pose | None = None
    """The sensor pose at the start of the hits' time slice (:attr:`interval`, else the frame asked for)."""
    pose_end: Pose | None = None
    """The sensor pose at the end of that slice (what an AirSim server reports with its answer)."""
    pose_samples: PoseSamples | None = None
    """The sensor poses on the 1 ms grid the rays were cast from (:func:`interpolate_pose_samples`
    gives each firing's): a rig's interference model needs each pulse's world pose; None = unknown."""
    firing_poses: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    """(``firings.t_ns`` they were found for, positions (N, 3), wxyz rotations (N, 4)) float64: each
    firing's sensor pose as the cast interpolated it (:func:`interpolate_pose_samples` of
    :attr:`pose_samples`), kept so that a rig's interference model does not interpolate them again;
    None = not kept (valid only while ``firings.t_ns`` is that same array)."""
    wet: np.ndarray | None = None
    """(rays,) bool: the ray's surface is the road under its water film (cast with a wet road only;
    None = dry road, or a source that does not know)."""
    mirror_range_m: np.ndarray | None = None
    """(rays,) float32 whole path of the mirror ray off the wet road (road + mirror leg), inf = none."""
    mirror_cos: np.ndarray | None = None
    """(rays,) float32 incidence cosine of the mirror ray at the object it met."""
    mirror_material: np.ndarray | None = None
    """(rays,) int16 material of that object, -1 = none."""
    mirror_segment: np.ndarray | None = None
    """(rays,) uint32 segment of that object."""
    glass_mirror_range_m: np.ndarray | None = None
    """(rays,) float32 whole path of the mirror ray off the ray's first pane (pane + mirror leg), inf =
    none (:mod:`rt_lidar.physics.glass_ghost`); None = no ray met glass, or a source that traces none."""
    glass_mirror_cos: np.ndarray | None = None
    """(rays,) float32 incidence cosine of that mirror ray at the surface it met."""
    glass_mirror_material: np.ndarray | None = None
    """(rays,) int16 material of that surface, -1 = none."""
    glass_mirror_segment: np.ndarray | None = None
    """(rays,) uint32 segment of that surface."""
    glass_mirror_transmission: np.ndarray | None = None
    """(rays,) float32 two-way transmission of the mirror path outside the pane's reflection (a fault on
    the sensor's own window: :mod:`rt_lidar.faults.optical`); None = 1."""
    window_transmission: np.ndarray | None = None
    """(rays,) float32 two-way transmission of the sensor's own window (a blockage, dirt, a weak channel:
    :mod:`rt_lidar.faults.optical`), which dims the first pane's own echo as ``glass_transmission`` dims
    every surface behind it, and every echo that does not come from a surface the ray met: the rain,
    fog and snow clutter, tyre spray, the wet road's mirror ghosts; None = 1."""
    window_one_way: np.ndarray | None = None
    """(rays,) float32 one-way transmission of the sensor's own window alone (a blockage 0, dirt ``T``:
    :mod:`rt_lidar.faults.optical`; not the channel or gain faults), which dims the light from outside
    that enters the receiver once: the sunlight background (:mod:`rt_lidar.physics.ambient`) and another
    sensor's pulse (:mod:`rt_lidar.rig.crosstalk`); None = 1."""
    spray_in_m: np.ndarray | None = None
    """(rays,) float32 where the ray enters the nearest tyre-spray plume (inf = none; wet road only)."""
    spray_out_m: np.ndarray | None = None
    """(rays,) float32 where it leaves it (at most the surface it hit)."""
    spray_density: np.ndarray | None = None
    """(rays,) float32 relative droplet density of that plume (:mod:`rt_lidar.unreal_bridge.world.spray`)."""
    source_intensity: np.ndarray | None = None
    """(rays,) float32 the intensity the simulator itself computed (Cosys-AirSim's GPU lidar), kept for
    comparison; the physics computes its own. None = the source gives none."""
    normal: np.ndarray | None = None
    """(rays, 3) float32 world-frame normal of the surface each ray ended on, facing the ray (not
    normalised; zero where the ray met no surface, the glass's where it went through glass into nothing);
    only from a source asked for it (``WorldSource.keep_normals``)."""
    bundle: BeamBundle | None = None
    """``--beam full`` (:mod:`rt_lidar.pipeline.beam_full`): these hits are every pulse's central ray,
    and the pulses named here were cast again as the whole sub-ray bundle; None = no such pulses."""
    bundle_counts: BundleCounts | None = None
    """``--beam full``: how many of these pulses the bundle was chosen for, and why (set where the choice
    is made, counted when the frame loop hands the frame on: :attr:`Pipeline.bundle_stats
    <rt_lidar.pipeline.frame_loop.Pipeline.bundle_stats>`); None = not ``--beam full``."""
    weather: dict[str, float] | None = None
    """The sim's weather when these rays were cast (a source with :attr:`Capabilities.weather`: the
    server's ``simSetWeatherParameter``), as :class:`~rt_lidar.physics.weather.WeatherConfig` fields;
    None = clear air or not known."""

    @classmethod
    def without_glass(
        cls,
        firings: Firings,
        direction: np.ndarray,
        range_m: np.ndarray,
        cos_incidence: np.ndarray,
        material: np.ndarray,
        segment: np.ndarray,
    ) -> Hits:
        """Hits of a source that sees no glass (every ray's first surface is its target): the glass
        fields filled as "none on the way" (the stock AirSim, Cosys-AirSim and CARLA readers)."""
        n = range_m.shape[0]
        return cls(
            firings=firings,
            direction=direction,
            range_m=range_m,
            cos_incidence=cos_incidence,
            material=material,
            segment=segment,
            glass_range_m=np.full(n, np.inf, np.float32),
            glass_cos=np.zeros(n, np.float32),
            glass_material=np.full(n, -1, np.int16),
            glass_segment=np.zeros(n, np.uint32),
            glass_transmission=np.ones(n, np.float32),
        )

    def __len__(self) -> int:
        return int(self.range_m.shape[0])

    @property
    def pulses(self) -> int:
        """Number of firings (pulses) the rays belong to."""
        return len(self.firings)


@dataclass
class BeamBundle:
    """The pulses of a ``--beam full`` batch that were cast as the whole sub-ray bundle."""

    pulses: np.ndarray
    """(B,) int64 indices of those pulses among the batch's firings, ascending."""
    hits: Hits
    """Their hits as the bundle (``subrays`` rays a pulse, firings = those pulses)."""


@dataclass(frozen=True)
class Capabilities:
    """What a hit source can give, stated once by the source (the pipeline builder negotiates with it)."""

    sub_rays: bool = False
    """Casts each pulse as a bundle of sub-rays over the beam divergence (else one ray a pulse)."""
    sun: bool = False
    """Reports every ray's sun cosines (sunlight can be applied)."""
    weather: bool = False
    """Reports the sim's weather with its hits (:attr:`Hits.weather`), which the physics then follows."""
    extension: bool = False
    """Rays come with their ring, firing time, normal and material (not recovered from stock points)."""
    full_beam: bool = False
    """Casts ``--beam full``: the bundle only for the pulses that need it (``use_full_beam``)."""
    frames_in_any_order: bool = False
    """Its hits depend on each ray's time alone, so several frames may be cast at the same time on
    threads of the frame loop, in any order (an in-process world; a server answers in order). Such a
    source has a ``cast_threads`` the loop then sets to 1 (:class:`ThreadedCaster`)."""
    world_truth: bool = False
    """Holds the world it casts into (:class:`WorldTruthSource`): its objects for ground truth, its mount,
    and every hit's surface normal on request (``keep_normals``); a server's world is not known here."""


class WorldTruthSource(Protocol):
    """A source whose :attr:`Capabilities.world_truth` is set (an in-process world)."""

    world: World
    mount: MountPose | None
    keep_normals: bool


class ThreadedCaster(Protocol):
    """A source whose :attr:`Capabilities.frames_in_any_order` is set: the threads one cast is split over."""

    cast_threads: int | None


@dataclass(frozen=True)
class BeamGrant:
    """What :meth:`HitSource.use_beam` granted: rays a pulse, and whether the sun cosines come."""

    sub_rays: int = 1
    sun: bool = False
    full: bool = False
    """``--beam full`` granted (:meth:`~rt_lidar.pipeline.beam_full.FullBeamSource.use_full_beam`): the
    bundle only where the footprint needs it; else, when asked, every pulse's bundle."""


class HitSource(Protocol):
    """Anything that can say what a batch of firings hit."""

    @property
    def material_names(self) -> list[str]:
        """Names of the materials that ``Hits.material`` indexes."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What the source can give (sub-ray bundles, sun cosines, the sim's weather, ...)."""
        ...

    def use_beam(self, pattern: SubRayPattern, sun: SunArg = None) -> BeamGrant:
        """Cast every firing as ``pattern``'s bundle from the next frame on, with the sun cosines when
        ``sun`` names the sun (a world-frame unit vector towards it, or ``SCENE_SUN``); returns what
        was granted (a source without the capability grants one ray a pulse, or no sun)."""
        ...

    def hits(self, firings: Firings, t0_ns: int, t1_ns: int) -> Hits:
        """What the firings of the sim frame ``[t0_ns, t1_ns)`` hit (``firings`` is the local schedule of
        that frame; a remote source may answer with its own firings, which the caller checks), with
        the sensor poses at the slice's ends."""
        ...


def sun_unit(direction: Sequence[float] | np.ndarray) -> np.ndarray:
    """(3,) float64 unit vector of a (non-zero) direction towards the sun: the one normalisation every
    caster's sun goes through (in-process, and the embedded server's scene sun), so that they agree
    bit for bit."""
    d = np.asarray(direction, np.float64)
    return d / np.linalg.norm(d)


def pose_at(start: Pose, end: Pose, t0_ns: int, t1_ns: int, t_ns: int) -> Pose:
    """The sensor pose at ``t_ns`` between the poses ``start`` at ``t0_ns`` and ``end`` at ``t1_ns`` (the
    two a :class:`Hits` carries): position linear, rotation by normalised lerp. Both sources give the
    same two poses, so a scan's pose is the same in-process and over the bridge."""
    (p0, q0), (p1, q1) = start, end
    w = 0.0 if t1_ns <= t0_ns else min(1.0, max(0.0, (t_ns - t0_ns) / (t1_ns - t0_ns)))
    if w == 0.0:
        return np.array(p0, np.float64), np.array(q0, np.float64)
    if w == 1.0:
        return np.array(p1, np.float64), np.array(q1, np.float64)
    q1 = -q1 if float(np.dot(q0, q1)) < 0 else q1
    q = q0 + (q1 - q0) * w
    return p0 + (p1 - p0) * w, q / np.linalg.norm(q)


def _rows_f32(a: np.ndarray) -> np.ndarray:
    """``a`` (N, k) as float32; one row broadcast to N (a sensor not turning) stays a broadcast."""
    if a.ndim == 2 and a.shape[0] > 1 and a.strides[0] == 0:
        return np.broadcast_to(a[:1].astype(np.float32), a.shape)
    return a.astype(np.float32)


_dot_f32 = dot_f32  # the names the tests and tools/bench import


def _rotate_f32(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """:meth:`~rt_lidar.backend.source_ops.NumpySourceOps.rotate_f32` of the operations the process would
    choose now (the compiled twin where it is built and on)."""
    return select_source_ops().rotate_f32(q, v)


def rows_kept(before: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Which of the ray rows ``before`` (ascending) are in ``kept``, an ascending subset of them (the
    rays still behind glass after a round): ``np.isin(before, kept)``, by a binary search of each kept
    row instead of isin's sort of both."""
    more = np.zeros(before.shape[0], bool)
    more[np.searchsorted(before, kept)] = True
    return more


def _no_hits() -> RayHits:
    """The hits of no rays."""
    return RayHits(
        np.zeros(0, np.float32),
        np.zeros((0, 3), np.float32),
        np.zeros(0, np.uint32),
        np.zeros(0, np.int16),
        np.zeros(0, np.int32),
    )


def _beam_starts(
    ops: NumpySourceOps, firings: Firings, pos: np.ndarray, quat: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Where each firing's rays start in the world: the sensor's position, moved to the firing's beam
    origin where the preset has them (:attr:`Firings.origin`); ``pos`` itself otherwise."""
    if firings.origin is None:
        return pos, quat
    return pos + ops.rotate_f32(_rows_f32(quat), firings.origin), quat


class WorldSource:
    """Casts firings into an embedded :class:`~rt_lidar.unreal_bridge.world.World` in-process.

    ``transmission`` gives the one-way transmission of each world material (0 = opaque); rays that hit a
    transmissive surface are continued behind it, and the surface is remembered for its own echo.
    ``exit_m_per_rad`` (:func:`~rt_lidar.sensor.beam.exit_m_per_rad` of the preset) starts the sub-rays
    of a bundle across the exit aperture; (0, 0) casts them all from the sensor origin. ``mount`` places
    the sensor on the ego instead of the scene's ``sensor_mount`` (a rig's sensors share one world).
    """

    def __init__(
        self,
        world: World,
        max_range_m: float,
        transmission: np.ndarray,
        exit_m_per_rad: tuple[float, float] = (0.0, 0.0),
        mount: MountPose | None = None,
    ) -> None:
        if transmission.shape != (len(world.material_names),):
            raise ValueError("transmission must have one entry per world material")
        self.world = world
        self.mount = mount
        self.ops = select_source_ops()
        """The caster's array operations (NumPy, or its compiled twins: :mod:`rt_lidar.backend`)."""
        self.max_range_m = float(max_range_m)
        self._transmission = transmission.astype(np.float32)
        self._glass_angle = glass_angle_table(self._transmission)
        """Each material's transmission at incidence over that at normal incidence (Fresnel, issue 40:
        :mod:`rt_lidar.sensor.glazing`), looked up at every glass crossing."""
        self.exit_m_per_rad = (float(exit_m_per_rad[0]), float(exit_m_per_rad[1]))
        self._beam: SubRayPattern | None = None
        self._sun: np.ndarray | None = None
        self._full: FullBeamPlan | None = None
        self.retro_gain: np.ndarray | None = None
        """Each world material's retro lobe gain (``MaterialArrays.retro_gain``: ``--beam full`` bundles
        the pulses near a retro-reflector); None = the default material table's."""
        self.volume: np.ndarray | None = None
        """Each world material's ``volume`` flag (``MaterialArrays.volume``: ``--beam full`` bundles the
        pulses that end in a tree crown's leaves); None = the default material table's."""
        self.wet_road = False
        """Cast the wet road: mark road hits, cast their mirror rays and the tyre-spray segments
        (:meth:`use_wet_road`); off, the cast is exactly the dry one."""
        names = list(world.material_names)
        self._road_mat = np.array([names.index(m) for m in ROAD_MATERIALS if m in names], np.int16)
        self.cast_threads: int | None = None
        """Threads each batch's cast is split over (None: the world's choice, two for a large batch); the
        pipeline sets 1 when it casts several frames at once, one per thread (the hits are the same)."""
        self.pose_memo = False
        """Remember the last few poses of :meth:`sensor_pose_ns` (a server sets it while its ego follows
        its script, when a pose is a function of time alone: a frame's end pose is the next frame's
        start pose and its answer's pose); off, every pose is computed afresh."""
        self._pose_memo: dict[int, Pose] = {}
        self.keep_normals = False
        """Keep each ray's surface normal (world frame, facing the ray) in :attr:`Hits.normal` (an OSI
        sensor view's reflections carry it); off, the hits are the same without it."""

    def use_wet_road(self, wetness: float) -> bool:
        """Cast the wet road's extra fields from now on when ``wetness`` > 0 (else the dry cast);
        returns whether they are cast."""
        self.wet_road = wetness > 0
        return self.wet_road

    def on_world(self, world: World) -> WorldSource:
        """This source casting into ``world`` (a :meth:`World.with_ego` view of its own)."""
        twin = copy.copy(self)
        twin.world = world
        return twin

    capabilities = Capabilities(
        sub_rays=True,
        sun=True,
        weather=False,
        extension=True,
        full_beam=True,
        frames_in_any_order=True,
        world_truth=True,
    )
    """In-process: every bundle and the sun; the weather is the scenario's (no sim reports one)."""

    def use_beam(self, pattern: SubRayPattern, sun: SunArg = None) -> BeamGrant:
        """Cast every firing as ``pattern`` from now on, with the sun cosines for ``sun`` (``SCENE_SUN``:
        the scene's sun)."""
        if isinstance(sun, str):
            if sun != SCENE_SUN:
                raise ValueError(f"sun must be a direction or {SCENE_SUN!r}, got {sun!r}")
            sun = sun_unit(self.sun_direction)
        self._sun = None if sun is None else np.asarray(sun, np.float64)
        self._beam = pattern if len(pattern) > 1 or self._sun is not None else None
        self._full = None
        return BeamGrant(len(pattern), self._sun is not None)

    def use_full_beam(self, plan: FullBeamPlan, sun: SunArg = None) -> BeamGrant:
        """Cast ``--beam full`` from now on: every central ray, and ``plan``'s bundle where
        :func:`~rt_lidar.pipeline.beam_full.full_beam_hits` finds a step in the footprint (with the sun
        cosines for ``sun``)."""
        grant = self.use_beam(plan.pattern, sun)
        self._full = plan
        return dataclasses.replace(grant, full=True)

    @property
    def full_beam(self) -> FullBeamPlan | None:
        """The ``--beam full`` plan in use (its ``stats`` count the bundled pulses), or None."""
        return self._full

    @property
    def material_names(self) -> list[str]:
        """The world's material names."""
        return list(self.world.material_names)

    @property
    def sun_direction(self) -> np.ndarray:
        """The scene's direction towards the sun (world frame)."""
        return np.asarray(self.world.scene.sun_direction, np.float64)

    def sensor_pose(self, t_s: float) -> tuple[np.ndarray, np.ndarray]:
        """World pose of the sensor at ``t_s``."""
        pos, quat = self.world.sensor_poses(np.array([t_s]), self.mount)
        return pos[0], quat[0]

    def sensor_pose_ns(self, t_ns: int) -> Pose:
        """World pose of the sensor at ``t_ns`` ns: :meth:`sensor_pose` of ``t_ns * 1e-9``, remembered while
        :attr:`pose_memo` is on (the same values, computed once)."""
        if not self.pose_memo:
            return self.sensor_pose(t_ns * 1e-9)
        got = self._pose_memo.get(t_ns)
        if got is None:
            got = self.sensor_pose(t_ns * 1e-9)
            if len(self._pose_memo) >= _POSE_MEMO_SIZE:  # drop the oldest (a server's casts share the
                with contextlib.suppress(StopIteration, RuntimeError):  # memo across threads)
                    self._pose_memo.pop(next(iter(self._pose_memo)), None)
            self._pose_memo[t_ns] = got
        return got[0].copy(), got[1].copy()

    def hits(self, firings: Firings, t0_ns: int, t1_ns: int) -> Hits:
        """Cast every firing from the sensor pose at its own firing time, against the moving objects
        posed at that time (as the bundle :meth:`use_beam` asked for, if any: its sub-rays start across
        the exit aperture; with :meth:`use_full_beam`, only where the footprint needs it)."""
        if self._full is not None:
            from rt_lidar.pipeline.beam_full import full_beam_hits

            return full_beam_hits(self, firings, t0_ns, t1_ns, self._full, self._sun)
        if self._beam is not None:
            return self.beam_hits(firings, t0_ns, t1_ns, self._beam, self._sun)
        d_sensor = firings.directions()
        samples = sensor_pose_samples(self.world, firings.t_ns, self.mount)
        poses = interpolate_pose_samples(firings.t_ns, samples)
        pos, quat = _beam_starts(self.ops, firings, *poses)
        hits = self._cast(firings, d_sensor, pos, quat, None)
        return self._with_poses(hits, t0_ns, t1_ns, samples, poses)

    def _with_poses(
        self,
        hits: Hits,
        t0_ns: int,
        t1_ns: int,
        samples: PoseSamples | None,
        poses: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> Hits:
        """``hits`` with the sensor's poses: its 1 ms samples, the slice's start and end, and (``poses``,
        :func:`interpolate_pose_samples` of ``hits.firings.t_ns``) each firing's, kept as the cast found
        them (:attr:`Hits.firing_poses`)."""
        hits.pose_samples = samples
        if poses is not None:
            hits.firing_poses = (hits.firings.t_ns, *poses)
        hits.pose_start = self.sensor_pose_ns(t0_ns)
        hits.pose_end = self.sensor_pose_ns(t1_ns)
        return hits

    def beam_hits(
        self,
        firings: Firings,
        t0_ns: int,
        t1_ns: int,
        pattern: SubRayPattern,
        sun_direction: np.ndarray | None = None,
    ) -> Hits:
        """Every firing as ``len(pattern)`` sub-rays (one batch of N * firings rays), all from the pose at
        the firing time (started across the exit aperture, ``exit_m_per_rad``) against the moving objects
        posed at that time; a one-ray pattern without sun gives exactly :meth:`hits` without a beam."""
        n = len(pattern)
        samples = sensor_pose_samples(self.world, firings.t_ns, self.mount)
        poses = interpolate_pose_samples(firings.t_ns, samples)
        pos, quat = _beam_starts(self.ops, firings, *poses)
        if n == 1 and sun_direction is None:
            d_sensor = firings.directions()
            hits = self._cast(firings, d_sensor, pos, quat, None)
            return self._with_poses(hits, t0_ns, t1_ns, samples, poses)
        d_sensor, pos, quat = self.ops.subray_starts(
            firings.directions(), pattern, self.exit_m_per_rad, pos, quat
        )
        sun = None if sun_direction is None else np.asarray(sun_direction, np.float64)
        hits = self._cast(firings, d_sensor, pos, quat, sun)
        hits.subrays = n
        hits.subray_weight = pattern.weights
        return self._with_poses(hits, t0_ns, t1_ns, samples, poses)

    def _cast(
        self,
        firings: Firings,
        d_sensor: np.ndarray,
        pos: np.ndarray,
        quat: np.ndarray,
        sun: np.ndarray | None,
        ghosts: bool = True,
    ) -> Hits:
        """Cast rays ``d_sensor`` (sensor frame) from poses ``pos``/``quat``, one row per ray, each
        against the moving objects posed at its firing time (``ghosts`` False: without the mirror rays
        off the first pane, whose fields stay None: ``--beam full``'s probes read none of them)."""
        t_ray = firings.t_ns.astype(np.float64) * 1e-9
        if d_sensor.shape[0] != t_ray.shape[0]:
            t_ray = np.repeat(t_ray, d_sensor.shape[0] // max(t_ray.shape[0], 1))
        origins = pos.astype(np.float32)
        dirs = self.ops.rotate_f32(_rows_f32(quat), d_sensor)

        # First surface of every ray, without indexing: most rays end here.
        rh = self.world.cast(origins, dirs, t_ray, self.max_range_m, threads=self.cast_threads)
        first, active, opaque = self.ops.first_surfaces(
            rh, dirs, self._transmission, need_opaque=sun is not None or self.wet_road
        )
        range_m, cos_inc, material, segment, g_range, g_cos, g_mat, g_seg, g_trans = first
        normal = (
            np.where(np.isfinite(rh.distance)[:, None], rh.normal, 0).astype(np.float32)
            if self.keep_normals
            else None
        )
        sun_cos = wet_fields = None
        if opaque is not None:  # the sunlit side and the wet road need to know the opaque surfaces
            sun_cos = sun_cosines(rh.normal, dirs, opaque, sun) if sun is not None else None
            wet_fields = self._wet_fields(origins, dirs, t_ray, rh, opaque) if self.wet_road else None

        self._slant_loss(g_trans, active, g_mat[active], g_cos[active])  # at the first crossing
        ghost = self._glass_mirror(origins, dirs, t_ray, rh, active) if active.size and ghosts else None
        # Rays that crossed a transmissive surface go on behind it (a few per cent of all rays).
        travelled = rh.distance[active] + np.float32(_EPS_M)
        org = np.take(origins, active, axis=0) + np.take(dirs, active, axis=0) * travelled[:, None]
        for _ in range(GLASS_MAX_CROSSINGS):
            if active.size == 0:
                break
            d_act = np.take(dirs, active, axis=0)
            rh = self.world.cast(
                org,
                d_act,
                t_ray[active],
                self.max_range_m - float(travelled.min()),
                threads=self.cast_threads,
            )
            before = active
            org, travelled, active = self.ops.glass_step(
                rh,
                (travelled, active, d_act, org),
                self._transmission,
                self.max_range_m,
                np.float32(_EPS_M),
                (range_m, cos_inc, material, segment, g_trans),
                normal,
                sun_cos,
                sun,
            )
            more = rows_kept(before, active)  # the rays that crossed glass again
            cos_i = np.abs(_dot_f32(rh.normal[more], d_act[more]))
            self._slant_loss(g_trans, active, rh.material[more], cos_i)

        hits = Hits(
            firings=firings,
            direction=d_sensor,
            range_m=range_m,
            cos_incidence=cos_inc,
            material=material,
            segment=segment,
            glass_range_m=g_range,
            glass_cos=g_cos,
            glass_material=g_mat,
            glass_segment=g_seg,
            glass_transmission=g_trans,
            sun_cos=sun_cos,
            beam_sun_cos=None if sun is None else (dirs.astype(np.float64) @ sun).astype(np.float32),
            normal=normal,
        )
        if ghost is not None:
            (
                hits.glass_mirror_range_m,
                hits.glass_mirror_cos,
                hits.glass_mirror_material,
                hits.glass_mirror_segment,
            ) = ghost
        if wet_fields is not None:
            hits.wet, hits.mirror_range_m, hits.mirror_cos, hits.mirror_material, hits.mirror_segment = (
                wet_fields
            )
            hits.spray_in_m, hits.spray_out_m, hits.spray_density = spray_segments(
                self._moving_objects(), origins, dirs, t_ray, range_m
            )
        return hits

    def _slant_loss(
        self, g_trans: np.ndarray, rows: np.ndarray, material: np.ndarray, cos_i: np.ndarray
    ) -> None:
        """Multiply the two-way glass transmission of ``rows`` by the Fresnel loss (squared) of the pane
        each crossed now (its material, the crossing's incidence cosine): glass passes less at a slant."""
        if rows.size:
            f = table_lookup_ratio(self._glass_angle, material, cos_i)
            g_trans[rows] *= f * f

    def _glass_mirror(
        self, origins: np.ndarray, dirs: np.ndarray, t_ray: np.ndarray, rh: RayHits, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(whole path, incidence cosine, material, segment) of the mirror rays off the first pane of
        rays ``rows`` (the first-surface hits ``rh`` there are glass), each at its own firing time, up to
        the rest of the sensor's range (:mod:`rt_lidar.physics.glass_ghost`); every other ray none. The
        rays made and their hits scattered by the source's operations (the compiled twins where built)."""
        org, mdir, dist = self.ops.glass_mirror_rays(
            origins, dirs, rows, rh.distance, rh.normal, np.float32(_EPS_M)
        )
        return self._mirror_cast(origins.shape[0], t_ray, rows, dist, org, mdir)

    def _mirror_cast(
        self,
        n: int,
        t_ray: np.ndarray,
        rows: np.ndarray,
        dist: np.ndarray,
        org: np.ndarray,
        mdir: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(whole path, incidence cosine, material, segment), for every one of ``n`` rays, of the mirror
        rays of rays ``rows`` that start at ``org`` (``dist`` along their rays) along ``mdir``, each cast
        at its own firing time up to the rest of the sensor's range; every other ray none (inf, 0, -1,
        0)."""
        if not rows.size:
            return self.ops.mirror_hits(n, rows, dist, _no_hits(), mdir, self.max_range_m)
        mh = self.world.cast(
            org, mdir, t_ray[rows], self.max_range_m - float(dist.min()), threads=self.cast_threads
        )
        return self.ops.mirror_hits(n, rows, dist, mh, mdir, self.max_range_m)

    def _moving_objects(self) -> list[tuple[str, Trajectory]]:
        return [(o.name, o.trajectory) for o in self.world.scene.objects if not o.is_static]

    def _wet_fields(
        self, origins: np.ndarray, dirs: np.ndarray, t_ray: np.ndarray, rh: RayHits, opaque: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(wet, mirror range, mirror cos, mirror material, mirror segment) of the first-surface hits
        ``rh``: road hits facing up are wet, and each casts its mirror ray off the film (at its own
        firing time, up to the rest of the sensor's range)."""
        dist, normal = rh.distance, rh.normal
        wet = opaque & np.isin(rh.material, self._road_mat) & (normal[:, 2] >= ROAD_NORMAL_MIN_Z)
        wi = np.nonzero(wet)[0]
        d, nrm, dw = dirs[wi], normal[wi], dist[wi]
        org, mdir = self.ops.mirror_rays(origins, wi, dw, d, nrm, dot_f32(d, nrm), nrm, np.float32(_EPS_M))
        m_range, m_cos, m_mat, m_seg = self._mirror_cast(origins.shape[0], t_ray, wi, dw, org, mdir)
        return wet, m_range, m_cos, m_mat, m_seg
