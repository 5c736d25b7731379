"""A rig's stream in the viewer: the subscriber keeps every sensor's newest scan, the window draws each
on its own layer in the vehicle frame (by the header's mount), colours by sensor, toggles sensors and
gives each a HUD line."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from pyqtgraph.Qt import QtCore

from rt_lidar.points import POINT_DTYPE
from rt_lidar.rig import load_rig
from rt_lidar.rig.stream import RigStream
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.stream import StreamFrame, StreamSubscriber
from rt_lidar.viewer.colors import SENSOR_COLORS
from rt_lidar.viewer.rig_layers import mount_matrix
from rt_lidar.viewer.window import ViewerWindow, WindowOptions

EXAMPLE = Path(__file__).parents[3] / "docs" / "rigs" / "roof-and-corners.toml"
NAMES = ("top", "front_left", "front_right")


def _scan(n: int, index: int = 0):
    from rt_lidar.pipeline.assembler import Scan

    pts = np.zeros(n, POINT_DTYPE)
    pts["x"] = np.linspace(1, 30, n, dtype=np.float32)
    pts["y"] = np.linspace(-3, 3, n, dtype=np.float32)
    pts["intensity"] = np.arange(n) % 255
    pts["ring"] = np.arange(n) % 16
    return Scan(index, index * 100_000_000, pts, fired=n, dropped=0)


def test_the_subscriber_keeps_the_newest_scan_of_every_sensor(tmp_path: Path) -> None:
    rig = load_rig(EXAMPLE)
    stream = RigStream(f"ipc://{tmp_path}/rig.sock", rig)
    stream.open()
    sinks = {s.name: stream.sink(s.name) for s in rig.sensors}
    for s in rig.sensors:
        sinks[s.name].open(SinkContext(preset=s.preset))
    try:
        with StreamSubscriber(stream.address) as sub:
            end = time.monotonic() + 10.0
            while not sub.poll(50):  # PUB drops everything before the subscription arrives
                assert time.monotonic() < end, "subscriber never joined"
                sinks["top"].write(_scan(100))
            skipped = sub.stats.skipped
            sinks["top"].write(_scan(100, 1))
            sinks["front_left"].write(_scan(200, 1))
            sinks["top"].write(_scan(300, 2))  # replaces top's scan 1 (a skip); front_left's stays
            got: dict[str, StreamFrame] = {}
            while len(got) < 3 and time.monotonic() < end:
                got.update(sub.poll(100))
    finally:
        stream.close()
    assert set(got) == {"scan", "scan/top", "scan/front_left"}
    assert got["scan/top"].header["n"] == 300 and got["scan/front_left"].header["n"] == 200
    assert got["scan"] is got["scan/top"]  # the newest of any sensor
    assert sub.stats.skipped - skipped == 1 and sub.stats.gaps == 0


class _RigFrames:
    """A source that hands out one scan of each of three rig sensors when asked (``more`` times)."""

    label = "rig"
    dropped = 0

    def __init__(self) -> None:
        rig = load_rig(EXAMPLE)
        self.frames: dict[str, StreamFrame] = {}
        for i, s in enumerate(rig.sensors):
            pts = _scan(1000 * (i + 1)).points
            mount = s.entry.mount
            header = {"kind": "scan", "n": int(pts.size), "seq": i, "sensor": s.name, "sensor_index": i,
                      "sensors": 3, "preset": s.preset.name, "wall_time_ns": time.time_ns(),
                      "mount": {"xyz": list(mount.xyz), "rpy_deg": list(mount.rpy_deg)},
                      "elevations_deg": list(np.linspace(-15, 15, 16)), "columns": 512}  # fmt: skip
            self.frames[f"scan/{s.name}"] = StreamFrame(header, points=pts)
        self.more = 0

    def poll(self):
        if self.more <= 0:
            return {}
        self.more -= 1
        return {**self.frames, "scan": self.frames["scan/front_right"]}

    def close(self):
        pass


def test_every_sensor_on_its_layer_in_the_vehicle_frame_coloured_toggled_and_on_the_hud(qtbot) -> None:
    src = _RigFrames()
    win = ViewerWindow(src, WindowOptions(size=(900, 640), color_mode="sensor"))  # type: ignore[arg-type]
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    src.more = 1
    qtbot.waitUntil(lambda: len(win.rig.layers) == 3, timeout=10_000)
    layers = win.rig.ordered()
    assert [ly.name for ly in layers] == list(NAMES)
    assert not win.scatter.visible()  # the single-sensor cloud stays out of a rig's view
    rig = load_rig(EXAMPLE)
    for ly, s in zip(layers, rig.sensors, strict=True):
        frame = src.frames[f"scan/{s.name}"]
        p = frame.points
        xyz = np.stack([p["x"], p["y"], p["z"]], 1).astype(np.float64)
        want = xyz @ s.mount.matrix()[:3, :3].T + s.mount.position  # the rig's /tf_static transform
        np.testing.assert_allclose(ly.item.pos, want, atol=1e-4)
        np.testing.assert_allclose(mount_matrix(frame.header), s.mount.matrix(), atol=1e-12)
        assert np.all(ly.item.color == SENSOR_COLORS[ly.index])  # colour mode "sensor"
    # the front-left VLP-16 looks 45 deg to the left: its x axis points forward-left on the vehicle
    fl = layers[1].item.pos
    assert fl[-1, 0] > 2.2 and fl[-1, 1] > 0.9
    # a HUD line per sensor; the points line counts what is on screen
    hud = win.hud_text()
    assert f"points   {1000 + 2000 + 3000:,}" in hud
    for s in rig.sensors:
        assert any(
            ln.startswith("sensor   on ") and s.name in ln and s.preset.name in ln for ln in hud.splitlines()
        )
    # the range panel shows the first sensor that is on
    assert win.rig.panel_layer() is layers[0] and not win.range_label.pixmap().isNull()
    # F3 turns the second sensor off (its check box follows), the check box turns it on again
    qtbot.keyPress(win.view, QtCore.Qt.Key.Key_F3)
    assert not layers[1].visible and not layers[1].item.visible() and layers[0].item.visible()
    assert f"points   {1000 + 3000:,}" in win.hud_text() and "sensor   off front_left" in win.hud_text()
    layers[1].box.click()
    assert layers[1].item.visible() and "sensor   on  front_left" in win.hud_text()
    qtbot.keyPress(win.view, QtCore.Qt.Key.Key_F2)  # the roof sensor off: the panel shows the next one
    assert win.rig.panel_layer() is layers[1]
    qtbot.keyPress(win.view, QtCore.Qt.Key.Key_F2)
    # another colour mode recolours every layer from its own scan
    win.handle_key("3")
    assert win.color_mode == "ring"
    assert len(np.unique(layers[0].item.color, axis=0)) == 16
    # the newest scans replace each sensor's own
    src.frames["scan/top"].header["n"] = 1000
    src.more = 1
    qtbot.waitUntil(lambda: win.hud_stats.frames_shown >= 2, timeout=10_000)
    assert len(win.rig.layers) == 3


def test_view_takes_every_colour_mode() -> None:
    from rt_lidar.cli.view import _COLOR_MODES
    from rt_lidar.viewer.colors import COLOR_MODES

    assert _COLOR_MODES == COLOR_MODES
