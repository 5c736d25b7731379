"""``rt-lidar view``: open the live stream or a recording in the viewer window (or render N frames to a
PNG and quit)."""

from __future__ import annotations

import importlib
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rt_lidar.errors import ConfigError
from rt_lidar.session.realtime import PRIORITIES, lower_priority
from rt_lidar.sinks.stream import DEFAULT_ADDRESS

__all__ = [
    "PRIORITIES",
    "VIEWER_NICE",
    "ViewerOptions",
    "ensure_display",
    "lower_priority",
    "make_app",
    "run_viewer",
    "yield_viewer_cpu",
]

VIEWER_NICE = 10
"""CPU niceness the viewer takes where it cannot take the idle class (or with ``--priority nice``)."""


@dataclass(frozen=True)
class ViewerOptions:
    """Everything ``rt-lidar view`` takes."""

    connect: str = DEFAULT_ADDRESS
    recording: str | None = None
    """A folder of PCDs to play instead of the live stream."""
    screenshot: str | None = None
    frames: int = 5
    drive: bool = False
    airsim: str = "127.0.0.1:41451"
    demo: bool = False
    """Start the embedded demo publisher (its own process) on ``connect`` and watch it."""
    preset: str = "HDL-64E"
    color_mode: str = "intensity"
    point_size: float = 2.0
    max_fps: float = 0.0
    rate_hz: float | None = None
    """Playback rate of a recording, scans a second (None: at its recorded times)."""
    speed: float = 1.0
    """Playback speed of a recording played at its recorded times (x real time)."""
    size: tuple[int, int] = (1280, 800)
    timeout_s: float = 90.0
    priority: str = "idle"
    """One of :data:`PRIORITIES`."""
    nice: int = VIEWER_NICE
    """Niceness added with ``priority="nice"`` (or where the idle class is missing)."""


def ensure_display() -> Any:
    """Make sure Qt gets a real X display with GL: Qt's ``offscreen`` platform has no GL context for
    GLViewWidget. Without ``DISPLAY`` a private Xvfb is started (PyVirtualDisplay, or ``Xvfb`` found on
    PATH); returns the display object to stop later, or None."""
    if os.environ.get("QT_QPA_PLATFORM", "") == "offscreen":
        del os.environ["QT_QPA_PLATFORM"]
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return None
    try:
        pyvirtualdisplay: Any = importlib.import_module("pyvirtualdisplay")
    except ImportError:
        pyvirtualdisplay = None
    if pyvirtualdisplay is None or shutil.which("Xvfb") is None:
        raise ConfigError(
            "no display: run under X (or `xvfb-run -a rt-lidar view ...`); Qt's offscreen platform "
            "cannot render the GL cloud. Needs the Debian packages xvfb and xauth."
        )
    display = pyvirtualdisplay.Display(visible=False, size=(1600, 1000), color_depth=24)
    # the X server ignores Ctrl-C (inherited): the viewer closes on it and then stops the server
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        display.start()
    finally:
        signal.signal(signal.SIGINT, previous)
    return display


def display_pid(display: Any) -> int | None:
    """The process id of a private X server that :func:`ensure_display` started (None: none known)."""
    proc = getattr(display, "_subproc", None)
    pid = getattr(proc, "pid", None)
    return pid if isinstance(pid, int) else None


def yield_viewer_cpu(priority: str, nice: int = VIEWER_NICE, xpid: int | None = None) -> str:
    """Make this viewer process yield the CPU as ``priority`` says, and the private X server ``xpid``
    with it (it paints for the viewer); returns what was applied to the viewer."""
    applied = lower_priority(priority, nice)
    if xpid is not None:
        lower_priority(priority, nice, pid=xpid)
    return applied


def make_app() -> Any:
    """The QApplication (created once)."""
    import pyqtgraph as pg
    from pyqtgraph.Qt import QtCore

    QtCore.QCoreApplication.setAttribute(QtCore.Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
    return pg.mkQApp("rt-lidar viewer")


def quit_on_interrupt(app: Any) -> None:
    """Ctrl-C (SIGINT) and SIGTERM close the viewer as its window's close button does: Qt's event loop
    runs no Python, so a timer lets the interpreter see the signal now and then."""
    from PySide6.QtCore import QTimer

    def quit_app(signum: int, frame: object) -> None:
        app.quit()

    signal.signal(signal.SIGINT, quit_app)
    signal.signal(signal.SIGTERM, quit_app)
    timer = QTimer(app)
    timer.timeout.connect(lambda: None)
    timer.start(200)


def run_viewer(opts: ViewerOptions) -> int:
    """Run the viewer until its window closes; returns the exit code."""
    if opts.frames < 1:
        raise ConfigError(f"--frames must be >= 1, got {opts.frames}")
    display = ensure_display()
    demo = None
    sink_close: Any = None
    try:
        app = make_app()
        from rt_lidar.viewer.drive import AirSimControlSink, KeyboardDriver, parse_host_port
        from rt_lidar.viewer.sources import FrameSource, LiveSource, RecordingSource
        from rt_lidar.viewer.window import ViewerWindow, WindowOptions, exit_with_message

        source: FrameSource
        if opts.recording:
            source = RecordingSource(Path(opts.recording), rate_hz=opts.rate_hz, speed=opts.speed)
        else:
            if opts.demo:
                from rt_lidar.viewer.publisher import DEMO_CAMERA_EVERY, ServeOptions, start_demo_process

                demo = start_demo_process(
                    ServeOptions(address=opts.connect, preset=opts.preset, camera_every=DEMO_CAMERA_EVERY)
                )
            source = LiveSource(opts.connect)
        # after the demo publisher started (it keeps the normal priority); the private X server paints
        # for the viewer, so it yields as the viewer does
        yield_viewer_cpu(opts.priority, opts.nice, display_pid(display))
        driver = None
        if opts.drive:
            control = AirSimControlSink(*parse_host_port(opts.airsim))
            sink_close = control.close
            driver = KeyboardDriver(control)
        win_opts = WindowOptions(
            color_mode=opts.color_mode,
            point_size=opts.point_size,
            max_fps=opts.max_fps,
            size=opts.size,
            screenshot=opts.screenshot,
            frames=opts.frames,
            timeout_s=opts.timeout_s,
            screenshot_camera=opts.demo,  # the demo publishes camera frames: the picture shows one
        )
        window = ViewerWindow(source, win_opts, driver)
        window.show()
        quit_on_interrupt(app)
        app.exec()
        return exit_with_message(int(window.exit_code), window.exit_message)
    finally:
        if sink_close is not None:
            sink_close()
        if demo is not None:
            demo.terminate()
            demo.wait(10)
        if display is not None:
            display.stop()
