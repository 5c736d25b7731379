"""How the frame loop spreads its work over threads, decided from what a source states.

The frame loop (:class:`~rt_lidar.pipeline.frame_loop.Pipeline`) asks here, once per pipeline, how
many threads fetch its frames ahead and whether a cast is split over threads (:func:`frame_workers`,
from the source's :class:`~rt_lidar.pipeline.sources.Capabilities`), and per frame where its physics
runs (:func:`physics_on_own_threads`). None of it changes a scan: each frame's physics takes its own
random stream, so the points are the same wherever and in whatever order frames run
(docs/determinism.md).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, cast

from rt_lidar.unreal_bridge.world.raycast import PARALLEL_MIN_RAYS

if TYPE_CHECKING:
    from rt_lidar.pipeline.sources import HitSource

__all__ = [
    "BRIDGED_RIG_PREFETCH",
    "CAST_AHEAD",
    "PHYSICS_THREADS",
    "RIG_FRAMES_AHEAD",
    "RIG_PHYSICS_AHEAD",
    "frame_workers",
    "physics_on_own_threads",
    "split_casts",
]

CAST_AHEAD = 3
"""The prefetch depth of a scripted in-process world's runs (the demo's): with two or more frames ahead
they are cast at the same time, one thread each (see :attr:`Pipeline.prefetch`)."""
PHYSICS_THREADS = 2
"""Threads of their own for the waveform physics of frames that one thread fetches in order."""
RIG_PHYSICS_AHEAD = True
"""A rig's sensors each do their frames' physics on the threads that fetch them, so that every sensor's
cast and physics of the next frame overlap the crosstalk and the stitching of this one on the frame
loop's thread. (Before the compiled twins released the GIL it measured 0-10 % slower and stayed on
the frame loop's thread, docs/performance-notes.md.)"""
RIG_FRAMES_AHEAD = 2
"""Frames each sensor of an in-process rig fetches (and senses) ahead. With one, the rig ran in lockstep
behind its slowest sensor: no sensor started frame n+2 before the HDL-64E's cast and physics of frame
n+1 were done and the loop had taken them, so every sensor's work, the crosstalk and the sinks of a
frame crowded into the window of that one chain, which then ran its last part alone on one core
(docs/performance.md, "Issue 43, twenty-second session"). With two, the light sensors and the loop's
crosstalk fill that core with the next frame's work, and the HDL-64E casts two frames at once, one
thread each (:func:`frame_workers`)."""
BRIDGED_RIG_PREFETCH = 0
"""A rig over the bridge fetches no frame ahead on its own: every sensor reads the frame the first one
advanced the sim to, in order (the rig asks every sensor's frames ahead itself, ``RigFramesAhead``)."""


def frame_workers(source: HitSource, depth: int, rays_per_frame: float) -> int:
    """Threads that fetch the frames asked for ahead: one per frame, as many as the cores, for a source
    that states :attr:`Capabilities.frames_in_any_order` (an in-process world: its hits depend on each
    ray's time alone) when its frames are large enough that its cast would be split over two threads;
    one for smaller frames (their time is mostly the interpreter's: threads would only take turns) and
    for any other source (a server answers in order)."""
    if depth < 2 or not source.capabilities.frames_in_any_order or rays_per_frame < PARALLEL_MIN_RAYS:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(depth, max(2, cores)))


def split_casts(source: HitSource, workers: int) -> None:
    """With several frames cast at once (``workers`` > 1), each cast on one thread: a source that states
    :attr:`Capabilities.frames_in_any_order` has its ``cast_threads`` set to 1."""
    from rt_lidar.pipeline.sources import ThreadedCaster

    if workers > 1 and source.capabilities.frames_in_any_order:
        cast(ThreadedCaster, source).cast_threads = 1


def physics_on_own_threads(fetch_threads: int, waveform: bool) -> bool:
    """Whether a frame's physics, done where it was fetched, goes to threads of its own
    (:data:`PHYSICS_THREADS`): when one thread fetches the frames in order (a server answers in order)
    and the frame takes the waveform physics, the heavy kind, so that consecutive frames' overlap."""
    return fetch_threads == 1 and waveform
