"""Every sensor of a rig in one view: a GL layer per sensor, placed on the vehicle by its mount.

A rig's stream (:mod:`rt_lidar.rig.stream`) tags each scan with ``sensor``, ``sensor_index`` and
``mount`` (xyz in m, roll / pitch / yaw in degrees, vehicle frame x forward, y left, z up). A scan's
points are in its sensor's frame; its layer shows them at ``R(mount) p + xyz``, the transform the
rig's ``/tf_static`` carries. Each layer keeps its sensor's newest scan, its own buffers (so a
sensor's colours survive the next sensor's scan), a check box (and a key: F2 for the first sensor, F3
for the next, ...) that turns it on and off, and the figures of its HUD line: scans a second, points,
age of the scan on screen. The range panel shows the first sensor that is on.

Picking (a click) and export (key E) act on what is drawn: the points of the sensors that are on, in
the vehicle frame. A pick is the point nearest the camera under the cursor among every layer that is
on, and says which sensor it is of; an export is one PCD of every layer that is on, x / y / z in the
vehicle frame, every other field as the sensor sent it, and a field ``sensor`` (the sensor's index in
the rig file), with a JSON beside it naming each index's sensor and mount.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph.opengl as gl
from pyqtgraph.Qt import QtCore, QtWidgets

from rt_lidar.sinks.pcd import write_pcd
from rt_lidar.sinks.stream import StreamFrame
from rt_lidar.unreal_bridge.world import Pose
from rt_lidar.viewer.colors import SENSOR_COLOR_NAMES, SENSOR_COLORS, CloudBuffers, ColorScales
from rt_lidar.viewer.picking import pick_point, project_points

__all__ = ["RIG_EXPORT_NOTE", "TOGGLE_KEYS", "RigLayers", "SensorLayer", "mount_matrix", "vehicle_point_text"]

RIG_EXPORT_NOTE = "         (the sensors on: vehicle frame, field 'sensor' = rig index; the .json names them)"
"""The HUD line under ``exported PATH`` after a rig's export (key E)."""
TOGGLE_KEYS = tuple(f"f{i}" for i in range(2, 10))
"""Keys that turn the rig's sensors 1..8 on and off (F2 .. F9)."""


def mount_matrix(header: dict[str, Any]) -> np.ndarray:
    """The (4, 4) vehicle <- sensor transform of a scan header's ``mount`` (identity without one)."""
    mount = header.get("mount")
    if not isinstance(mount, dict):
        return np.eye(4)
    x, y, z = (float(v) for v in mount.get("xyz", (0.0, 0.0, 0.0)))
    r, p, w = (math.radians(float(v)) for v in mount.get("rpy_deg", (0.0, 0.0, 0.0)))
    return Pose.from_xyz_rpy(x, y, z, roll=r, pitch=p, yaw=w).matrix()


def vehicle_point_text(ly: SensorLayer, index: int) -> str:
    """The lines a pick of ``ly``'s point ``index`` adds: its sensor, and where it is on the vehicle."""
    h = ly.frame.header if ly.frame is not None else {}
    x, y, z = (float(v) for v in ly.positions[index])
    colour = SENSOR_COLOR_NAMES[ly.index % len(SENSOR_COLOR_NAMES)]
    return (
        f"sensor   {ly.name} ({h.get('preset', '-')}, {colour})   seq {h.get('seq', '-')}\n"
        f"vehicle  x {x:.3f}  y {y:.3f}  z {z:.3f} m   (the point above: in the sensor's frame)"
    )


@dataclass(eq=False)  # compared by identity: it holds arrays and Qt objects
class SensorLayer:
    """One sensor's layer: its GL item, buffers, newest scan and HUD figures."""

    name: str
    index: int
    item: Any
    box: Any
    buffers: CloudBuffers = field(default_factory=CloudBuffers)
    frame: StreamFrame | None = None
    sensor_positions: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.float32))
    """The scan's points in the sensor's frame (the layer's buffer)."""
    positions: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.float32))
    """The same points in the vehicle frame, as drawn."""
    colors: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.float32))
    arrivals: deque[float] = field(default_factory=lambda: deque(maxlen=40))
    _vehicle: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.float32))

    @property
    def visible(self) -> bool:
        """Drawn (its check box is ticked)."""
        return bool(self.box.isChecked())

    def rate_hz(self, now: float | None = None) -> float:
        """Scans a second over the last few (0 with fewer than two, or when it went silent)."""
        now = time.monotonic() if now is None else now
        a = self.arrivals
        if len(a) < 2 or now - a[-1] > 2.0:
            return 0.0
        span = a[-1] - a[0]
        return (len(a) - 1) / span if span > 0 else 0.0

    def place(self, frame: StreamFrame) -> np.ndarray:
        """Put ``frame``'s points into the vehicle frame (the layer's reused buffers); returns them."""
        assert frame.points is not None
        pts = frame.points
        n = pts.shape[0]
        self.sensor_positions = self.buffers.positions(pts)
        if self._vehicle.shape[0] < n:
            self._vehicle = np.empty((n + n // 8, 3), np.float32)
        m = mount_matrix(frame.header).astype(np.float32)
        out = self._vehicle[:n]
        np.matmul(self.sensor_positions, m[:3, :3].T, out=out)
        out += m[:3, 3]
        self.positions = out
        return out

    def hud_line(self, now_wall_ns: int | None = None, now: float | None = None) -> str:
        """``name  preset  rate  points  age  on/off`` (age: since the scan on screen was published)."""
        h = self.frame.header if self.frame is not None else {}
        wall = h.get("wall_time_ns")
        now_wall_ns = time.time_ns() if now_wall_ns is None else now_wall_ns
        age = f"{(now_wall_ns - int(wall)) * 1e-6:6.0f} ms" if wall is not None else "     - ms"
        colour = SENSOR_COLOR_NAMES[self.index % len(SENSOR_COLOR_NAMES)]
        state = "on " if self.visible else "off"
        key = TOGGLE_KEYS[self.index].upper() if self.index < len(TOGGLE_KEYS) else "-"
        return (
            f"{state} {self.name:<12.12} {h.get('preset', '-')!s:<9.9} {self.rate_hz(now):5.1f} Hz "
            f"{int(h.get('n', 0)):>9,} pts  age {age}  ({colour}, {key})"
        )


class RigLayers:
    """The layers of a rig's sensors in ``view``, made as each sensor's first scan arrives; check boxes
    in a panel at the view's top right turn them on and off (``on_toggle`` is told)."""

    def __init__(self, view: Any, point_size: float, on_toggle: Callable[[], None] | None = None) -> None:
        self.view = view
        self.point_size = point_size
        self.on_toggle = on_toggle
        self.layers: dict[str, SensorLayer] = {}
        self.panel = QtWidgets.QWidget(view)
        self.panel.setStyleSheet("background: rgba(0,0,0,150); color: #e8e8e8;")
        self._box_column = QtWidgets.QVBoxLayout(self.panel)
        self._box_column.setContentsMargins(6, 4, 6, 4)
        self.panel.setVisible(False)

    @property
    def active(self) -> bool:
        """A rig's scans came (the single-sensor cloud is not used)."""
        return bool(self.layers)

    def ordered(self) -> list[SensorLayer]:
        """Layers in the rig file's order."""
        return sorted(self.layers.values(), key=lambda ly: (ly.index, ly.name))

    def layer(self, frame: StreamFrame) -> SensorLayer:
        """The layer of ``frame``'s sensor (made on its first scan)."""
        name = str(frame.header["sensor"])
        got = self.layers.get(name)
        if got is not None:
            return got
        index = int(frame.header.get("sensor_index", len(self.layers)))
        item = gl.GLScatterPlotItem(
            pos=np.zeros((1, 3), np.float32), color=(1.0, 1.0, 1.0, 0.0), size=self.point_size, pxMode=True
        )
        item.setGLOptions("opaque")
        self.view.addItem(item)
        key = TOGGLE_KEYS[index].upper() if index < len(TOGGLE_KEYS) else ""
        box = QtWidgets.QCheckBox(f"{name}  {key}".rstrip())
        box.setChecked(True)
        box.setFocusPolicy(QtCore.Qt.FocusPolicy.NoFocus)  # the keys stay with the view (driving)
        r, g, b = (int(255 * c) for c in SENSOR_COLORS[index % len(SENSOR_COLORS)][:3])
        box.setStyleSheet(f"color: rgb({r},{g},{b}); background: transparent;")
        ly = SensorLayer(name, index, item, box)
        box.toggled.connect(lambda on, ly=ly: self._toggled(ly, on))
        self.layers[name] = ly
        for i, other in enumerate(self.ordered()):  # the boxes in rig order
            self._box_column.insertWidget(i, other.box)
        self.panel.setVisible(True)
        self.place_panel()
        return ly

    def place_panel(self) -> None:
        """Keep the check boxes at the view's top right."""
        self.panel.adjustSize()
        self.panel.move(max(0, self.view.width() - self.panel.width() - 8), 8)

    def show(self, frame: StreamFrame, mode: str, scales: ColorScales) -> SensorLayer:
        """Draw ``frame`` (a rig sensor's scan) on its layer in colour ``mode``; returns the layer."""
        assert frame.points is not None
        ly = self.layer(frame)
        ly.frame = frame
        ly.arrivals.append(time.monotonic())
        pos = ly.place(frame)
        ly.colors = ly.buffers.colors(frame.points, mode, scales, ly.sensor_positions)
        ly.item.setData(pos=pos, color=ly.colors)
        return ly

    def recolor(self, mode: str, scales: Callable[[dict[str, Any]], ColorScales]) -> None:
        """Recolour every layer's scan on screen."""
        for ly in self.layers.values():
            if ly.frame is not None and ly.frame.points is not None:
                ly.colors = ly.buffers.colors(
                    ly.frame.points, mode, scales(ly.frame.header), ly.sensor_positions
                )
                ly.item.setData(color=ly.colors)

    def set_point_size(self, size: float) -> None:
        """Point size of every layer."""
        self.point_size = size
        for ly in self.layers.values():
            ly.item.setData(size=size)

    def set_visible(self, name: str, on: bool) -> None:
        """Turn sensor ``name``'s layer on or off."""
        self.layers[name].box.setChecked(on)

    def toggle_key(self, key: str) -> bool:
        """F2.. turn sensor 1.. on or off; False when ``key`` is no such key (or no such sensor)."""
        if key not in TOGGLE_KEYS:
            return False
        for ly in self.layers.values():
            if ly.index == TOGGLE_KEYS.index(key):
                ly.box.setChecked(not ly.box.isChecked())
                return True
        return False

    def _toggled(self, ly: SensorLayer, on: bool) -> None:
        ly.item.setVisible(on)
        self.view.update()
        if self.on_toggle is not None:
            self.on_toggle()

    def panel_layer(self) -> SensorLayer | None:
        """The layer the range panel shows: the first in rig order that is on and has a scan (None when
        no rig, or none is on)."""
        return next((ly for ly in self.ordered() if ly.visible and ly.frame is not None), None)

    def visible_points(self) -> int:
        """Points of the scans on screen, layers that are on."""
        return sum(int(ly.frame.header.get("n", 0)) for ly in self.layers.values() if ly.frame and ly.visible)

    def shown(self) -> list[SensorLayer]:
        """The layers on screen: on, with a scan; in rig order."""
        return [
            ly for ly in self.ordered() if ly.visible and ly.frame is not None and ly.frame.points is not None
        ]

    def pick(
        self, mvp: np.ndarray, width: int, height: int, x: float, y: float, radius_px: float = 6.0
    ) -> tuple[SensorLayer, int] | None:
        """The point drawn at screen position (``x``, ``y``) among the layers that are on (in the vehicle
        frame, as drawn): within ``radius_px``, the nearest to the camera; (its layer, its index in that
        layer's scan), or None."""
        best: tuple[float, SensorLayer, int] | None = None
        for ly in self.shown():
            i = pick_point(ly.positions, mvp, width, height, x, y, radius_px)
            if i is None:
                continue
            w = float(project_points(ly.positions[i : i + 1], mvp, width, height)[0, 2])
            if best is None or w < best[0]:
                best = (w, ly, i)
        return None if best is None else (best[1], best[2])

    def export(self, path: str | Path) -> Path | None:
        """Write the scans on screen (the layers that are on) as one PCD: every field, x / y / z in the
        vehicle frame as drawn, plus ``sensor`` (uint8, the sensor's index in the rig file); and beside
        it a ``.json``: which sensor each index is, its preset, mount, scan seq and point count. ``path``
        gets ``-<highest seq>`` before its suffix. Returns the PCD's path (None when no layer that is
        on has a scan)."""
        layers = self.shown()
        if not layers:
            return None
        seq = max(int((ly.frame.header if ly.frame else {}).get("seq", 0)) for ly in layers)
        path = Path(path)
        path = path.with_name(f"{path.stem}-{seq}{path.suffix}")
        parts, sensor = [], []
        for ly in layers:
            assert ly.frame is not None and ly.frame.points is not None
            pts = np.array(ly.frame.points)  # a copy: x / y / z become the vehicle frame's
            for k, axis in enumerate("xyz"):
                pts[axis] = ly.positions[: pts.size, k]
            parts.append(pts)
            sensor.append(np.full(pts.size, ly.index, np.uint8))
        path = write_pcd(path, np.concatenate(parts), {"sensor": np.concatenate(sensor)})
        about = {
            "frame": "vehicle (x forward, y left, z up); field 'sensor' = index below",
            "sensors": [
                {
                    "index": ly.index,
                    "name": ly.name,
                    "preset": (ly.frame.header if ly.frame else {}).get("preset"),
                    "mount": (ly.frame.header if ly.frame else {}).get("mount"),
                    "seq": (ly.frame.header if ly.frame else {}).get("seq"),
                    "points": int(p.size),
                }
                for ly, p in zip(layers, parts, strict=True)
            ],
        }
        path.with_suffix(".json").write_text(json.dumps(about, indent=2, default=str))
        return path

    def hud_lines(self) -> list[str]:
        """A HUD line per sensor, in rig order."""
        now_ns, now = time.time_ns(), time.monotonic()
        return [f"sensor   {ly.hud_line(now_ns, now)}" for ly in self.ordered()]
