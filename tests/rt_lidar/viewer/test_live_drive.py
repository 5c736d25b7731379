"""The README's live-driving recipe, end to end: a real ``rt-lidar serve`` process, a real
``rt-lidar run --lockstep`` controller publishing its stream, and the viewer window (``view --drive``'s
window, source and driver) receiving key presses; the car moves on the server (``getCarState``),
and the viewer shows the controller's scans. Once with one sensor, once with a rig."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyqtgraph.Qt import QtCore

from rt_lidar.unreal_bridge import AirSimClient
from rt_lidar.viewer.drive import AirSimControlSink, KeyboardDriver
from rt_lidar.viewer.sources import LiveSource
from rt_lidar.viewer.window import ViewerWindow, WindowOptions

from .conftest import free_address

ROOT = Path(__file__).parents[3]

# two VLP-16s at the front corners: the recipe's rig, light enough for a loaded 2-core test machine
RIG = """
[[sensor]]
name = "front_left"
preset = "VLP-16"
mount = { xyz = [2.2, 0.9, 0.7], rpy_deg = [0.0, 0.0, 45.0] }

[[sensor]]
name = "front_right"
preset = "VLP-16"
mount = { xyz = [2.2, -0.9, 0.7], rpy_deg = [0.0, 0.0, -45.0] }
"""


def _cli(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "rt_lidar.cli.main", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


@contextmanager
def _server(*extra: str) -> Iterator[int]:
    """``rt-lidar serve --port 0 ...``; yields the port it says it serves on."""
    proc = _cli("serve", "--port", "0", *extra)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once the world is built and the port bound
        m = re.search(r"on 127\.0\.0\.1:(\d+)", line)
        assert m, f"serve said {line!r}"
        yield int(m.group(1))
    finally:
        _stop(proc)


def _drive(qtbot, port: int, controller: subprocess.Popen[str], address: str, rig: bool) -> None:
    """The viewer on the controller's stream, driving the server's car with W held."""
    driver = KeyboardDriver(AirSimControlSink("127.0.0.1", port))
    win = ViewerWindow(LiveSource(address), WindowOptions(size=(800, 600), color_mode="sensor"), driver)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    try:
        with AirSimClient(port=port, timeout=30.0) as client:
            before = client.sim_get_vehicle_pose().position
            # the controller's scans reach the window (for a rig: every sensor, each on its layer)
            qtbot.waitUntil(
                lambda: (len(win.rig.layers) == 2) if rig else win.hud_stats.frames_shown >= 1,
                timeout=120_000,
            )
            qtbot.keyPress(win.view, QtCore.Qt.Key.Key_W)
            qtbot.waitUntil(
                lambda: driver.sink.sent >= 1 and driver.last_sent.throttle == 1.0, timeout=10_000
            )

            def moved() -> bool:
                assert controller.poll() is None, _stop(controller)
                return client.get_car_state().speed > 1.0

            # the car accelerates as the lockstep controller advances the sim, frame by frame
            qtbot.waitUntil(moved, timeout=120_000)
            after = client.sim_get_vehicle_pose().position
            qtbot.keyRelease(win.view, QtCore.Qt.Key.Key_W)
        assert after[0] - before[0] > 0.2  # forward, along the car's heading (+x at the start)
        assert "connected to 127.0.0.1" in win.hud_text()
        if rig:
            assert sum(ln.startswith("sensor   on ") for ln in win.hud_text().splitlines()) == 2
    finally:
        driver.sink.close()  # brakes; qtbot closes the window (and its stream) after the test


@pytest.mark.parametrize("rig", [False, True], ids=["one-sensor", "rig"])
def test_keys_in_the_viewer_drive_the_car_on_the_server(qtbot, tmp_path: Path, rig: bool) -> None:
    address = free_address()
    rig_file = tmp_path / "rig.toml"
    rig_file.write_text(RIG)
    serve_args = ("--rig", str(rig_file)) if rig else ("--preset", "VLP-16")
    with _server(*serve_args) as port:
        run = ["run", "--airsim", f"127.0.0.1:{port}", "--lockstep", "--frames", "100000", "--quiet"]
        run += ["--out", str(tmp_path / "run"), "--sink", f"zmq:{address}"]
        run += ["--rig", str(rig_file), "--no-rosbag"] if rig else ["--preset", "VLP-16"]
        controller = _cli(*run)
        try:
            _drive(qtbot, port, controller, address, rig)
        finally:
            _stop(controller)
