"""The viewer window: GL point cloud, HUD, help overlay, range image and camera panels, playback bar."""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph.opengl as gl
from pyqtgraph.Qt import QtCore, QtGui, QtWidgets

from rt_lidar.errors import ConfigError, RecordingError
from rt_lidar.sinks.pcd import write_pcd
from rt_lidar.sinks.stream import StreamFrame
from rt_lidar.viewer.cloud_view import CloudView, key_name
from rt_lidar.viewer.colors import (
    COLOR_MODES,
    CloudBuffers,
    ColorScales,
    color_legend,
    intensity_mask_rgb,
    range_panel_rgb,
)
from rt_lidar.viewer.drive import KeyboardDriver
from rt_lidar.viewer.help_text import HELP_TEXT, bad_frame_lines, frame_time_text, live_lines, stamp_text
from rt_lidar.viewer.picking import describe_point, pick_point
from rt_lidar.viewer.rig_layers import RIG_EXPORT_NOTE, RigLayers, vehicle_point_text
from rt_lidar.viewer.sources import FrameSource, HudStats, LiveSource, RecordingSource

__all__ = [
    "HELP_TEXT",
    "CloudView",
    "ViewerWindow",
    "WindowOptions",
    "exit_with_message",
    "key_name",
    "range_panel_rgb",
]


@dataclass(frozen=True)
class WindowOptions:
    """How the window looks and paces itself."""

    color_mode: str = "intensity"
    point_size: float = 2.0
    max_fps: float = 0.0
    """Upper limit on frames shown per second (0 = as fast as frames come)."""
    size: tuple[int, int] = (1280, 800)
    screenshot: str | None = None
    frames: int = 1
    """With ``screenshot``: save after this many scans were painted, then quit."""
    timeout_s: float = 60.0
    """With ``screenshot``: give up (save what is there, exit code 1) after this long."""
    screenshot_camera: bool = False
    """With ``screenshot``: also wait for a camera frame (the source publishes them now and then)."""


_MARKER_RGB = (1.0, 0.2, 1.0)
"""Colour of the picked point's marker (magenta: no colour mode uses it)."""
_KEEP_ASPECT = QtCore.Qt.AspectRatioMode.KeepAspectRatio
_FAST = QtCore.Qt.TransformationMode.FastTransformation


def _qimage(rgb: np.ndarray) -> QtGui.QImage:
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w = rgb.shape[:2]
    return QtGui.QImage(rgb.data, w, h, 3 * w, QtGui.QImage.Format.Format_RGB888).copy()


class ViewerWindow(QtWidgets.QMainWindow):
    """The main window; polls ``source`` from a timer and shows the newest scan."""

    def __init__(
        self, source: FrameSource, options: WindowOptions | None = None, driver: KeyboardDriver | None = None
    ) -> None:
        super().__init__()
        # a closed window frees its GL context here, in the GUI thread: left to Python's garbage
        # collector, the GL widget could be destroyed in whichever thread collects (the stream's reader
        # thread, say), and Qt aborts when a context is made current in a thread it does not live in
        self.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        self.source = source
        self.options = opts = options or WindowOptions()
        if opts.color_mode not in COLOR_MODES:
            raise ConfigError(f"unknown colour mode '{opts.color_mode}'; known: {', '.join(COLOR_MODES)}")
        self.driver = driver
        self.color_mode = opts.color_mode
        self.point_size = float(opts.point_size)
        self.paused = False
        self.step_requested = False
        self.hud_stats = HudStats()
        self.current: StreamFrame | None = None
        self.colors: np.ndarray = np.zeros((0, 4), np.float32)
        """The colours on screen (a view of a buffer reused by the next scan: copy to keep)."""
        self.buffers = CloudBuffers()
        self._positions: np.ndarray = np.zeros((0, 3), np.float32)
        self._shown: np.ndarray = self._positions
        """The scan's points as drawn (for a rig's sensor: in the vehicle frame, by its mount)."""
        self._hud_at = 0.0
        self._camera: StreamFrame | None = None
        self.exit_code = 0
        self.exit_message = ""
        """Why a ``--screenshot`` run ended without its scans ('' when it got them)."""
        self._pending: dict[str, StreamFrame] = {}
        """Scans to show at the next tick: ``"scan"``, or for a rig one per sensor (``scan/<name>``)."""
        self._paint_wall: int | None = None
        self._paint_due = False
        self._started = time.monotonic()
        self._build_ui()
        self.timer = QtCore.QTimer(self)
        self.timer.timeout.connect(self._tick)
        self.timer.start(int(1000.0 / opts.max_fps) if opts.max_fps > 0 else 5)
        if driver is not None:
            self.drive_timer = QtCore.QTimer(self)
            self.drive_timer.timeout.connect(driver.tick)
            self.drive_timer.start(50)

    # -- layout -------------------------------------------------------------------------------------
    def _build_ui(self) -> None:
        self.setWindowTitle(f"rt-lidar viewer - {self.source.label}")
        self.resize(*self.options.size)
        self.view = CloudView(self._painted, self._key, self.pick_at)
        self.view.setBackgroundColor((12, 12, 16, 255))
        self.view.setCameraPosition(distance=45.0, elevation=28.0, azimuth=180.0)
        grid = gl.GLGridItem()
        grid.setSize(100, 100)
        grid.setSpacing(10, 10)
        grid.setColor((70, 70, 80, 120))
        self.view.addItem(grid)
        self.scatter = gl.GLScatterPlotItem(
            pos=np.zeros((1, 3), np.float32), color=(1.0, 1.0, 1.0, 0.0), size=self.point_size, pxMode=True
        )
        # opaque, with the depth test: a point shows its own colour (additive blending, pyqtgraph's
        # default, sums dense points towards white, and the colours stop meaning what the legend says)
        self.scatter.setGLOptions("opaque")
        self.view.addItem(self.scatter)
        self.marker = gl.GLScatterPlotItem(
            pos=np.zeros((1, 3), np.float32), color=(*_MARKER_RGB, 0.0), size=12.0, pxMode=True
        )
        self.view.addItem(self.marker)
        self.rig = RigLayers(self.view, self.point_size, on_toggle=self._rig_toggled)
        """A rig's sensors, a layer each (made as their scans come)."""
        self.exported: Path | None = None
        """The last scan exported (key E)."""
        self.picked: int | None = None
        """Index of the picked point in the scan on screen (None when none)."""
        self.picked_sensor: str | None = None
        """For a rig: the sensor whose scan :attr:`picked` indexes."""
        self._pick_xy: tuple[float, float] | None = None
        mono = QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.SystemFont.FixedFont)
        self.hud = QtWidgets.QLabel(self.view)
        self.hud.setFont(mono)
        self.hud.setStyleSheet("color: #e8e8e8; background: rgba(0,0,0,150); padding: 6px;")
        self.hud.move(8, 8)
        self.pick_label = QtWidgets.QLabel(self.view)
        self.pick_label.setFont(mono)
        self.pick_label.setStyleSheet("color: #ffd0ff; background: rgba(0,0,0,170); padding: 6px;")
        self.pick_label.setVisible(False)
        self.help = QtWidgets.QLabel(HELP_TEXT, self.view)
        self.help.setStyleSheet("color: white; background: rgba(20,20,40,215); padding: 14px;")
        self.help.setVisible(False)
        self.range_label = QtWidgets.QLabel()
        self.camera_label, self.mask_label = QtWidgets.QLabel(), QtWidgets.QLabel()
        ignored = QtWidgets.QSizePolicy.Policy.Ignored
        for lab in (self.range_label, self.camera_label, self.mask_label):
            lab.setScaledContents(True)
            lab.setSizePolicy(ignored, QtWidgets.QSizePolicy.Policy.Fixed)
            lab.setFixedHeight(150)
        self.range_label.setFixedHeight(110)
        self.range_label.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.camera_label.setVisible(False)
        self.mask_label.setVisible(False)
        panels = QtWidgets.QWidget()
        row = QtWidgets.QHBoxLayout(panels)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.range_label, 3)
        row.addWidget(self.camera_label, 1)
        row.addWidget(self.mask_label, 1)
        self.panels = panels
        self.slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.slider_label = QtWidgets.QLabel()
        self.slider_label.setFont(mono)
        playbar = QtWidgets.QWidget()
        bar = QtWidgets.QHBoxLayout(playbar)
        bar.setContentsMargins(4, 0, 4, 0)
        bar.addWidget(self.slider, 1)
        bar.addWidget(self.slider_label)
        playbar.setVisible(isinstance(self.source, RecordingSource))
        if isinstance(self.source, RecordingSource):
            self.slider.setRange(0, len(self.source) - 1)
            self.slider.valueChanged.connect(self._slider_moved)
        central = QtWidgets.QWidget()
        col = QtWidgets.QVBoxLayout(central)
        col.setContentsMargins(2, 2, 2, 2)
        col.addWidget(self.view, 1)
        col.addWidget(panels)
        col.addWidget(playbar)
        self.setCentralWidget(central)
        self._update_hud()

    def resizeEvent(self, ev: Any) -> None:
        """Keep the help overlay centred."""
        super().resizeEvent(ev)
        self._place_help()
        self.rig.place_panel()

    def _place_help(self) -> None:
        self.help.adjustSize()
        self.help.move(max(0, (self.view.width() - self.help.width()) // 2), 60)

    # -- frames -------------------------------------------------------------------------------------
    def _tick(self) -> None:
        frames = self.source.poll()
        cam = frames.get("camera")
        if cam is not None:
            self._show_camera(cam)
        for key, frame in frames.items():  # a rig's scan comes twice: as "scan" and as its sensor's
            if key.startswith("scan/") or (key == "scan" and "sensor" not in frame.header):
                self._pending[key] = frame
        if self._pending and (not self.paused or self.step_requested):
            self.step_requested = False
            for frame in self._pending.values():
                self.show_scan(frame)
            self._pending.clear()
            self._update_hud()
        elif time.monotonic() - self._hud_at > 0.2:  # the figures move on between scans (waiting, fps)
            self._update_hud()
        if self.options.screenshot:
            self._screenshot_if_stuck()

    def _screenshot_if_stuck(self) -> None:
        """A ``--screenshot`` that cannot get its scans ends now with a message (:attr:`exit_message`):
        a recording that ended short (unreadable scans: exit code 2; fewer scans than asked: 0, said),
        or ``--timeout`` (exit code 1)."""
        opts = self.options
        shown, asked = self.hud_stats.frames_shown, opts.frames
        ended = bool(getattr(self.source, "ended", False)) and not self._pending and not self._paint_due
        if ended and shown < asked:
            bad = int(getattr(self.source, "bad_frames", 0))
            told = f"saved {opts.screenshot} after {shown} of --frames {asked} scans"
            if bad:
                first = getattr(self.source, "last_bad", "")
                self.exit_code = 2
                self.exit_message = f"{bad} of the recording's scans are unreadable ({first}); {told}"
            else:
                self.exit_message = f"the recording ended: {told}"
            self.save_screenshot_and_quit()
        elif time.monotonic() - self._started > opts.timeout_s:
            self.exit_code = 1
            self.exit_message = (
                f"--timeout {opts.timeout_s:g} s passed with {shown} of --frames {asked} scans shown; "
                f"saved what was there to {opts.screenshot}"
            )
            self.save_screenshot_and_quit()

    def scales(self, header: dict[str, Any]) -> ColorScales:
        """Colour scales from a frame header."""
        return ColorScales(
            intensity_max=float(header.get("intensity_max", 255.0)),
            range_max_m=min(float(header.get("range_max_m", 80.0)), 80.0),
            n_rings=len(header.get("elevations_deg") or [0] * 64),
            sensor_index=int(header.get("sensor_index", 0)),
        )

    def show_scan(self, frame: StreamFrame) -> None:
        """Put ``frame``'s points on screen (the paint follows from the event loop)."""
        assert frame.points is not None
        t0 = time.perf_counter()
        self.current = frame
        if "sensor" in frame.header:  # a rig's sensor: its own layer, placed on the vehicle by its mount
            ly = self.rig.show(frame, self.color_mode, self.scales(frame.header))
            self._positions, self._shown, self.colors = ly.sensor_positions, ly.positions, ly.colors
            self.scatter.setVisible(False)
        else:
            # positions and colours go into buffers reused from scan to scan, float32 and contiguous, so
            # setData keeps them as they are (no copy) and a big scan allocates nothing
            self._positions = self._shown = self.buffers.positions(frame.points)
            self.colors = self.buffers.colors(
                frame.points, self.color_mode, self.scales(frame.header), self._positions
            )
            self.scatter.setData(pos=self._positions, color=self.colors)
        if self._pick_xy is not None:  # a pick stays where it was on screen: the point there now
            self.pick_at(*self._pick_xy, follow=True)
        panel = self.rig.panel_layer()  # for a rig: the first sensor that is on (not each in turn)
        if self.panels.isVisible() and (panel is None or panel.name == frame.header.get("sensor")):
            self._show_range_panel()
        if isinstance(self.source, RecordingSource):
            self.slider.blockSignals(True)
            self.slider.setValue(self.source.index)
            self.slider.blockSignals(False)
            self.slider_label.setText(self.playback_text())
        # sim -> screen: from when the pipeline had the sim's sector (when the stream says), else from
        # when the scan was published
        wall = frame.header.get("sim_wall_ns") or frame.header.get("wall_time_ns")
        self._paint_wall = int(wall) if isinstance(self.source, LiveSource) and wall is not None else None
        self._paint_due = True
        self.hud_stats.prepared(time.perf_counter() - t0)
        self.view.update()

    def export_scan(self, folder: str | Path = ".") -> Path | None:
        """Write the scan on screen, every field, as a PCD in ``folder``; returns its path (None when no
        scan is shown). The HUD's first line says where it went. For a rig: one PCD of every sensor
        that is on, in the vehicle frame with a ``sensor`` field, and a JSON naming the sensors
        (:meth:`RigLayers.export`)."""
        frame = self.current
        if frame is None or frame.points is None:
            return None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        if self.rig.active:
            path = self.rig.export(Path(folder) / f"rt-lidar-rig-{stamp}.pcd")
        else:
            name = f"rt-lidar-scan-{frame.header.get('seq', 0)}-{stamp}.pcd"
            path = write_pcd(Path(folder) / name, np.ascontiguousarray(frame.points))
        self.exported = path
        return path

    def pick_at(self, x: float, y: float, follow: bool = False) -> int | None:
        """Pick the point drawn at view position (``x``, ``y``): mark it and show its fields; returns its
        index in the scan on screen (for a rig: in the scan of :attr:`picked_sensor`, of the sensors that
        are on). A click on no point clears the pick; a pick follows new scans (the point at that place
        on screen, ``follow``) until then, hidden while no point is there."""
        frame, shown, index, layer = self.current, self._shown, None, None
        args = (self.view.mvp(), self.view.width(), self.view.height(), x, y)
        if self.rig.active:
            got = self.rig.pick(*args)
            if got is not None:
                layer, index = got
                frame, shown = layer.frame, layer.positions
        elif frame is not None and frame.points is not None and len(shown):
            index = pick_point(shown, *args)
        self.picked = index
        self.picked_sensor = layer.name if layer is not None else None
        if not follow:
            self._pick_xy = (x, y) if index is not None else None
        if index is None or frame is None or frame.points is None:
            self.marker.setData(color=(*_MARKER_RGB, 0.0))
            self.pick_label.setVisible(False)
        else:
            self.marker.setData(pos=shown[index : index + 1].copy(), color=(*_MARKER_RGB, 1.0))
            text = describe_point(frame.points[index], frame.header)
            if layer is not None:
                text += "\n" + vehicle_point_text(layer, index)
            seq = frame.header.get("seq", "-")
            self.pick_label.setText(f"{text}\nscan     seq {seq}  (follows new scans; click: another)")
            self.pick_label.adjustSize()
            self.pick_label.move(8, max(8, self.view.height() - self.pick_label.height() - 8))
            self.pick_label.setVisible(True)
        self.view.update()
        return index

    def _slider_moved(self, index: int) -> None:
        """The time slider was dragged, clicked or stepped with its keys: show that scan."""
        if isinstance(self.source, RecordingSource):
            self.source.seek(index)
            self.step_requested = True  # shown even while paused

    def playback_text(self) -> str:
        """Where the recording's player is: recorded time and scan number (empty for a live stream)."""
        src = self.source
        if not isinstance(src, RecordingSource) or src.index < 0:
            return ""
        return f"{src.time_s(src.index):7.2f} / {src.duration_s:.2f} s   scan {src.index + 1}/{len(src)}"

    def _show_range_panel(self) -> None:
        frame, positions = self.current, self._positions
        ly = self.rig.panel_layer()
        if ly is not None:
            frame, positions = ly.frame, ly.sensor_positions
        if frame is None or frame.points is None:
            return
        # no finer than the label shows it: the columns past its width would be scaled away
        width = max(256, round(self.range_label.width() * self.range_label.devicePixelRatioF()))
        rgb = range_panel_rgb(frame.points, frame.header, positions, max_columns=width)
        pixmap = QtGui.QPixmap.fromImage(_qimage(rgb))
        square = bool(frame.header.get("elevation_span_deg"))  # an angle grid: keep its pixels square
        self.range_label.setScaledContents(not square)
        if square:
            pixmap = pixmap.scaled(self.range_label.size(), _KEEP_ASPECT, _FAST)
        self.range_label.setPixmap(pixmap)

    def _show_camera(self, frame: StreamFrame) -> None:
        if frame.rgb is None:
            return
        self._camera = frame
        if self.panels.isVisible():  # else drawn when the panels are turned on
            self._draw_camera()
        self._screenshot_if_ready()

    def _draw_camera(self) -> None:
        frame = self._camera
        if frame is None or frame.rgb is None:
            return
        self.camera_label.setPixmap(QtGui.QPixmap.fromImage(_qimage(frame.rgb)))
        self.camera_label.setVisible(True)
        if frame.mask is not None:
            self.mask_label.setPixmap(QtGui.QPixmap.fromImage(_qimage(intensity_mask_rgb(frame.mask))))
            self.mask_label.setVisible(True)

    def _painted(self) -> None:
        if not self._paint_due:
            return
        self._paint_due = False
        self.hud_stats.painted(self.view.paint_s)
        self.hud_stats.shown(self._paint_wall)
        self._screenshot_if_ready()

    def _screenshot_if_ready(self) -> None:
        opts = self.options
        if not opts.screenshot or self.hud_stats.frames_shown < opts.frames:
            return
        if opts.screenshot_camera and self._camera is None:
            return
        QtCore.QTimer.singleShot(0, self.save_screenshot_and_quit)

    def set_color_mode(self, mode: str) -> None:
        """Switch the colour mode and recolour the current scan (its positions and range panel stay)."""
        if mode not in COLOR_MODES:
            raise ValueError(f"unknown colour mode '{mode}'")
        self.color_mode = mode
        self.rig.recolor(mode, self.scales)
        frame = self.current
        if frame is not None and frame.points is not None and "sensor" not in frame.header:
            scales = self.scales(frame.header)
            self.colors = self.buffers.colors(frame.points, mode, scales, self._positions)
            self.scatter.setData(color=self.colors)
            self.view.update()

    # -- HUD ----------------------------------------------------------------------------------------
    def hud_text(self) -> str:
        """The HUD's text (also what the tests read)."""
        h = self.current.header if self.current else {}
        lat = self.hud_stats.latency_ms()
        lat_s = f"{lat:6.1f} ms (p95 {self.hud_stats.latency_ms(95):.1f})" if lat is not None else "   -"
        state = "PAUSED" if self.paused else "playing" if isinstance(self.source, RecordingSource) else "live"
        if isinstance(self.source, LiveSource) and not self.source.connected:
            state = f"waiting for stream ({self.source.subscriber.silent_s:.0f} s)"
        lines = [
            f"{self.source.label}  [{state}]",
            *([f"exported {self.exported}"] if self.exported is not None else []),
            *([RIG_EXPORT_NOTE] if self.exported is not None and self.rig.active else []),
            f"fps      {self.hud_stats.fps:6.1f}",
            f"latency  {lat_s}",
            f"frame    {frame_time_text(self.hud_stats)}",
            f"points   {self.rig.visible_points() if self.rig.active else int(h.get('n', 0)):,}",
            *self.rig.hud_lines(),
            f"dropped  {self.dropped}",
            *bad_frame_lines(self.source),
            f"seq      {h.get('seq', '-')}   preset {h.get('preset', '-')}",
            f"stamps   {stamp_text(h)}",
            *live_lines(h),
            f"colour   {self.color_mode}   size {self.point_size:g}   (H: help)",
            f"         {color_legend(self.color_mode, self.scales(h))}",
        ]
        if self.driver is not None and self.driver.last_sent is not None:
            c = self.driver.last_sent
            lines.append(f"drive    throttle {c.throttle:+.2f} steer {c.steering:+.2f} brake {c.brake:.1f}")
        if self.driver is not None:
            lines.append(f"link     {self.driver.sink.status}")
        return "\n".join(lines)

    @property
    def dropped(self) -> int:
        """Frames published but never painted."""
        return self.source.dropped

    def _rig_toggled(self) -> None:
        if self._pick_xy is not None:  # a pick never stays on a sensor turned off
            self.pick_at(*self._pick_xy, follow=True)
        if self.panels.isVisible():
            self._show_range_panel()
        self._update_hud()

    def _update_hud(self) -> None:
        self._hud_at = time.monotonic()
        self.hud.setText(self.hud_text())
        self.hud.adjustSize()

    # -- keys ---------------------------------------------------------------------------------------
    def _key(self, ev: Any, down: bool) -> bool:
        name = key_name(ev)
        if self.driver is not None and self.driver.handles(name):
            if not ev.isAutoRepeat():
                (self.driver.press if down else self.driver.release)(name)
            return True
        if not down:
            return False
        return self.handle_key(name)

    def set_point_size(self, size: float) -> None:
        """Point size in pixels (1..20), every layer."""
        self.point_size = min(max(size, 1.0), 20.0)
        self.scatter.setData(size=self.point_size)
        self.rig.set_point_size(self.point_size)

    def handle_key(self, name: str) -> bool:
        """Act on a viewer shortcut; False when ``name`` is none."""
        if name in {str(i) for i in range(1, len(COLOR_MODES) + 1)}:
            self.set_color_mode(COLOR_MODES[int(name) - 1])
        elif name == "c":
            self.set_color_mode(COLOR_MODES[(COLOR_MODES.index(self.color_mode) + 1) % len(COLOR_MODES)])
        elif name in {"+", "="}:
            self.set_point_size(self.point_size + 1.0)
        elif name == "-":
            self.set_point_size(self.point_size - 1.0)
        elif self.rig.toggle_key(name):
            pass
        elif name == "space":
            self.paused = not self.paused
            if isinstance(self.source, RecordingSource):
                self.source.playing = not self.paused
        elif name in {"n", "."}:
            self.step_requested = True
            if isinstance(self.source, RecordingSource):
                self.source.seek(self.source.index + 1)
        elif name == "," and isinstance(self.source, RecordingSource):
            self.step_requested = True
            self.source.seek(self.source.index - 1)
        elif name == "i":
            self.panels.setVisible(not self.panels.isVisible())
            if self.panels.isVisible():  # they are not kept up to date while hidden
                self._show_range_panel()
                self._draw_camera()
        elif name == "r":
            if isinstance(self.source, LiveSource):
                self.source.reconnect()
            self.view.setCameraPosition(distance=45.0, elevation=28.0, azimuth=180.0)
        elif name == "p":
            self.grab().save(f"rt-lidar-{time.strftime('%Y%m%d-%H%M%S')}.png")
        elif name == "e":
            self.export_scan()
        elif name in {"h", "f1", "?"}:
            self.help.setVisible(not self.help.isVisible())
            self._place_help()
        elif name in {"q", "esc"}:
            self.close()
        else:
            return False
        self._update_hud()
        return True

    # -- screenshots --------------------------------------------------------------------------------
    def save_screenshot_and_quit(self) -> None:
        """Save the whole window as PNG to ``options.screenshot`` and close."""
        if self.options.screenshot:
            self.timer.stop()
            self._update_hud()
            self.grab().save(self.options.screenshot)
            self.options = dataclasses.replace(self.options, screenshot=None)
        self.close()

    def closeEvent(self, ev: Any) -> None:
        """Stop timers and release the source."""
        self.timer.stop()
        if self.driver is not None:
            self.drive_timer.stop()
        self.source.close()
        super().closeEvent(ev)


def exit_with_message(code: int, message: str) -> int:
    """The viewer's exit code; a ``--screenshot`` run that ended short says why: a
    :class:`RecordingError` (one line, exit 2) for unreadable scans, a one-line message on stderr
    otherwise."""
    if code == 2:
        raise RecordingError(message)
    if message:
        print(f"rt-lidar view: {'error' if code else 'note'}: {message}", file=sys.stderr)
    return code
