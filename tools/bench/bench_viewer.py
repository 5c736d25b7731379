"""Viewer benchmark: stream publish cost, viewer frame rate and sim -> screen latency for 131k and 1.3M
points (synthetic street-like scans published at 10 Hz on loopback TCP), JSON out.

    .venv/bin/python tools/bench/bench_viewer.py --seconds 8 --out docs/bench/viewer.json

Runs under the current X display, or a private Xvfb when there is none (Qt's offscreen platform has no
GL context). Latency is sim -> screen: from the scan's ``sim_wall_ns`` (here the synthetic "sim" makes a
scan and publishes it at once) to the end of the paint that shows it (``paintGL`` + ``glFinish``).
Each case also splits a shown frame into the viewer's own work (``prepare_ms``: positions, colours,
range panel) and its paint (``paint_ms``), and times the floor: a bare ``GLScatterPlotItem`` with the
same points in a bare ``GLViewWidget`` of the same size, painted back to back (``raw_paint_ms``).
"""

from __future__ import annotations

import argparse
import json
import platform
import socket
import subprocess
import sys
import threading
import time

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.points import POINT_DTYPE
from rt_lidar.sensor.presets import load_preset
from rt_lidar.session.realtime import tune_allocator
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.stream import ZmqStreamSink
from rt_lidar.viewer.app import display_pid, ensure_display, make_app, yield_viewer_cpu
from rt_lidar.viewer.publisher import DEMO_CAMERA_EVERY, LOOKAHEAD, ServeOptions, start_demo_process


def synthetic_scan(n: int, rings: int = 64, seed: int = 0) -> np.ndarray:
    """``n`` points of a sensor 1.8 m above a road between two walls 10 m to each side."""
    rng = np.random.default_rng(seed)
    ring = np.arange(n) % rings
    elev = np.radians(np.linspace(-25.0, 2.0, rings))[ring]
    az = np.repeat(np.linspace(-np.pi, np.pi, n // rings + 1), rings)[:n]
    d = np.stack([np.cos(elev) * np.cos(az), np.cos(elev) * np.sin(az), np.sin(elev)], -1)
    with np.errstate(divide="ignore"):
        t_ground = np.where(d[:, 2] < 0, -1.8 / d[:, 2], np.inf)
        t_wall = np.where(np.abs(d[:, 1]) > 1e-6, 10.0 / np.abs(d[:, 1]), np.inf)
    r = np.minimum(np.minimum(t_ground, t_wall), 80.0) + rng.normal(0, 0.02, n)
    pts = np.zeros(n, POINT_DTYPE)
    pts["x"], pts["y"], pts["z"] = (d * r[:, None]).T.astype(np.float32)
    pts["intensity"] = rng.uniform(0, 255, n)
    pts["reflectivity"] = rng.uniform(0, 1, n)
    pts["ring"] = ring
    return pts


def _publisher(sink: ZmqStreamSink, pts: np.ndarray, hz: float, stop: threading.Event) -> None:
    k = 0
    t0 = time.perf_counter()
    while not stop.is_set():
        sink.write(Scan(k, int(k * 1e9 / hz), pts, pts.size, 0, sim_wall_ns=time.time_ns()))
        k += 1
        time.sleep(max(0.0, t0 + k / hz - time.perf_counter()))


def bench_one(n: int, seconds: float, hz: float, size: tuple[int, int]) -> dict[str, object]:
    """Run the viewer on a 10 Hz stream of ``n``-point scans for ``seconds``; returns its figures."""
    from rt_lidar.viewer.sources import LiveSource
    from rt_lidar.viewer.window import ViewerWindow, WindowOptions

    app = make_app()
    sink = ZmqStreamSink("tcp://127.0.0.1:*", hwm=2)
    sink.open(SinkContext(preset=load_preset("HDL-64E")))
    pts = synthetic_scan(n)
    t = time.perf_counter()
    reps = 20
    for i in range(reps):  # publish cost with nobody listening
        sink.write(Scan(i, 0, pts, n, 0))
    publish_ms_alone = (time.perf_counter() - t) / reps * 1e3
    source = LiveSource(sink.address)
    win = ViewerWindow(source, WindowOptions(size=size))
    win.show()
    stop = threading.Event()
    thread = threading.Thread(target=_publisher, args=(sink, pts, hz, stop), daemon=True)
    thread.start()
    end = time.monotonic() + seconds
    warm = time.monotonic() + 2.0
    shown0 = None
    t_meas = 0.0
    while time.monotonic() < end:
        app.processEvents()
        if shown0 is None and time.monotonic() > warm:
            shown0, t_meas = win.hud_stats.frames_shown, time.monotonic()
            for d in (win.hud_stats._latency_ms, win.hud_stats._prepare_ms, win.hud_stats._paint_ms):
                d.clear()
    shown = win.hud_stats.frames_shown - (shown0 or 0)
    elapsed = time.monotonic() - t_meas
    stop.set()
    thread.join()
    out = {
        "points": n,
        "publish_hz": hz,
        "window": list(size),
        "viewer_fps": shown / elapsed if elapsed > 0 else 0.0,
        "latency_ms_p50": win.hud_stats.latency_ms(50),
        "latency_ms_p95": win.hud_stats.latency_ms(95),
        "prepare_ms_p50": win.hud_stats.prepare_ms(50),
        "paint_ms_p50": win.hud_stats.paint_ms(50),
        "dropped_frames": win.dropped,
        "publish_ms_no_subscriber": publish_ms_alone,
        "publish_ms_mean": sink.stats.publish_ms_mean,
        "publish_ms_max": sink.stats.publish_s_max * 1e3,
    }
    win.close()  # deleted on close (in this thread, below), not by a garbage collection in another one
    _flush_deletes(app)
    sink.close()
    raw_ms = raw_paint_ms(pts, size)
    out["raw_paint_ms"] = raw_ms
    out["raw_fps"] = 1e3 / raw_ms if raw_ms > 0 else 0.0
    return out


def raw_paint_ms(pts: np.ndarray, size: tuple[int, int], reps: int = 6) -> float:
    """Median ms of one paint (``paintGL`` + ``glFinish``) of a bare ``GLScatterPlotItem`` holding
    ``pts`` (float32 positions and colours made beforehand, uploaded once): the GL floor of a frame."""
    import pyqtgraph.opengl as gl
    from OpenGL import GL

    from rt_lidar.viewer.colors import point_colors, point_positions

    app = make_app()
    view = gl.GLViewWidget()
    view.resize(*size)
    view.setCameraPosition(distance=45.0, elevation=28.0, azimuth=180.0)
    item = gl.GLScatterPlotItem(pos=point_positions(pts), color=point_colors(pts, "intensity"), size=2.0)
    item.setGLOptions("opaque")  # as the viewer draws its cloud
    view.addItem(item)
    view.show()
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        app.processEvents()
    view.makeCurrent()
    times = []
    for _ in range(reps + 1):
        t0 = time.perf_counter()
        view.paintGL()
        GL.glFinish()
        times.append(time.perf_counter() - t0)
    view.doneCurrent()
    view.close()
    view.deleteLater()
    _flush_deletes(app)
    return float(np.median(times[1:])) * 1e3


def _flush_deletes(app: object) -> None:
    """Run the deferred deletions of closed GL widgets now, in the GUI thread."""
    from pyqtgraph.Qt import QtCore

    app.processEvents()  # type: ignore[attr-defined]
    QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)


def bench_live_throttled(
    preset: str,
    seconds: float,
    max_fps: float,
    size: tuple[int, int],
    priority: str,
    xpid: int | None,
    camera_every: int = 0,
    lookahead: int = LOOKAHEAD,
) -> dict[str, object]:
    """A live ``preset`` pipeline (own process, 20 Hz sim frames paced to real time) watched by a viewer
    (own process) throttled to ``max_fps`` that yields the CPU as ``priority`` says (``alone``: no
    viewer): the publisher's real-time factor and sector deadlines, and the viewer's HUD. The X server
    ``xpid`` takes the viewer's priority (and keeps it: run ``alone``, ``nice``, ``idle`` in order)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    viewer = None
    if priority != "alone":  # the viewer first (it waits for the stream), so its start-up is not timed
        args = [sys.executable, __file__, "--viewer-case", address, priority, str(seconds + 30), str(max_fps)]
        args += ["--size", str(size[0]), str(size[1])] + (["--xpid", str(xpid)] if xpid else [])
        viewer = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert viewer.stdout is not None
        viewer.stdout.readline()  # window shown, priority lowered
    opts = ServeOptions(address=address, preset=preset, camera_every=camera_every, lookahead=lookahead)
    proc = start_demo_process(opts)
    assert proc.stdout is not None
    hud: dict[str, object] = {"viewer_priority": priority}
    try:
        proc.stdout.readline()  # bound, pipeline built
        time.sleep(seconds)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
        if viewer is not None:
            got, _ = viewer.communicate(b"stop\n", timeout=60)  # it stops at the line
            hud = json.loads([ln for ln in got.decode().splitlines() if ln.startswith("{")][-1])
    summary = json.loads([ln for ln in out.decode().splitlines() if ln.startswith("{")][-1])
    keys = (
        "realtime_factor",
        "frames",
        "late_frames",
        "lateness_ms_p50",
        "lateness_ms_p99",
        "lateness_ms_max",
    )
    return {
        "preset": preset,
        "viewer_max_fps": max_fps,
        "seconds": seconds,
        "camera_every": camera_every,
        "lookahead": lookahead,
        **hud,
        **{k: summary[k] for k in keys},
    }


def viewer_case(
    address: str, priority: str, seconds: float, max_fps: float, size: tuple[int, int], xpid: int | None
) -> dict[str, object]:
    """The viewer side of :func:`bench_live_throttled`, in its own process: watch ``address`` at most
    ``max_fps``, yielding the CPU as ``rt-lidar view --priority`` does, until a line on stdin (or
    ``seconds``); prints ``ready`` once its window is up."""
    from rt_lidar.viewer.sources import LiveSource
    from rt_lidar.viewer.window import ViewerWindow, WindowOptions

    app = make_app()
    applied = yield_viewer_cpu(priority, xpid=xpid)
    win = ViewerWindow(LiveSource(address), WindowOptions(size=size, max_fps=max_fps))
    win.show()
    app.processEvents()
    print("ready", flush=True)
    stop = threading.Event()

    def wait_for_stop() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_for_stop, daemon=True).start()
    end = time.monotonic() + seconds
    while time.monotonic() < end and not stop.is_set():
        app.processEvents()
        time.sleep(0.005)
    hud = {
        "viewer_priority": applied,
        "viewer_fps": win.hud_stats.fps,
        "hud_dropped_frames": win.dropped,
        "hud": win.hud_text(),
    }
    win.close()
    return hud


def main() -> int:
    """Benchmark 131k and 1.3M points; print (and write) the JSON."""
    tune_allocator()  # as the rt-lidar CLI runs the product
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--hz", type=float, default=10.0)
    p.add_argument("--points", type=int, nargs="+", default=[131_072, 1_310_720])
    p.add_argument("--size", type=int, nargs=2, default=[1024, 768])
    p.add_argument("--live-preset", default="HDL-64E", help="live pipeline of the throttled case ('' = skip)")
    p.add_argument("--live-seconds", type=float, default=20.0)
    p.add_argument(
        "--live-priorities",
        nargs="+",
        default=["alone", "nice", "idle"],
        choices=["alone", "nice", "idle"],
        help="throttled cases, in this order (a process cannot take back a lowered priority)",
    )
    p.add_argument(
        "--live-camera-every",
        type=int,
        default=0,
        help="the publisher renders a camera frame and its mask with every k-th scan, as `view --demo` "
        f"does with {DEMO_CAMERA_EVERY} (0 = never)",
    )
    p.add_argument(
        "--live-lookahead",
        type=int,
        default=LOOKAHEAD,
        help=f"sim frames the publisher casts ahead (default {LOOKAHEAD}; 1 = no banking, as a driven sim)",
    )
    p.add_argument("--out", default=None)
    p.add_argument(
        "--viewer-case",
        nargs=4,
        metavar=("ADDRESS", "PRIORITY", "SECONDS", "MAX_FPS"),
        help=argparse.SUPPRESS,
    )
    p.add_argument("--xpid", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.viewer_case:
        address, prio, secs, fps = a.viewer_case
        case = viewer_case(address, prio, float(secs), float(fps), (a.size[0], a.size[1]), a.xpid)
        print(json.dumps(case), flush=True)
        return 0
    display = ensure_display()
    live = []
    try:
        results = [bench_one(n, a.seconds, a.hz, (a.size[0], a.size[1])) for n in a.points]
        xpid = display_pid(display)
        size, cam, ahead = (a.size[0], a.size[1]), a.live_camera_every, a.live_lookahead
        for prio in a.live_priorities if a.live_preset else []:
            case = bench_live_throttled(a.live_preset, a.live_seconds, 2.0, size, prio, xpid, cam, ahead)
            live.append(case)
        report = {
            "host": platform.node(),
            "cpu_count": __import__("os").cpu_count(),
            "results": results,
            "live_throttled": live,
        }
        text = json.dumps(report, indent=2)
        # out before the private X server stops: Qt may abort on the lost connection right after
        print(text, flush=True)
        if a.out:
            write_json(a.out, report)
    finally:
        if display is not None:
            display.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
