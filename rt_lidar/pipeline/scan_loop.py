"""The one scan loop (:func:`run_scans`): a pipeline's scans into sinks, the sinks closed whatever
happens; and :func:`drive_scans`, the demo's and run's use of it (scan files, a progress bar, a summary).
The viewer's publisher, the dataset writer and RINet's pair generator run the same loop."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.beam_full import beam_summary
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import azimuth_span_deg, firings_per_scan
from rt_lidar.sinks import range_image, write_range_image_png
from rt_lidar.sinks.base import ScanSink, SinkContext, make_sink
from rt_lidar.sinks.fanout import SinkFanout
from rt_lidar.sinks.stats import live_sink_figures, sink_reports

if TYPE_CHECKING:
    from rt_lidar.faults.plan import FaultPlan

__all__ = ["LoopStats", "RunResult", "drive_scans", "run_scans"]


@dataclass
class LoopStats:
    """What :func:`run_scans` did."""

    points: list[int] = field(default_factory=list)
    """Points of each scan written."""
    fired: int = 0
    dropped: int = 0
    compute_s: float = 0.0
    """Time in the pipeline and ``post`` (not in the sinks or callbacks)."""
    written: int = 0
    """Scans every sink took."""
    suppressed: int = 0
    """Scans ``post`` held back (returned None: a sensor down in an injected reboot)."""
    last: Scan | None = None
    error: BaseException | None = None
    """The ``stop_on`` exception that ended the loop early, if any."""

    @property
    def scans(self) -> int:
        """Scans handed to the sinks."""
        return len(self.points)


def run_scans(
    pipeline: Pipeline,
    count: int | None,
    sinks: Sequence[ScanSink] = (),
    context: SinkContext | None = None,
    *,
    post: Callable[[Scan], Scan | None] | None = None,
    on_open: Callable[[], None] | None = None,
    on_scan: Callable[[Scan], None] | None = None,
    on_frame: Callable[[], None] | None = None,
    on_end: Callable[[], None] | None = None,
    stop_on: tuple[type[BaseException], ...] = (),
    background: bool = True,
) -> LoopStats:
    """Step ``pipeline`` until ``count`` scans came out (None: until an exception ends it).

    Each scan goes through ``post`` (e.g. the RINet stage; a None from it holds the scan back, and it
    counts towards ``count``), then to every sink, then to ``on_scan``;
    ``on_frame`` runs after every sim frame (pacing), ``on_end`` after the last (not after a failure).
    The sinks are opened first (``on_open`` then) and closed at the end, also when a sink, the
    pipeline or a callback fails: every sink is closed, and what it wrote is complete. An exception
    of a type in ``stop_on`` (e.g. the server going away) ends the loop early and is returned in
    :attr:`LoopStats.error`; any other propagates. ``background`` writes the sinks from a thread
    (:class:`SinkFanout`).
    """
    fan = SinkFanout(list(sinks), background=background)
    fan.open(context or SinkContext(preset=pipeline.preset))
    stats = LoopStats()
    finished = False
    try:
        if fan.wants_sectors:
            pipeline.on_sector = fan.write_sector
        if fan.wants_sensed:  # sinks of each frame's hits (an OSI sensor view)
            fan.attach(pipeline)
            pipeline.on_sensed = fan.write_sensed
        if on_open is not None:
            on_open()
        while count is None or stats.scans + stats.suppressed < count:
            if count is not None:  # no frame past the run's last fetched ahead
                pipeline.fetch_until = pipeline.last_frame_for(count - stats.scans - stats.suppressed)
            t0 = time.perf_counter()
            try:
                scans = pipeline.step()
            except stop_on as exc:
                stats.error = exc
                break
            stats.compute_s += time.perf_counter() - t0
            for got in scans if count is None else scans[: count - stats.scans - stats.suppressed]:
                scan: Scan | None = got
                if post is not None:
                    t_post = time.perf_counter()
                    try:  # its calls may meet the server gone too (e.g. the camera image of RINet)
                        scan = post(got)
                    except stop_on as exc:
                        stats.error = exc
                        break
                    stats.compute_s += time.perf_counter() - t_post
                if scan is None:
                    stats.suppressed += 1
                    continue
                fan.write(scan)
                stats.points.append(int(scan.points.size))
                stats.fired += scan.fired
                stats.dropped += scan.dropped
                stats.last = scan
                if on_scan is not None:
                    on_scan(scan)
            if stats.error is not None:
                break
            if on_frame is not None:
                on_frame()
        if on_end is not None:
            on_end()
        finished = True
    finally:
        pipeline.on_sector = None
        pipeline.on_sensed = None
        if finished:
            fan.close()
        else:  # the error in flight is the one to see; close every sink regardless
            with contextlib.suppress(Exception):
                fan.close()
        stats.written = fan.written
    return stats


def _partial(pipeline: Pipeline) -> dict[str, int] | None:
    """The run's first scan when it was partial and dropped (:attr:`ScanAssembler.partial_first`)."""
    scan = pipeline.assembler.partial_first
    if scan is None:
        return None
    return {"index": scan.index, "fired": scan.fired, "points": int(scan.points.size)}


@dataclass
class RunResult:
    """What a run produced."""

    summary: dict[str, Any]
    last_scan: Scan | None
    error: BaseException | None = None


def drive_scans(
    pipeline: Pipeline,
    preset: SensorPreset,
    frames: int,
    out: Path,
    sinks: Sequence[str] = (),
    scenario: dict[str, Any] | None = None,
    progress: bool = True,
    lockstep: bool = False,
    stop_on: tuple[type[BaseException], ...] = (),
    post: Callable[[Scan], Scan | None] | None = None,
    stamp: str = "sim",
    mount: tuple[float, ...] | None = None,
    write_scans: bool = True,
    live_figures: Callable[[], dict[str, str]] | None = None,
    faults: FaultPlan | None = None,
) -> RunResult:
    """Run ``pipeline`` until ``frames`` scans came out; every scan goes to ``out/scans`` as PCD + KITTI
    and to the extra ``sinks``; writes ``out/range_image.png``; returns the summary (the caller
    completes it and writes it once).

    An exception of a type in ``stop_on`` (e.g. the server going away) ends the run early: the scans
    already written stay complete, the summary says what happened, and the error is returned.
    ``post`` transforms each finished scan before the sinks see it (the RINet stage). ``stamp`` is the
    clock every sink stamps with (``sim`` or ``wall``, see :class:`SinkContext`), ``mount`` the sensor's
    pose on the vehicle (x, y, z, qw, qx, qy, qz) where the run knows it. With ``write_scans`` off
    nothing goes to ``out/scans``: only the extra ``sinks`` (which must then name at least one).
    ``live_figures`` adds figures to the progress line and the stream's headers, so the viewer's HUD
    shows them (e.g. ``--realtime``'s pace).
    ``faults``: the injected faults of the sensor (:mod:`rt_lidar.faults`), after ``post``; the
    summary's ``faults`` lists what each injected and when.
    """
    if frames < 1:
        raise ConfigError(f"--frames must be >= 1, got {frames}")
    if not write_scans and not sinks:
        raise ConfigError("--no-scans: give at least one --sink, or the scans go nowhere")
    scans_dir = out / "scans"
    own = (f"pcd:{scans_dir}", f"kitti:{scans_dir}") if write_scans else ()
    if write_scans:
        scans_dir.mkdir(parents=True, exist_ok=True)
    else:
        out.mkdir(parents=True, exist_ok=True)
    sinks_ = [make_sink(s) for s in (*own, *sinks)]

    def figures() -> dict[str, str]:  # the run's own (e.g. --realtime's pace) and the packet sinks'
        run = live_figures() if live_figures is not None else {}
        return {**run, **live_sink_figures((*own, *sinks), sinks_)}

    context = SinkContext(
        preset=preset, scenario=dict(scenario or {}), lockstep=lockstep, stamp=stamp, _live=figures
    )
    if mount is not None:
        context = dataclasses.replace(context, mount=tuple(mount))
    if faults:
        from rt_lidar.faults.wiring import with_faults

        sinks_, context, post = with_faults(faults, pipeline, sinks_, context, post)
    bar = tqdm(total=frames, unit="scan", disable=not progress, desc=f"{preset.name}")

    def show(scan: Scan) -> None:
        bar.update(1)
        bar.set_postfix(
            points=scan.points.size,
            drop=f"{scan.drop_fraction:.2f}",
            sim=f"{pipeline.sim_time_s:.2f}s",
            **figures(),
        )

    sim0 = pipeline.sim_time_s
    pipeline.start()  # its threads and memory before the clock starts, as the sinks were opened
    t_loop = time.perf_counter()
    try:
        loop = run_scans(pipeline, frames, sinks_, context, post=post, on_scan=show, stop_on=stop_on)
    finally:
        bar.close()
        pipeline.on_hits = None
    counts, fired, dropped, last = loop.points, loop.fired, loop.dropped, loop.last
    compute_s, error = loop.compute_s, loop.error
    wall_s = time.perf_counter() - t_loop
    if last is not None:
        cols = max(64, min(4096, last.fired // max(1, preset.n_rings)))
        img = range_image(last.points, preset.elevations_deg, cols, azimuth_span_deg=azimuth_span_deg(preset))
        rows = max(1, 256 // preset.n_rings)
        write_range_image_png(out / "range_image.png", img, preset.output.intensity_max, row_scale=rows)
    sim_s = pipeline.sim_time_s - sim0
    summary: dict[str, Any] = {
        "preset": preset.name,
        "frames": len(counts),
        "sim_frames": pipeline.frame,
        "sim_hz": pipeline.sim_hz,
        "rays_per_scan": firings_per_scan(preset),
        "points_per_scan_mean": float(np.mean(counts)) if counts else 0.0,
        "drop_fraction": dropped / fired if fired else 0.0,
        "sim_time_s": sim_s,
        "wall_time_s": wall_s,
        "pipeline_time_s": compute_s,
        "realtime_factor": sim_s / wall_s if wall_s > 0 else float("inf"),
        "pipeline_realtime_factor": sim_s / compute_s if compute_s > 0 else float("inf"),
        "scans_written": loop.written,
        "stamp_clock": stamp,
        "stamp_lead_max_s": context.stamp_lead_max_s,
        "stopped_early": None if error is None else f"{type(error).__name__}: {error}",
        "partial_first_scan": _partial(pipeline),
        "sinks": sink_reports((*own, *sinks), sinks_),
        "scenario": scenario or {},
    }
    summary["beam"] = beam_summary(pipeline)
    if faults:
        summary["scans_suppressed"] = loop.suppressed
        summary["faults"] = faults.report()
    return RunResult(summary, last, error)
