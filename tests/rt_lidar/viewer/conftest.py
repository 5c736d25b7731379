"""Fixtures of the viewer tests: a live publishing pipeline in its own process, on a free port."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pyqtgraph.Qt import QtCore

from rt_lidar.viewer.publisher import ServeOptions, start_demo_process

# pyqtgraph caches its shader programs; with one share group they stay valid in every test's window
QtCore.QCoreApplication.setAttribute(QtCore.Qt.ApplicationAttribute.AA_ShareOpenGLContexts)


def free_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


@dataclass
class LiveStream:
    address: str
    proc: Any
    summary: dict[str, Any] | None = None

    def stop(self) -> dict[str, Any]:
        """Terminate the publisher; returns its summary (real-time factor, publish cost)."""
        if self.summary is None:
            self.proc.terminate()
            out, _ = self.proc.communicate(timeout=20)
            lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
            self.summary = json.loads(lines[-1])
        return self.summary


@pytest.fixture
def live_stream(request: pytest.FixtureRequest) -> Iterator[LiveStream]:
    """VLP-16 in the embedded street at 10 Hz, paced to real time, publishing on a real TCP socket;
    a camera frame every 3rd scan unless the test is parametrized indirectly with another count."""
    address = free_address()
    camera_every = int(getattr(request, "param", 3))
    # RT_LIDAR_VIEWER_PRESET=HDL-64E repeats the live tests with the sensor (slower, needs idle cores)
    preset = os.environ.get("RT_LIDAR_VIEWER_PRESET", "VLP-16")
    proc = start_demo_process(ServeOptions(address=address, preset=preset, camera_every=camera_every))
    first = proc.stdout.readline()  # the publisher says where it is bound once the pipeline is built
    assert json.loads(first)["address"] == address
    stream = LiveStream(address, proc)
    yield stream
    if proc.poll() is None:
        stream.stop()
