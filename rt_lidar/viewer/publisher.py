"""A publishing pipeline for the viewer to watch: the embedded street on the ``zmq`` sink, paced to real
time, optionally with a camera image and its intensity mask every few scans.

Run in its own process (``python -m rt_lidar.viewer.publisher`` or :func:`start_demo_process`) so the
viewer and the simulation never share an interpreter lock.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.errors import RtLidarError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.scan_loop import run_scans
from rt_lidar.session.realtime import tune_allocator
from rt_lidar.sinks.stream import DEFAULT_ADDRESS, PublisherStats, ZmqStreamSink
from rt_lidar.viewer.painter import CameraPainter, intensity_mask

__all__ = [
    "DEMO_CAMERA",
    "DEMO_CAMERA_EVERY",
    "LOOKAHEAD",
    "ServeOptions",
    "intensity_mask",
    "main",
    "serve",
    "start_demo_process",
]


DEMO_CAMERA_EVERY = 10
"""``view --demo``: a camera frame and its mask with every 10th scan (1 Hz at 10 Hz)."""

DEMO_CAMERA = (320, 180)
"""Width and height of the demo's camera: a 480x270 render cost 80-100 ms on two cores, and one with
every 4th scan took a real-time HDL-64E publisher down to 0.88x; 320x180 costs 40 ms."""

LOOKAHEAD = 8
"""Frames the demo casts ahead: the light stretches of the street bank enough time (8 x 50 ms) for its
densest seconds, where one frame costs about a frame period on two cores."""


@dataclass(frozen=True)
class ServeOptions:
    """What the demo publisher runs."""

    address: str = DEFAULT_ADDRESS
    preset: str = "HDL-64E"
    scene: str = "street"
    sim_hz: float = 20.0
    scans: int = 0
    """Stop after this many scans (0 = run until killed)."""
    realtime: bool = True
    """Pace sim time to wall-clock time (False: as fast as the pipeline goes)."""
    camera_every: int = 0
    """Publish a camera frame with every k-th scan (0 = never), rendered beside the frame loop."""
    hwm: int = 2
    seed: int = 0
    lookahead: int = LOOKAHEAD
    """Sim frames cast ahead of the one going through the physics (the street is scripted)."""


def serve(opts: ServeOptions, log: bool = False) -> dict[str, object]:
    """Run the pipeline and publish every scan; returns a summary (publish cost, real-time factor)."""
    built = build_pipeline(
        opts.preset, opts.scene, seed=opts.seed, sim_hz=opts.sim_hz, prefetch=max(1, opts.lookahead)
    )
    sink = ZmqStreamSink(opts.address, hwm=opts.hwm)
    painter = None
    if opts.camera_every > 0:  # the painter process builds its own world of the named scene
        painter = CameraPainter(opts.scene, opts.seed, DEMO_CAMERA, built.preset.output.intensity_max)

    def publish_painted(timeout_s: float = 0.0) -> None:
        got = painter.take(timeout_s) if painter is not None else None
        if got is not None:
            sink.write_camera(*got)

    pipe = built.pipeline
    pipe.start()
    period = 1.0 / opts.sim_hz
    lateness: list[float] = []  # per sim frame: wall time past its deadline (s; < 0 = early)
    started = False  # the clock starts when the first frame (caches built) is out
    t_start, sim0 = time.perf_counter(), 0.0
    n_scans = 0
    opened: dict[str, Any] = {}

    def on_open() -> None:
        opened["address"], opened["stats"] = sink.address, sink.stats
        if log:
            print(json.dumps({"address": sink.address}), flush=True)

    def on_scan(scan: Scan) -> None:
        nonlocal n_scans
        n_scans += 1
        publish_painted()
        # the 1st, 11th, 21st, ... scan: a viewer that just connected soon has a picture
        if painter is not None and (n_scans - 1) % opts.camera_every == 0:
            painter.submit(scan.points, scan.start_ns)  # skipped while it paints the last

    def on_frame() -> None:
        nonlocal started, t_start, sim0
        publish_painted()
        now = time.perf_counter()
        if not started:
            started, t_start, sim0 = True, now, pipe.sim_time_s
            return
        swept = t_start + pipe.sim_time_s - sim0  # wall time at which the sensor finished this frame
        lateness.append(now - (swept + period))  # its sector is due one frame period later
        if opts.realtime and swept > now:
            time.sleep(swept - now)

    try:
        run_scans(
            pipe,
            opts.scans if opts.scans > 0 else None,
            [sink],
            on_open=on_open,
            on_scan=on_scan,
            on_frame=on_frame,
            background=False,
            on_end=lambda: publish_painted(timeout_s=10.0),  # the camera frame of the last scans
        )
    except KeyboardInterrupt:
        pass  # SIGINT / SIGTERM: stop and report
    finally:
        wall = time.perf_counter() - t_start
        if painter is not None:
            painter.close()
        pipe.close()
    stats = opened.get("stats", PublisherStats())
    late = np.asarray(lateness or [0.0])
    sim_s = pipe.sim_time_s - sim0
    return {
        "address": opened.get("address", opts.address),
        "scans": n_scans,
        "sim_s": sim_s,
        "wall_s": wall,
        "realtime_factor": sim_s / wall if wall > 0 else 0.0,
        "frames": int(late.size),
        "late_frames": int((late > 0).sum()),
        "lateness_ms_p50": round(1e3 * float(np.percentile(late, 50)), 2),
        "lateness_ms_p99": round(1e3 * float(np.percentile(late, 99)), 2),
        "lateness_ms_max": round(1e3 * float(late.max()), 2),
        "published": stats.sent,
        "publish_dropped": stats.dropped,
        "publish_unheard": stats.unheard,
        "publish_ms_mean": stats.publish_ms_mean,
        "publish_ms_max": 1e3 * stats.publish_s_max,
    }


def start_demo_process(opts: ServeOptions) -> subprocess.Popen[bytes]:
    """Start :func:`serve` in a child process (same interpreter); the caller terminates it."""
    args = [
        sys.executable,
        "-m",
        "rt_lidar.viewer.publisher",
        "--address",
        opts.address,
        "--preset",
        opts.preset,
    ]
    args += ["--scene", opts.scene, "--sim-hz", str(opts.sim_hz), "--scans", str(opts.scans)]
    args += ["--camera-every", str(opts.camera_every), "--hwm", str(opts.hwm), "--seed", str(opts.seed)]
    args += ["--lookahead", str(opts.lookahead)]
    if not opts.realtime:
        args.append("--no-realtime")
    return subprocess.Popen(args, stdout=subprocess.PIPE)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rt_lidar.viewer.publisher``: publish the demo; prints a JSON summary at the end."""
    p = argparse.ArgumentParser(prog="rt_lidar.viewer.publisher", description=__doc__)
    p.add_argument("--address", default=DEFAULT_ADDRESS)
    p.add_argument("--preset", default="HDL-64E")
    p.add_argument("--scene", default="street")
    p.add_argument("--sim-hz", type=float, default=20.0)
    p.add_argument("--scans", type=int, default=0)
    p.add_argument("--camera-every", type=int, default=0)
    p.add_argument("--hwm", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-realtime", action="store_true")
    p.add_argument("--lookahead", type=int, default=LOOKAHEAD, help="sim frames cast ahead (>= 1)")
    a = p.parse_args(argv)
    if a.lookahead < 1:
        p.error(f"--lookahead must be >= 1, got {a.lookahead}")
    opts = ServeOptions(
        a.address,
        a.preset,
        a.scene,
        a.sim_hz,
        a.scans,
        not a.no_realtime,
        a.camera_every,
        a.hwm,
        a.seed,
        a.lookahead,
    )
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    tune_allocator()
    try:
        summary = serve(opts, log=True)
        with contextlib.suppress(BrokenPipeError):  # the viewer that read our stdout has gone first
            print(json.dumps(summary), flush=True)
    except RtLidarError as exc:
        print(f"rt-lidar view --demo: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _interrupt(signum: int, frame: object) -> None:
    # once: a second signal (Ctrl-C reaching the whole group, then the viewer's terminate) must not
    # break the shutdown the first one started
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
