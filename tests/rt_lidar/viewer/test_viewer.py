"""The Qt viewer under a real X server (pytest-xvfb), fed by a live pipeline over ZeroMQ."""

from __future__ import annotations

import calendar
import time

import numpy as np
import pytest
from PIL import Image
from pyqtgraph.Qt import QtCore, QtGui

from rt_lidar.server.vehicle import BicycleModel
from rt_lidar.viewer.colors import COLOR_MODES
from rt_lidar.viewer.drive import BicycleControlSink, KeyboardDriver
from rt_lidar.viewer.sources import LiveSource, RecordingSource
from rt_lidar.viewer.window import ViewerWindow, WindowOptions

BACKGROUND = np.array([12, 12, 16])


class _Nothing:
    """A source that never has a frame (for the driving tests)."""

    label = "none"
    dropped = 0

    def poll(self):
        return {}

    def close(self):
        pass


def _window(qtbot, source, **kw) -> ViewerWindow:
    win = ViewerWindow(source, WindowOptions(size=(900, 640), **kw), kw.pop("driver", None))
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    return win


def _gl_pixels(win: ViewerWindow) -> np.ndarray:
    img = win.view.grabFramebuffer().convertToFormat(QtGui.QImage.Format.Format_RGB888)
    arr = np.frombuffer(img.constBits(), np.uint8, img.sizeInBytes())
    return arr.reshape(img.height(), img.bytesPerLine())[:, : 3 * img.width()].reshape(img.height(), -1, 3)


def test_runs_on_xcb_not_offscreen(qapp) -> None:
    assert QtGui.QGuiApplication.platformName() == "xcb"


def test_live_pipeline_frames_colours_and_screenshot(qtbot, live_stream, tmp_path) -> None:
    shot = tmp_path / "viewer.png"
    win = _window(qtbot, LiveSource(live_stream.address), screenshot=None)
    qtbot.waitUntil(lambda: win.hud_stats.frames_shown >= 3, timeout=30_000)
    frame = win.current
    assert frame is not None and frame.points is not None
    assert frame.header["preset"] == "VLP-16" and frame.points.size > 10_000
    assert f"{frame.points.size:,}" in win.hud_text() and win.hud_stats.fps > 0
    assert win.hud_stats.latency_ms() is not None

    # the camera frames of the stream reach their panels
    # (a camera frame every 3rd scan, rendered by a painter process: slow when the cores are busy)
    def camera_shown() -> bool:
        return win.camera_label.pixmap() is not None and not win.camera_label.pixmap().isNull()

    qtbot.waitUntil(camera_shown, timeout=30_000)
    # colour modes: the same scan, different colour arrays
    win.handle_key("space")  # pause so every mode colours the same scan
    frame = win.current  # a newer scan may have come since the checks above
    assert frame is not None and frame.points is not None
    colours = {}
    for i, mode in enumerate(COLOR_MODES, start=1):
        win.handle_key(str(i))
        assert win.color_mode == mode
        c = win.colors.copy()
        assert c.shape == (frame.points.size, 4) and c.dtype == np.float32
        assert np.all((c >= 0) & (c <= 1))
        colours[mode] = c
    for a in ("intensity", "ring", "range"):
        for b in ("intensity", "ring", "range"):
            if a < b:
                assert not np.allclose(colours[a], colours[b]), (a, b)
    assert len(np.unique(colours["ring"], axis=0)) >= 12  # one colour per ring of 16
    # the cloud is on screen: a good share of non-background pixels
    qtbot.wait(300)
    px = _gl_pixels(win)
    share = float(np.mean(np.abs(px.astype(int) - BACKGROUND).sum(-1) > 40))
    assert share > 0.05, f"only {share:.1%} of the GL view is not background"
    win.grab().save(str(shot))
    full = np.asarray(Image.open(shot).convert("RGB"))
    assert full.shape[0] > 400 and float(np.mean(np.abs(full.astype(int) - BACKGROUND).sum(-1) > 40)) > 0.05


@pytest.mark.parametrize("live_stream", [0], indirect=True)
def test_throttled_viewer_counts_drops_and_never_holds_the_sim(qtbot, live_stream) -> None:
    shown = []
    win = _window(qtbot, LiveSource(live_stream.address), max_fps=2.0)
    orig = win.show_scan
    win.show_scan = lambda f: (shown.append(f.seq), orig(f))[1]  # type: ignore[method-assign]
    qtbot.waitUntil(lambda: len(shown) >= 1, timeout=30_000)
    qtbot.wait(3000)
    assert win.dropped > 0 and f"dropped  {win.dropped}" in win.hud_text()
    assert win.hud_stats.fps < 3.0
    sub = win.source.subscriber  # type: ignore[attr-defined]
    # every frame numbered from the first one shown to the last one was shown or counted as dropped
    # (plus those the reader thread took before the first one shown and after the last one shown:
    # at 10 Hz against a 0.5 s tick, a handful on each side)
    surplus = len(shown) + sub.stats.dropped - (shown[-1] - shown[0] + 1)
    assert 0 <= surplus <= 12, (len(shown), sub.stats, shown[0], shown[-1])
    summary = live_stream.stop()
    # the sim never waits for the viewer: a send that waited for the 2 fps window would take ~0.5 s,
    # one that drops takes well under a frame period (the real-time factor itself is load, not behaviour)
    assert summary["publish_ms_mean"] < 50.0


class _Scans:
    """A source that hands out the same synthetic scan whenever asked (``more`` times)."""

    label = "scans"
    dropped = 0

    def __init__(self, n: int) -> None:
        from rt_lidar.points import POINT_DTYPE
        from rt_lidar.sinks.stream import StreamFrame

        rng = np.random.default_rng(0)
        pts = np.zeros(n, POINT_DTYPE)
        az = rng.uniform(-np.pi, np.pi, n)
        pts["x"], pts["y"], pts["z"] = 15 * np.cos(az), 15 * np.sin(az), rng.uniform(-2, 2, n)
        pts["intensity"] = rng.uniform(0, 255, n)
        pts["ring"] = np.arange(n) % 16
        header = {
            "kind": "scan",
            "n": n,
            "seq": 0,
            "elevations_deg": list(np.linspace(-15, 15, 16)),
            "columns": 512,
            "range_max_m": 80.0,
        }
        self.frame = StreamFrame(header, points=pts)
        self.more = 0

    def poll(self):
        if self.more <= 0:
            return {}
        self.more -= 1
        return {"scan": self.frame}

    def close(self):
        pass


def test_scan_goes_to_gl_without_copies_recolours_in_place_and_panels_follow_visibility(qtbot) -> None:
    from rt_lidar.viewer.colors import point_colors, point_positions

    src = _Scans(20_000)
    win = _window(qtbot, src)
    src.more = 1
    qtbot.waitUntil(lambda: win.hud_stats.frames_shown >= 1, timeout=10_000)
    pts = src.frame.points
    # setData kept the viewer's own float32 buffers (no conversion copy)
    assert win.scatter.pos is win._positions and win.scatter.color is win.colors
    assert np.shares_memory(win.scatter.pos, win.buffers._pos)
    np.testing.assert_array_equal(win.scatter.pos, point_positions(pts))
    scales = win.scales(src.frame.header)
    np.testing.assert_array_equal(win.colors, point_colors(pts, "intensity", scales))
    # the HUD says where a frame's time went
    assert win.hud_stats.prepare_ms() is not None and win.hud_stats.paint_ms() is not None
    assert "ms prepare +" in win.hud_text() and "ms paint" in win.hud_text()
    # a colour key recolours the scan on screen in place: same buffer, positions untouched
    before = win.colors
    win.handle_key("4")
    assert win.color_mode == "range" and np.shares_memory(before, win.colors)
    np.testing.assert_array_equal(win.colors, point_colors(pts, "range", scales))
    assert win.scatter.pos is win._positions
    # range panel drawn while the panels show, left alone while hidden, redrawn when shown again
    assert win.range_label.pixmap() is not None and not win.range_label.pixmap().isNull()
    win.handle_key("i")
    assert not win.panels.isVisible()
    win.range_label.clear()
    src.more = 1
    qtbot.waitUntil(lambda: win.hud_stats.frames_shown >= 2, timeout=10_000)
    assert win.range_label.pixmap() is None or win.range_label.pixmap().isNull()
    win.handle_key("i")
    assert win.panels.isVisible() and not win.range_label.pixmap().isNull()


def test_keyboard_drive_sends_controls(qtbot) -> None:
    car = BicycleModel()
    driver = KeyboardDriver(BicycleControlSink(car))

    win = ViewerWindow(_Nothing(), WindowOptions(size=(640, 480)), driver)  # type: ignore[arg-type]
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    qtbot.keyPress(win.view, QtCore.Qt.Key.Key_W)
    qtbot.keyPress(win.view, QtCore.Qt.Key.Key_D)
    qtbot.waitUntil(lambda: driver.last_sent is not None and driver.last_sent.steering > 0.3, timeout=3000)
    assert driver.last_sent.throttle == 1.0
    t0 = time.monotonic()
    car.advance_to(1.0)
    assert car.x > 0.5 and car.y < 0.0  # forward and to the right
    qtbot.keyRelease(win.view, QtCore.Qt.Key.Key_W)
    qtbot.keyRelease(win.view, QtCore.Qt.Key.Key_D)
    qtbot.waitUntil(
        lambda: driver.last_sent.throttle == 0.0 and driver.last_sent.steering == 0.0, timeout=3000
    )
    assert time.monotonic() - t0 < 5


def test_keyboard_drives_the_embedded_ego_over_the_bridge(qtbot) -> None:
    """Keys sent to the viewer under Xvfb reach the embedded server as setCarControls, and the ego's
    pose from simGetVehiclePose moves as the controls say (forward, turning right)."""
    from rt_lidar.sensor.presets import load_preset
    from rt_lidar.server.embedded_sim import EmbeddedSim
    from rt_lidar.unreal_bridge import AirSimClient, AirSimServer
    from rt_lidar.unreal_bridge.world import World, street_scene
    from rt_lidar.viewer.drive import AirSimControlSink

    sim = EmbeddedSim(World(street_scene(0)), load_preset("VLP-16"), paused=True)
    server = AirSimServer(sim, port=0)
    server.start()
    try:
        sink = AirSimControlSink("127.0.0.1", server.port)
        driver = KeyboardDriver(sink)

        win = ViewerWindow(_Nothing(), WindowOptions(size=(640, 480)), driver)  # type: ignore[arg-type]
        qtbot.addWidget(win)
        win.show()
        qtbot.waitExposed(win)
        with AirSimClient(port=server.port) as client:
            before = client.sim_get_vehicle_pose()
            qtbot.keyPress(win.view, QtCore.Qt.Key.Key_W)
            qtbot.keyPress(win.view, QtCore.Qt.Key.Key_D)
            qtbot.waitUntil(
                lambda: sim.controls.throttle == 1.0 and sim.controls.steering > 0.3, timeout=3000
            )
            client.sim_continue_for_time(2.0)
            after = client.sim_get_vehicle_pose()
            state = client.get_car_state()
            qtbot.keyRelease(win.view, QtCore.Qt.Key.Key_W)
            qtbot.keyRelease(win.view, QtCore.Qt.Key.Key_D)
        assert after.position[0] - before.position[0] > 5.0  # it rolled on and accelerated forward
        assert after.position[1] < before.position[1] - 0.5  # steering right: towards -y
        assert state.speed > 5.0
        sink.close()
    finally:
        server.close()


def test_recording_plays_with_a_time_slider(qtbot, tmp_path) -> None:
    """A PCD folder plays at its recorded rate; the slider follows, says where it is, and seeks."""
    from rt_lidar.sinks.pcd import write_pcd

    base = _Scans(5_000).frame.points
    for i in range(4):
        write_pcd(tmp_path / f"{i:06d}.pcd", base[: 1_000 * (i + 1)])
    win = _window(qtbot, RecordingSource(tmp_path, speed=20.0))  # 10 Hz recorded, 200 scans/s shown
    qtbot.waitUntil(lambda: win.current is not None and win.current.points.size == 4_000, timeout=10_000)
    assert win.slider.value() == 3 and "[playing]" in win.hud_text()
    assert win.slider_label.text().split() == ["0.30", "/", "0.30", "s", "scan", "4/4"]
    win.handle_key("space")  # pause, then drag the slider back: that scan shows although paused
    win.slider.setValue(1)
    qtbot.waitUntil(lambda: win.current is not None and win.current.points.size == 2_000, timeout=5_000)
    assert "scan 2/4" in win.slider_label.text() and win.paused


def test_viewer_waits_for_a_stream_that_went_away_and_shows_it_again(qtbot) -> None:
    """The publisher goes away (a crashed or restarted simulation): the HUD says the viewer is waiting;
    a new publisher on the same address is picked up without touching the viewer."""
    import socket

    from rt_lidar.pipeline.assembler import Scan
    from rt_lidar.sensor.presets import load_preset
    from rt_lidar.sinks.base import SinkContext
    from rt_lidar.sinks.stream import ZmqStreamSink

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    context = SinkContext(preset=load_preset("VLP-16"))
    pts = _Scans(5_000).frame.points

    def publishing() -> tuple[ZmqStreamSink, QtCore.QTimer]:
        sink = ZmqStreamSink(address)
        sink.open(context)
        timer = QtCore.QTimer()
        timer.timeout.connect(lambda: sink.write(Scan(0, 0, pts, pts.size, 0)))
        timer.start(50)
        return sink, timer

    sink, timer = publishing()
    win = _window(qtbot, LiveSource(address, reconnect_after_s=0.5))
    qtbot.waitUntil(lambda: win.hud_stats.frames_shown >= 2, timeout=10_000)
    timer.stop()
    sink.close()
    qtbot.waitUntil(lambda: "waiting for stream" in win.hud_text(), timeout=5_000)
    shown = win.hud_stats.frames_shown
    sink, timer = publishing()
    try:
        qtbot.waitUntil(lambda: win.hud_stats.frames_shown >= shown + 2, timeout=15_000)
        qtbot.waitUntil(lambda: "[live]" in win.hud_text(), timeout=5_000)
        assert win.source.subscriber.stats.restarts == 1  # type: ignore[attr-defined]
    finally:
        timer.stop()
        sink.close()


def test_latency_runs_from_when_the_pipeline_had_the_sims_sector(qtbot) -> None:
    """The HUD's latency is sim -> screen: from the scan's ``sim_wall_ns`` (when the pipeline had the
    sim's last sector), not from when it was published."""
    import socket

    from rt_lidar.pipeline.assembler import Scan
    from rt_lidar.sensor.presets import load_preset
    from rt_lidar.sinks.base import SinkContext
    from rt_lidar.sinks.stream import ZmqStreamSink

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    sink = ZmqStreamSink(address)
    sink.open(SinkContext(preset=load_preset("VLP-16")))
    pts = _Scans(2_000).frame.points
    # the sim's sector was in hand 400 ms before each publish (a slow pipeline)
    timer = QtCore.QTimer()
    timer.timeout.connect(
        lambda: sink.write(Scan(0, 0, pts, pts.size, 0, sim_wall_ns=time.time_ns() - 400_000_000))
    )
    timer.start(50)
    try:
        win = _window(qtbot, LiveSource(address))
        qtbot.waitUntil(lambda: win.hud_stats.frames_shown >= 3, timeout=10_000)
        latency = win.hud_stats.latency_ms()
        assert latency is not None and 400.0 <= latency < 1400.0
    finally:
        timer.stop()
        sink.close()


def test_clicking_a_point_marks_it_and_shows_its_fields(qtbot) -> None:
    """A click (press and release without a drag) on the cloud picks the point drawn there: the marker is
    painted where the GL view drew it, and the label gives its fields."""
    from rt_lidar.viewer.picking import pick_point, project_points

    src = _Scans(20_000)
    win = _window(qtbot, src)
    src.more = 1
    qtbot.waitUntil(lambda: win.hud_stats.frames_shown >= 1, timeout=10_000)
    w, h = win.view.width(), win.view.height()
    screen = project_points(win._positions, win.view.mvp(), w, h)
    # a point well inside the view, in front of the camera
    ok = np.nonzero(
        (screen[:, 2] > 0)
        & (screen[:, 0] > 100)
        & (screen[:, 0] < w - 100)
        & (screen[:, 1] > 100)
        & (screen[:, 1] < h - 100)
    )[0]
    x, y = screen[ok[len(ok) // 2], :2]
    click = QtCore.QPoint(round(float(x)), round(float(y)))
    want = pick_point(win._positions, win.view.mvp(), w, h, click.x(), click.y())
    assert want is not None
    qtbot.mouseClick(win.view, QtCore.Qt.MouseButton.LeftButton, pos=click)
    assert win.picked == want and win.pick_label.isVisible()
    p = src.frame.points[want]
    rng = float(np.sqrt(p["x"] ** 2 + p["y"] ** 2 + p["z"] ** 2))
    text = win.pick_label.text()
    assert f"range    {rng:.3f} m" in text and f"ring     {int(p['ring'])}" in text
    # the GL view drew the marker (magenta) where the pick says the point is
    qtbot.wait(200)
    px = _gl_pixels(win).astype(int)
    sx, sy = project_points(win._positions[want : want + 1], win.view.mvp(), w, h)[0, :2]
    patch = px[max(0, int(sy) - 4) : int(sy) + 5, max(0, int(sx) - 4) : int(sx) + 5]
    magenta = (patch[..., 0] > 200) & (patch[..., 1] < 120) & (patch[..., 2] > 200)
    assert magenta.any(), "no marker drawn at the picked point"
    # the next scan: the pick follows the place on screen (the same scan again here: the same point)
    src.more = 1
    shown = win.hud_stats.frames_shown
    qtbot.waitUntil(lambda: win.hud_stats.frames_shown > shown, timeout=10_000)
    assert win.picked == want and win.pick_label.isVisible()
    # a click on empty sky clears the pick, and new scans leave it cleared
    qtbot.mouseClick(win.view, QtCore.Qt.MouseButton.LeftButton, pos=QtCore.QPoint(5, 5))
    assert win.picked is None and not win.pick_label.isVisible()
    src.more = 1
    shown = win.hud_stats.frames_shown
    qtbot.waitUntil(lambda: win.hud_stats.frames_shown > shown, timeout=10_000)
    assert win.picked is None and not win.pick_label.isVisible()


def test_key_e_exports_the_scan_on_screen_as_pcd(qtbot, tmp_path, monkeypatch) -> None:
    from rt_lidar.sinks.pcd import read_pcd_points

    monkeypatch.chdir(tmp_path)
    src = _Scans(3_000)
    win = _window(qtbot, src)
    assert win.export_scan() is None  # nothing on screen yet
    src.more = 1
    qtbot.waitUntil(lambda: win.hud_stats.frames_shown >= 1, timeout=10_000)
    win.handle_key("e")
    (path,) = tmp_path.glob("rt-lidar-scan-0-*.pcd")
    np.testing.assert_array_equal(read_pcd_points(path), src.frame.points)  # every field, every point
    assert f"exported {win.exported}" in win.hud_text()


@pytest.mark.parametrize("stamp", ["sim", "wall"])
def test_hud_says_which_clock_stamps_the_scans(qtbot, stamp) -> None:
    """The run's ``--stamp`` clock reaches the HUD through the stream header, with the scan's stamp."""
    import socket

    from rt_lidar.pipeline.assembler import Scan
    from rt_lidar.sensor.presets import load_preset
    from rt_lidar.sinks.base import SinkContext
    from rt_lidar.sinks.stream import ZmqStreamSink

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    sink = ZmqStreamSink(address)
    sink.open(SinkContext(preset=load_preset("VLP-16"), stamp=stamp))
    pts = _Scans(2_000).frame.points
    count = iter(range(10**6))

    def publish() -> None:
        k = next(count)  # scan k starts at sim time 10 s + k periods
        sink.write(Scan(k, 10_000_000_000 + k * 100_000_000, pts, pts.size, 0, sim_wall_ns=time.time_ns()))

    timer = QtCore.QTimer()
    timer.timeout.connect(publish)
    timer.start(100)
    try:
        win = _window(qtbot, LiveSource(address))
        qtbot.waitUntil(lambda: win.hud_stats.frames_shown >= 2, timeout=10_000)
        line = next(x for x in win.hud_text().splitlines() if x.startswith("stamps"))
        if stamp == "sim":
            assert "sim clock" in line and " s" in line
            assert float(line.split()[3]) >= 10.0
        else:
            assert "wall clock" in line and "UTC" in line
            hms = line.split()[-2]  # HH:MM:SS.mmm of the scan's stamp, within a second of now
            now = time.time()
            t = time.strptime(time.strftime("%Y-%m-%d ", time.gmtime(now)) + hms[:8], "%Y-%m-%d %H:%M:%S")
            stamp_s = calendar.timegm(t) + float(hms[8:])
            assert abs(((stamp_s - now + 43_200) % 86_400) - 43_200) < 1.0
    finally:
        timer.stop()
        sink.close()
