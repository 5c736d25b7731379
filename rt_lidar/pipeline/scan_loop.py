"""Running a pipeline for N scans into the sinks, with a progress bar and a summary (demo and run)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import azimuth_span_deg, firings_per_scan
from rt_lidar.sinks import range_image, write_range_image_png
from rt_lidar.sinks.base import SinkContext, make_sink
from rt_lidar.sinks.fanout import SinkFanout

__all__ = ["RunResult", "drive_scans"]


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
    post: Callable[[Scan], Scan] | None = None,
    stamp: str = "sim",
    mount: tuple[float, ...] | None = None,
) -> RunResult:
    """Run ``pipeline`` until ``frames`` scans came out; every scan goes to ``out/scans`` as PCD + KITTI
    and to the extra ``sinks``; writes ``out/range_image.png`` and ``out/summary.json``.

    An exception of a type in ``stop_on`` (e.g. the server going away) ends the run early: the scans
    already written stay complete, the summary says what happened, and the error is returned.
    ``post`` transforms each finished scan before the sinks see it (the RINet stage). ``stamp`` is the
    clock every sink stamps with (``sim`` or ``wall``, see :class:`SinkContext`), ``mount`` the sensor's
    pose on the vehicle (x, y, z, qw, qx, qy, qz) where the run knows it.
    """
    if frames < 1:
        raise ValueError(f"--frames must be >= 1, got {frames}")
    scans_dir = out / "scans"
    scans_dir.mkdir(parents=True, exist_ok=True)
    context = SinkContext(preset=preset, scenario=dict(scenario or {}), lockstep=lockstep, stamp=stamp)
    if mount is not None:
        context = dataclasses.replace(context, mount=tuple(mount))
    fan = SinkFanout([make_sink(s) for s in (f"pcd:{scans_dir}", f"kitti:{scans_dir}", *sinks)])
    fan.open(context)
    if fan.wants_sectors:
        pipeline.on_sector = fan.write_sector
    counts: list[int] = []
    fired = dropped = 0
    compute_s = 0.0
    last: Scan | None = None
    error: BaseException | None = None
    bar = tqdm(total=frames, unit="scan", disable=not progress, desc=f"{preset.name}")
    sim0 = pipeline.sim_time_s
    t_loop = time.perf_counter()
    try:
        while len(counts) < frames:
            t0 = time.perf_counter()
            try:
                scans = pipeline.step()
            except stop_on as exc:
                error = exc
                break
            compute_s += time.perf_counter() - t0
            for scan in scans[: frames - len(counts)]:
                if post is not None:
                    t_post = time.perf_counter()
                    scan = post(scan)
                    compute_s += time.perf_counter() - t_post
                fan.write(scan)
                counts.append(int(scan.points.size))
                fired += scan.fired
                dropped += scan.dropped
                last = scan
                bar.update(1)
                bar.set_postfix(
                    points=scan.points.size,
                    drop=f"{scan.drop_fraction:.2f}",
                    sim=f"{pipeline.sim_time_s:.2f}s",
                )
    finally:
        pipeline.on_sector = None
        fan.close()
        bar.close()
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
        "scans_written": fan.written,
        "stamp_clock": stamp,
        "stamp_lead_max_s": context.stamp_lead_max_s,
        "stopped_early": None if error is None else f"{type(error).__name__}: {error}",
        "scenario": scenario or {},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return RunResult(summary, last, error)
