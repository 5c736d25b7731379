"""``rt-lidar demo``: the embedded street seen by one sensor, written as PCD + KITTI + a range image."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from rt_lidar.build import build_pipeline
from rt_lidar.presets import preset_to_dict
from rt_lidar.scan_pattern import firings_per_scan
from rt_lidar.sinks import range_image, write_range_image_png
from rt_lidar.sinks.base import SinkContext, make_sink
from rt_lidar.sinks.fanout import SinkFanout
from rt_lidar.sweep import Scan

__all__ = ["DemoOptions", "run_demo"]


@dataclass(frozen=True)
class DemoOptions:
    """What ``rt-lidar demo`` runs."""

    preset: str = "HDL-64E"
    frames: int = 50
    seed: int = 0
    sim_hz: float = 20.0
    out: str = "out/demo"
    scene: str = "street"
    progress: bool = True
    sinks: tuple[str, ...] = ()
    """Extra ``--sink KIND:TARGET`` outputs besides the demo's own PCD + KITTI files."""


def _range_columns(n_fired: int, n_rings: int) -> int:
    return max(64, min(4096, n_fired // max(1, n_rings)))


def run_demo(opts: DemoOptions) -> dict[str, object]:
    """Run the demo; writes ``out/scans/*.pcd|*.bin``, ``range_image.png``, ``config.json`` and
    ``summary.json``; returns the summary.
    """
    if opts.frames < 1:
        raise ValueError(f"--frames must be >= 1, got {opts.frames}")
    out = Path(opts.out)
    scans_dir = out / "scans"
    scans_dir.mkdir(parents=True, exist_ok=True)
    t_build = time.perf_counter()
    built = build_pipeline(opts.preset, opts.scene, seed=opts.seed, sim_hz=opts.sim_hz)
    build_s = time.perf_counter() - t_build
    preset = built.preset
    pipe = built.pipeline
    (out / "config.json").write_text(
        json.dumps({"options": asdict(opts), "preset": preset_to_dict(preset)}, indent=2)
    )
    specs = (f"pcd:{scans_dir}", f"kitti:{scans_dir}", *opts.sinks)
    sinks = SinkFanout([make_sink(s) for s in specs])
    sinks.open(SinkContext(preset=preset, scenario={"demo": asdict(opts)}))

    points_per_scan: list[int] = []
    fired = dropped = 0
    compute_s = 0.0
    last: Scan | None = None
    bar = tqdm(total=opts.frames, unit="scan", disable=not opts.progress, desc=f"{preset.name} demo")
    t_loop = time.perf_counter()
    while len(points_per_scan) < opts.frames:
        t0 = time.perf_counter()
        scans = pipe.step()
        compute_s += time.perf_counter() - t0
        for scan in scans:
            if len(points_per_scan) >= opts.frames:
                break
            sinks.write(scan)
            points_per_scan.append(int(scan.points.size))
            fired += scan.fired
            dropped += scan.dropped
            last = scan
            bar.update(1)
            bar.set_postfix(
                points=scan.points.size, drop=f"{scan.drop_fraction:.2f}", sim=f"{pipe.sim_time_s:.2f}s"
            )
    sinks.close()
    wall_s = time.perf_counter() - t_loop
    bar.close()

    assert last is not None
    img = range_image(last.points, preset.elevations_deg, _range_columns(last.fired, preset.n_rings))
    write_range_image_png(
        out / "range_image.png", img, preset.output.intensity_max, row_scale=max(1, 256 // preset.n_rings)
    )
    sim_s = pipe.sim_time_s
    summary: dict[str, object] = {
        "preset": preset.name,
        "scene": opts.scene,
        "seed": opts.seed,
        "frames": len(points_per_scan),
        "sim_frames": pipe.frame,
        "sim_hz": opts.sim_hz,
        "rays_per_scan": firings_per_scan(preset),
        "points_per_scan_mean": float(np.mean(points_per_scan)),
        "drop_fraction": dropped / fired if fired else 0.0,
        "sim_time_s": sim_s,
        "wall_time_s": wall_s,
        "pipeline_time_s": compute_s,
        "build_time_s": build_s,
        "realtime_factor": sim_s / wall_s if wall_s > 0 else float("inf"),
        "pipeline_realtime_factor": sim_s / compute_s if compute_s > 0 else float("inf"),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
