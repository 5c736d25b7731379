"""The frame loop: firings of the sim frame -> hits -> physics -> sweep -> scans.

One :meth:`Pipeline.step` is one sim frame of length 1/f_sim. Frame ``k`` covers the integer
nanosecond slice ``[t(k), t(k+1))`` with ``t(k) = round(k * 1e9 / f_sim)``, so consecutive frames tile
the time line exactly at any f_sim and no firing is skipped or repeated. How the frames are spread
over threads is decided in :mod:`rt_lidar.backend.schedule` from the source's capabilities; the
physics' array work runs on the physics' backend (:mod:`rt_lidar.backend`).
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from rt_lidar.allocator import prefault_heap
from rt_lidar.backend.schedule import (
    CAST_AHEAD,
    PHYSICS_THREADS,
    frame_workers,
    physics_on_own_threads,
    split_casts,
)
from rt_lidar.errors import ConfigError
from rt_lidar.physics.model import PhysicsResult, SensorPhysics
from rt_lidar.physics.source_fields import extra_fill
from rt_lidar.pipeline.assembler import Scan, ScanAssembler
from rt_lidar.pipeline.beam_full import BundleStats
from rt_lidar.pipeline.sources import Hits, HitSource, Pose, pose_at
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import (
    Firings,
    firings_between,
    firings_per_scan,
    prepare_schedule,
    scan_period_ns,
)

__all__ = ["CAST_AHEAD", "FrameStats", "Pipeline", "Sensed", "frame_time_ns", "frame_workers"]

PREFAULT_CAST_BYTES_PER_RAY = 256
"""Memory :meth:`Pipeline.start` touches for a thread that fetches frames, per ray of a frame: the
threads that cast in-process HDL-64E and VLS-128 frames took ~210-230 bytes a ray of fresh pages over
their first frames (``/proc/self/task/*/stat``)."""
PREFAULT_LOOP_BYTES_PER_RAY = 320
"""The same for the loop's own thread: the physics and the sweep (~30-60 bytes a ray), and the scans it
hands to the sinks, up to five of them queued or being written. With 64 bytes a ray that thread still
faulted 2,300-2,800 pages over a demo's run (HDL-64E 60 scans, VLS-128 20), with 320 about 55."""


def frame_time_ns(frame: int, sim_hz: float) -> int:
    """Start of sim frame ``frame`` in integer nanoseconds."""
    return round(frame * 1e9 / sim_hz)


@dataclass
class Sensed:
    """One sim frame after the physics and before stitching (:meth:`Pipeline.sense`)."""

    frame: int
    t0_ns: int
    t1_ns: int
    hits: Hits
    result: PhysicsResult
    hits_wall_ns: int
    wall_s: float


Fetched = tuple[Firings, Hits, tuple[int, PhysicsResult | Future[PhysicsResult]] | None]
"""A frame's firings and hits, and (when done where it was fetched) the wall time its hits came and
its physics result."""


@dataclass
class FrameStats:
    """Figures of one sim frame."""

    frame: int
    t0_ns: int
    t1_ns: int
    fired: int
    kept: int
    wall_s: float


class Pipeline:
    """Runs one sensor over a hit source, frame by frame, and hands out complete scans."""

    def __init__(
        self,
        preset: SensorPreset,
        source: HitSource,
        physics: SensorPhysics,
        sim_hz: float = 20.0,
        seed: int = 0,
        start_ns: int = 0,
        prefetch: bool | int = False,
    ) -> None:
        if not 0.1 <= sim_hz <= 10_000:
            raise ConfigError(f"sim_hz must be in [0.1, 10000] Hz, got {sim_hz}")
        self.preset = preset
        self.source = source
        self.physics = physics
        self.sim_hz = float(sim_hz)
        self.seed = int(seed)
        self.start_ns = int(start_ns)
        """Sim time of frame 0 (a remote sim's clock need not start at 0)."""
        self.frame = 0
        self.assembler = ScanAssembler(preset)
        prepare_schedule(preset)  # the scan's firing table now, not in frame 0
        self.last_stats: FrameStats | None = None
        self.bundle_stats = BundleStats()
        """``--beam full``'s counts (:attr:`Hits.bundle_counts <rt_lidar.pipeline.sources.Hits.
        bundle_counts>`) of the frames :meth:`commit` took, the ones the scans are made of: a frame cast
        ahead counts when its turn comes, one dropped never (summary.json's ``beam`` section)."""
        self.on_sector: Callable[[np.ndarray, int, int], None] | None = None
        self.on_hits: Callable[[Hits], Hits] | None = None
        """Called with each frame's hits before the physics (an injected fault's, :mod:`rt_lidar.faults`);
        runs on the thread that fetched the frame, so it must depend on the hits alone."""
        """Called with each sim frame's points (``t`` absolute ns) and its interval, before stitching."""
        self.on_sensed: Callable[[Sensed], None] | None = None
        """Called with each sim frame's hits and physics result (:class:`Sensed`), before stitching."""
        depth = int(prefetch)
        if depth < 0:
            raise ValueError(f"prefetch must be a bool or a number of frames >= 0, got {prefetch}")
        self.prefetch = depth
        """Frames the source is asked for ahead, in a background thread, while frame k goes through the
        physics (0 = none): the ray cast (or a server's answer) overlaps the rest of the loop, and with
        more than one a scripted world's light frames bank time for its dense ones. Results are
        identical. Keep 1 for a source whose future depends on what happens meanwhile (a server whose
        ego car answers a driver's controls). An in-process world source with two or more frames ahead
        casts them at the same time, each on one thread (:func:`frame_workers`): no frame waits for
        the slower half of a split cast, and the cores stay busy while the physics runs."""
        self._pool: ThreadPoolExecutor | None = None
        self._workers = 0
        self._started = False
        self._pending: deque[tuple[int, Future[Fetched]]] = deque()
        self.physics_ahead = True
        """With frames fetched ahead, each one's physics runs there too, on the thread that fetched it
        (with that frame's own random stream and weather, so the points are the same), and the frame
        loop's thread only stitches and writes: the cores share the physics of the frames in flight.
        False keeps the physics in the frame loop's thread."""
        self._weathered: dict[tuple[tuple[str, float], ...], SensorPhysics] = {}
        self._physics_pool: ThreadPoolExecutor | None = None
        self._follow_weather = physics.config.weather is None and source.capabilities.weather
        """No weather configured and the source reports the sim's: each frame's physics takes the
        weather its hits were cast in."""
        self._weather: dict[str, float] | None = None
        self._poses: deque[tuple[int, int, Pose, Pose]] = deque()
        """(t0, t1, pose at t0, pose at t1) of the frames a scan still to come may have started in."""
        self.fetch_until: int | None = None
        """The last sim frame the run will step, where it knows it (:meth:`last_frame_for`; None: no end):
        no frame after it is fetched ahead, so a run that stops after its scans leaves no frames cast
        and sensed in vain beside its last ones. The scans are the same either way."""

    def _interval(self, k: int) -> tuple[int, int]:
        return self.start_ns + frame_time_ns(k, self.sim_hz), self.start_ns + frame_time_ns(
            k + 1, self.sim_hz
        )

    def frame_interval(self, k: int) -> tuple[int, int]:
        """Sim frame ``k``'s interval ``[t0_ns, t1_ns)``, the one its source is asked for."""
        return self._interval(k)

    def next_interval(self, t0_ns: int, t1_ns: int) -> tuple[int, int] | None:
        """The sim frame this pipeline asks its source for after ``[t0_ns, t1_ns)`` (None without
        prefetch, when nothing reads ahead of the frame in progress, or for an interval that is not
        one of its frames)."""
        if not self.prefetch:
            return None
        k = round((t0_ns - self.start_ns) * self.sim_hz / 1e9)
        if self._interval(k) != (t0_ns, t1_ns):
            return None
        return self._interval(k + 1)

    def _fetch(self, k: int) -> tuple[Firings, Hits]:
        t0, t1 = self._interval(k)
        firings = firings_between(self.preset, t0, t1)
        hits = self.source.hits(firings, t0, t1)
        return firings, hits if self.on_hits is None else self.on_hits(hits)

    def _fetch_only(self, k: int) -> Fetched:
        return *self._fetch(k), None

    def _fetch_sensed(self, k: int) -> Fetched:
        """Frame ``k``'s firings and hits, and its physics done at once (:attr:`physics_ahead`)."""
        firings, hits = self._fetch(k)
        hits_wall_ns = time.time_ns()
        physics = self._physics_of(hits)
        if physics_on_own_threads(self._workers, physics.uses_waveform(hits)):
            return (
                firings,
                hits,
                (hits_wall_ns, self._physics_threads().submit(physics.apply, hits, self._rng(k))),
            )
        return firings, hits, (hits_wall_ns, physics.apply(hits, self._rng(k)))

    def _physics_threads(self) -> ThreadPoolExecutor:
        if self._physics_pool is None:
            self._physics_pool = ThreadPoolExecutor(
                max_workers=PHYSICS_THREADS, thread_name_prefix="rt-lidar-physics"
            )
        return self._physics_pool

    def _physics_of(self, hits: Hits) -> SensorPhysics:
        """The physics a frame of ``hits`` goes through: following the sim's weather, a copy in the
        weather the hits were cast in (one per weather, never the frame loop's own, which
        :meth:`sense` switches as the frames come), else the pipeline's."""
        if not self._follow_weather:
            return self.physics
        key = tuple(sorted((hits.weather or {}).items()))
        physics = self._weathered.get(key)
        if physics is None:
            physics = copy.copy(self.physics)
            physics.set_weather(hits.weather)
            if len(self._weathered) >= 16:  # a sim whose weather keeps changing: keep the latest
                self._weathered.clear()
            self._weathered[key] = physics
        return physics

    def _rays_per_frame(self) -> float:
        return firings_per_scan(self.preset) * 1e9 / (scan_period_ns(self.preset) * self.sim_hz)

    def _frame_pool(self) -> tuple[ThreadPoolExecutor, int]:
        """The threads that fetch frames ahead (started on first use) and how many there are."""
        if self._pool is None:
            per_frame = self._rays_per_frame()
            workers = frame_workers(self.source, self.prefetch, per_frame)
            split_casts(self.source, workers)
            self._pool = ThreadPoolExecutor(
                max_workers=workers,
                thread_name_prefix="rt-lidar-prefetch",
                initializer=prefault_heap,
                initargs=(int(per_frame * PREFAULT_CAST_BYTES_PER_RAY),),
            )
            self._workers = workers
        return self._pool, self._workers

    def start(self) -> None:
        """Get the frame loop ready to keep its pace from the first frame: start the threads that
        fetch frames ahead and touch each thread's working memory once (:func:`prefault_heap`, where
        the CLI's allocator setting applies), as a real-time program does before its clock starts.
        Without it the first frames do both themselves. Idempotent; the scans are the same either way."""
        if self._started:
            return
        self._started = True
        per_frame = self._rays_per_frame()
        if not self.prefetch:
            prefault_heap(int(per_frame * (PREFAULT_CAST_BYTES_PER_RAY + PREFAULT_LOOP_BYTES_PER_RAY)))
            return
        pool, workers = self._frame_pool()
        # each task holds its thread until all have started, so the pool starts every thread now; a
        # thread that fails to start breaks the barrier, and its error is raised below
        ready = threading.Barrier(workers + 1)
        started = [pool.submit(ready.wait, 60.0) for _ in range(workers)]

        def abort_if_failed(future: Future[int]) -> None:
            if future.exception() is not None:
                ready.abort()

        for future in started:
            future.add_done_callback(abort_if_failed)
        prefault_heap(int(per_frame * PREFAULT_LOOP_BYTES_PER_RAY))
        with contextlib.suppress(threading.BrokenBarrierError):
            ready.wait(60.0)
        for future in started:
            future.result()

    def _frame_hits(self, k: int) -> Fetched:
        if not self.prefetch:
            return self._fetch_only(k)
        pool, _ = self._frame_pool()
        fetch = self._fetch_sensed if self.physics_ahead else self._fetch_only
        pending = self._pending
        while pending and pending[0][0] < k:  # frames skipped over (none in the frame loop)
            pending.popleft()[1].cancel()
        if pending and pending[0][0] == k:
            got = pending.popleft()[1]
        else:  # the first frame (or one after a jump), fetched beside the frames asked for ahead
            self._drain()
            got = pool.submit(fetch, k)
            for ahead in range(k + 1, k + 1 + self.prefetch):
                if self._wanted(ahead):
                    pending.append((ahead, pool.submit(fetch, ahead)))
            return got.result()
        fetched = got.result()
        nxt = pending[-1][0] + 1 if pending else k + 1
        while len(pending) < self.prefetch and self._wanted(nxt):
            pending.append((nxt, pool.submit(fetch, nxt)))
            nxt += 1
        return fetched

    def _wanted(self, k: int) -> bool:
        """Whether frame ``k`` is to be fetched ahead (:attr:`fetch_until`)."""
        return self.fetch_until is None or k <= self.fetch_until

    def last_frame_for(self, scans: int) -> int:
        """The sim frame whose step hands out the ``scans``-th scan still to come (from the frame about
        to be stepped, :attr:`frame`; the run's first scan counted as dropped where it starts before
        the run), from the scan schedule: what :attr:`fetch_until` is set to by a run that stops after
        a number of scans. A source that reports other intervals than it was asked for (a server's)
        may need a frame more or fewer: it is fetched then without being asked ahead."""
        if scans <= 0:
            return self.frame - 1
        period = scan_period_ns(self.preset)
        t0, _ = self._interval(self.frame)
        first = self.assembler.oldest_pending()
        nxt = first if first is not None else t0 // period
        target = nxt + scans - 1
        if not self.assembler.started and nxt * period < self.start_ns:
            target += 1  # the run's first scan is partial and dropped
        end_ns = (target + 1) * period  # a scan is handed out by the frame that reaches its end
        k = max(self.frame, int((end_ns - self.start_ns) * self.sim_hz // 1e9) - 1)
        while k > self.frame and self._interval(k - 1)[1] >= end_ns:
            k -= 1
        while self._interval(k)[1] < end_ns:
            k += 1
        return k

    def _drain(self) -> None:
        """Drop the frames asked for ahead (waiting for the one in flight)."""
        while self._pending:
            future = self._pending.popleft()[1]
            if not future.cancel():
                with contextlib.suppress(Exception):
                    future.result()

    def close(self) -> None:
        """Wait for a prefetch in flight and stop its thread (the prefetched frames are dropped); a
        source with a ``close`` (a bridge with a frame asked ahead) is then closed too."""
        self._drain()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._physics_pool is not None:
            self._physics_pool.shutdown(wait=True)
            self._physics_pool = None
        close_source = getattr(self.source, "close", None)
        if callable(close_source):
            close_source()

    def _rng(self, frame: int) -> np.random.Generator:
        # One independent stream per (seed, frame): results do not depend on how frames are batched.
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, frame])))

    def step(self) -> list[Scan]:
        """Advance one sim frame; returns the scans it completed (usually zero or one)."""
        return self.commit(self.sense())

    def sense(self) -> Sensed:
        """Steps 1-3 of the next sim frame (firings, hits, physics), without stitching: a rig senses
        every sensor of a frame before any commits (see :meth:`commit`)."""
        t_wall = time.perf_counter()
        k = self.frame
        t0, t1 = self._interval(k)
        # 1. the firings of this frame's slice of the schedule (a sector on a rotating sensor), and
        # 2. what they hit, moving objects posed at the frame start (maybe fetched during frame k-1)
        _firings, hits, ahead = self._frame_hits(k)
        hits_wall_ns = time.time_ns()
        # 3. received power, threshold, noise, output scale (in the sim's weather, when followed)
        if self._follow_weather and hits.weather != self._weather:
            self.physics.set_weather(hits.weather)
            self._weather = hits.weather
        if ahead is not None:  # done where the frame was fetched, as the lines below do it
            hits_wall_ns, done = ahead
            result = done.result() if isinstance(done, Future) else done
        else:
            result = self.physics.apply(hits, self._rng(k))
        return Sensed(k, t0, t1, hits, result, hits_wall_ns, time.perf_counter() - t_wall)

    def commit(self, sensed: Sensed, extra: np.ndarray | None = None) -> list[Scan]:
        """Step 4 of a sensed frame: stitch its points (plus ``extra`` points of the same frame, ``t``
        absolute ns, e.g. a rig's crosstalk) into scans; returns the scans it completed."""
        t_wall = time.perf_counter()
        if sensed.frame != self.frame:
            raise ValueError(f"commit of frame {sensed.frame}, expected frame {self.frame}")
        k, t0, t1, hits, result = sensed.frame, sensed.t0_ns, sensed.t1_ns, sensed.hits, sensed.result
        points, extras = result.points, result.extras()
        if extra is not None and extra.size:
            points = np.concatenate([points, extra])
            extras = {n: np.concatenate([v, extra_fill(n, extra.size, v.dtype)]) for n, v in extras.items()}
            order = np.argsort(points["t"], kind="stable")
            points, extras = points[order], {n: v[order] for n, v in extras.items()}
        # 4. stitch into scans (a remote source reports the firings it really swept); a scan's pose is
        # the sensor's at its start, from the poses the hits of that frame came with
        s0, t_end = hits.interval if hits.interval is not None else (t0, t1)
        if hits.pose_start is not None and hits.pose_end is not None:
            self._poses.append((s0, t_end, hits.pose_start, hits.pose_end))
        if hits.bundle_counts is not None:
            self.bundle_stats.add(hits.bundle_counts)
        if self.on_sensed is not None:
            self.on_sensed(sensed)
        if self.on_sector is not None:
            self.on_sector(points, t0, t_end)
        scans = self.assembler.add(points, hits.firings.t_ns, t_end, extras)
        for scan in scans:
            pose = self._pose_at(scan.start_ns)
            if pose is not None:
                scan.sensor_position, scan.sensor_rotation = pose
            scan.sim_wall_ns = sensed.hits_wall_ns
        self.frame += 1
        self.last_stats = FrameStats(
            k, t0, t1, result.fired, points.size, sensed.wall_s + time.perf_counter() - t_wall
        )
        return scans

    def _pose_at(self, t_ns: int) -> Pose | None:
        """The sensor pose at ``t_ns`` (a scan's start) from the frame that holds it; frames before it
        are forgotten (later scans start later)."""
        poses = self._poses
        while len(poses) > 1 and poses[1][0] <= t_ns:
            poses.popleft()
        if not poses:
            return None
        s0, s1, start, end = poses[0]
        return pose_at(start, end, s0, s1, t_ns)

    def scans(self, count: int) -> list[Scan]:
        """Run until ``count`` complete scans came out; returns them."""
        out: list[Scan] = []
        while len(out) < count:
            out.extend(self.step())
        return out[:count]

    @property
    def sim_time_s(self) -> float:
        """Simulated time reached so far."""
        return frame_time_ns(self.frame, self.sim_hz) * 1e-9
