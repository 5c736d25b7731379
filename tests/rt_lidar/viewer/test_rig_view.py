"""A rig's stream in the viewer: the subscriber keeps every sensor's newest scan, the window draws each
on its own layer in the vehicle frame (by the header's mount), colours by sensor, toggles sensors and
gives each a HUD line."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from pyqtgraph.Qt import QtCore
from waiting import until

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
        with StreamSubscriber(stream.address, background=True) as sub:  # as the viewer reads
            end = time.monotonic() + 10.0
            while not sub.poll(50):  # PUB drops everything before the subscription arrives
                assert time.monotonic() < end, "subscriber never joined"
                sinks["top"].write(_scan(100))
            while sub.poll(200):  # the joining scans still on their way (a loaded machine) come first
                pass
            skipped, received = sub.stats.skipped, sub.stats.received
            sinks["top"].write(_scan(100, 1))
            sinks["front_left"].write(_scan(200, 1))
            sinks["top"].write(_scan(300, 2))  # replaces top's scan 1 (a skip); front_left's stays
            # all three read before the first poll, else top's scan 1 may be handed out unskipped
            assert until(lambda: sub.stats.received - received == 3, timeout_s=10.0)
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
            header = {
                "kind": "scan",
                "n": int(pts.size),
                "seq": i,
                "sensor": s.name,
                "sensor_index": i,
                "sensors": 3,
                "preset": s.preset.name,
                "wall_time_ns": time.time_ns(),
                "mount": {"xyz": list(mount.xyz), "rpy_deg": list(mount.rpy_deg)},
                "elevations_deg": list(np.linspace(-15, 15, 16)),
                "columns": 512,
            }
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


def _rig_window(qtbot):
    src = _RigFrames()
    win = ViewerWindow(src, WindowOptions(size=(900, 640), color_mode="sensor"))
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    src.more = 1
    qtbot.waitUntil(lambda: len(win.rig.layers) == 3, timeout=10_000)
    return src, win


def _on_screen(win: ViewerWindow, xyz: np.ndarray) -> tuple[float, float]:
    from rt_lidar.viewer.picking import project_points

    sx, sy, w = project_points(xyz[None, :], win.view.mvp(), win.view.width(), win.view.height())[0]
    assert w > 0 and 0 <= sx < win.view.width() and 0 <= sy < win.view.height()
    return float(sx), float(sy)


def test_a_pick_takes_the_sensors_that_are_on_and_names_its_sensor(qtbot) -> None:
    src, win = _rig_window(qtbot)
    top, left, _right = win.rig.ordered()
    qtbot.keyPress(win.view, QtCore.Qt.Key.Key_F2)  # top off
    qtbot.keyPress(win.view, QtCore.Qt.Key.Key_F4)  # front_right off
    x, y = _on_screen(win, left.positions[1000].copy())
    index = win.pick_at(x, y)
    assert win.picked_sensor == "front_left" and index is not None
    # the point drawn there: of front_left's scan, in the vehicle frame as drawn
    assert np.linalg.norm(left.positions[index] - left.positions[1000]) < 1.0
    np.testing.assert_allclose(win.marker.pos[0], left.positions[index])
    text = win.pick_label.text()
    assert "sensor   front_left (VLP-16" in text and "vehicle  x" in text and win.pick_label.isVisible()
    p = src.frames["scan/front_left"].points[index]
    assert f"x {float(p['x']):.3f}" in text  # the point's own fields: in its sensor's frame
    # turning its sensor off takes the pick off it (no other sensor is on: no pick)
    qtbot.keyPress(win.view, QtCore.Qt.Key.Key_F3)
    assert win.picked is None and win.picked_sensor is None and not win.pick_label.isVisible()
    # with only the roof sensor on, a click where front_left's point was finds none of front_left's
    qtbot.keyPress(win.view, QtCore.Qt.Key.Key_F2)
    win.pick_at(x, y)
    assert win.picked_sensor in (None, "top")
    # a click on the roof sensor's point picks it
    x, y = _on_screen(win, top.positions[500].copy())
    assert win.pick_at(x, y) is not None and win.picked_sensor == "top"


def test_export_writes_the_sensors_that_are_on_in_the_vehicle_frame(qtbot, tmp_path: Path) -> None:
    import json

    from rt_lidar.sinks.pcd import read_pcd, with_extras

    _src, win = _rig_window(qtbot)
    layers = win.rig.ordered()
    dtype = with_extras(np.zeros(0, POINT_DTYPE), {"sensor": np.zeros(0, np.uint8)}).dtype
    path = win.export_scan(tmp_path)
    assert path is not None and path.name.startswith("rt-lidar-rig-")
    got = read_pcd(path, dtype)
    assert got.size == 1000 + 2000 + 3000
    for ly in layers:
        mine = got[got["sensor"] == ly.index]
        assert mine.size == ly.positions.shape[0]
        xyz = np.stack([mine["x"], mine["y"], mine["z"]], 1)
        np.testing.assert_array_equal(xyz, ly.positions)  # as drawn
        assert ly.frame is not None
        np.testing.assert_array_equal(mine["intensity"], ly.frame.points["intensity"])
    about = json.loads(path.with_suffix(".json").read_text())
    assert [s["name"] for s in about["sensors"]] == list(NAMES)
    assert [s["index"] for s in about["sensors"]] == [0, 1, 2] and "vehicle" in about["frame"]
    assert f"exported {path}" in win.hud_text() and "field 'sensor'" in win.hud_text()
    # a sensor turned off is not exported
    qtbot.keyPress(win.view, QtCore.Qt.Key.Key_F3)
    (tmp_path / "second").mkdir()
    second = win.export_scan(tmp_path / "second")
    assert second is not None
    got = read_pcd(second, dtype)
    assert got.size == 1000 + 3000 and set(np.unique(got["sensor"])) == {0, 2}


def test_a_pick_is_the_point_nearest_the_camera_among_the_sensors_on() -> None:
    from rt_lidar.viewer.rig_layers import RigLayers, SensorLayer

    class _Box:
        def __init__(self, on: bool) -> None:
            self.on = on

        def isChecked(self) -> bool:
            return self.on

    rig = RigLayers.__new__(RigLayers)
    near = SensorLayer("near", 0, None, _Box(True))
    far = SensorLayer("far", 1, None, _Box(True))
    for ly, z in ((near, 2.0), (far, 5.0)):  # both straight ahead of the camera, one behind the other
        ly.frame = StreamFrame({"sensor": ly.name, "n": 2}, points=np.zeros(2, POINT_DTYPE))
        ly.positions = np.array([[0.0, 0.0, z], [3.0, 3.0, z]], np.float32)
    rig.layers = {"far": far, "near": near}
    mvp = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0]], np.float32)  # w = depth
    got = rig.pick(mvp, 100, 100, 50.0, 50.0)
    assert got is not None and got[0] is near and got[1] == 0
    near.box.on = False  # off: its point is not drawn, so not picked
    got = rig.pick(mvp, 100, 100, 50.0, 50.0)
    assert got is not None and got[0] is far and got[1] == 0
    far.box.on = False
    assert rig.pick(mvp, 100, 100, 50.0, 50.0) is None
