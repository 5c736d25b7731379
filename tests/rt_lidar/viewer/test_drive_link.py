"""The viewer's driving link over the bridge survives a server that is not up yet, goes away and
comes back: the GUI thread never waits on it, the HUD's status says what happens, and the controls
reach the new server (with API control enabled anew)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from rt_lidar.sensor.presets import load_preset
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer
from rt_lidar.unreal_bridge.world import World, street_scene
from rt_lidar.viewer.drive import AirSimControlSink


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(cond: Callable[[], bool], timeout_s: float = 10.0) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def _api_control(port: int) -> bool:
    with AirSimClient(port=port) as client:
        return bool(client.call("isApiControlEnabled", ""))


def _server(port: int) -> tuple[AirSimServer, EmbeddedSim]:
    sim = EmbeddedSim(World(street_scene(0)), load_preset("VLP-16"), paused=True)
    server = AirSimServer(sim, port=port)
    server.start()
    return server, sim


def test_the_drive_link_waits_for_the_server_and_follows_it_through_a_restart() -> None:
    port = _free_port()
    sink = AirSimControlSink("127.0.0.1", port, retry_s=0.2)
    try:
        t0 = time.perf_counter()
        sink.set_controls(0.5, 0.0, 0.0)  # nobody there yet
        assert time.perf_counter() - t0 < 0.05  # handed over, not sent from this thread
        _until(lambda: sink.error is not None)
        assert f"no link to 127.0.0.1:{port}" in sink.status and "retrying" in sink.status

        server, sim = _server(port)
        try:
            _until(lambda: sim.controls.throttle == 0.5)  # the queued controls went out once it was up
            # the server applies the controls before its reply reaches the sender thread
            _until(lambda: sink.sent == 1)
            assert sink.status == f"connected to 127.0.0.1:{port}" and sink.connections == 1
            assert _api_control(port)
        finally:
            server.close()

        sink.set_controls(1.0, 0.3, 0.0)
        _until(lambda: sink.error is not None)  # the server went away: said, not raised
        server, sim = _server(port)  # a restarted simulation on the same port
        try:
            _until(lambda: sim.controls.throttle == 1.0 and sim.controls.steering == 0.3)
            _until(lambda: sink.sent == 2)
            assert sink.connections == 2 and sink.error is None
            assert _api_control(port)
        finally:
            sink.close()  # brakes on the way out
            _until(lambda: sim.controls.brake == 1.0)
            server.close()
    finally:
        sink.close()


def test_a_down_server_is_tried_at_the_retry_pace_however_fast_controls_come() -> None:
    port = _free_port()
    sink = AirSimControlSink("127.0.0.1", port, retry_s=0.5)
    tries = []
    real_send = sink._send

    def counting_send(cmd):  # type: ignore[no-untyped-def]
        tries.append(time.monotonic())
        real_send(cmd)

    sink._send = counting_send  # type: ignore[method-assign]
    try:
        end = time.monotonic() + 1.6
        while time.monotonic() < end:  # the keyboard driver sends every 50 ms while a key is held
            sink.set_controls(1.0, 0.1, 0.0)
            time.sleep(0.05)
        assert 2 <= len(tries) <= 5, tries  # ~every 0.5 s, not every 50 ms
        assert "retrying every 0.5 s" in sink.status
    finally:
        sink.close()
