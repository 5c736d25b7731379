"""The viewer's HUD says when the live stream carried bad frames (under a real X server)."""

from __future__ import annotations

import json

import numpy as np
import zmq
from pyqtgraph.Qt import QtCore

from rt_lidar.points import POINT_DTYPE
from rt_lidar.viewer.sources import LiveSource
from rt_lidar.viewer.window import ViewerWindow, WindowOptions


def test_hud_counts_skipped_bad_frames_and_keeps_painting(qtbot) -> None:
    pub = zmq.Context.instance().socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.bind("tcp://127.0.0.1:*")
    address = pub.getsockopt_string(zmq.LAST_ENDPOINT)
    pts = np.zeros(2_000, POINT_DTYPE)
    pts["x"] = np.linspace(2, 40, pts.size)
    seq = [0]

    def send() -> None:
        pub.send_multipart([b"{not json"])
        header = {"kind": "scan", "seq": seq[0], "session": "s", "fields": POINT_DTYPE.descr, "n": pts.size}
        pub.send_multipart([json.dumps(header).encode(), pts.tobytes()])
        seq[0] += 1

    timer = QtCore.QTimer()
    timer.timeout.connect(send)
    timer.start(50)
    win = ViewerWindow(LiveSource(address), WindowOptions(size=(640, 480)), None)
    qtbot.addWidget(win)
    win.show()
    try:
        qtbot.waitUntil(lambda: win.hud_stats.frames_shown >= 3, timeout=15_000)
        qtbot.waitUntil(lambda: "bad frame(s)" in win.hud_text(), timeout=5_000)
        assert "header is not JSON" in win.hud_text()
    finally:
        timer.stop()
        pub.close(linger=0)
