"""The hardened server over real loopback sockets: one hostile client must not freeze or break it."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import msgpack
import pytest

from rt_lidar.server.serve import EmbeddedServer, ServeOptions, start_embedded_server
from rt_lidar.unreal_bridge import AirSimClient
from rt_lidar.unreal_bridge.errors import RpcError
from rt_lidar.unreal_bridge.limits import ServerLimits
from rt_lidar.unreal_bridge.rpc import RpcServer
from rt_lidar.unreal_bridge.wire import CarControls


@pytest.fixture(scope="module")
def served() -> Iterator[EmbeddedServer]:
    srv = start_embedded_server(ServeOptions(port=0, scene="street", preset="VLP-16", paused=True))
    yield srv
    srv.close()


def client(srv: EmbeddedServer) -> AirSimClient:
    return AirSimClient("127.0.0.1", srv.port, timeout=10.0)


def answered_in_time(srv: EmbeddedServer, within_s: float = 2.0) -> bool:
    t0 = time.monotonic()
    with client(srv) as c:
        c.ping()
    return time.monotonic() - t0 < within_s


def test_non_finite_steering_is_refused_and_the_pose_stays_finite(served: EmbeddedServer) -> None:
    with client(served) as c, pytest.raises(RpcError, match="finite"):
        c.set_car_controls(CarControls(throttle=0.5, steering=float("nan")))
    assert answered_in_time(served)


def test_a_catastrophic_regex_is_answered_at_once(served: EmbeddedServer) -> None:
    with client(served) as c:
        t0 = time.monotonic()
        try:
            names = c.sim_list_scene_objects("(?:.*){14}#")
        except RpcError:
            names = []
        assert time.monotonic() - t0 < 2.0
        assert names == []
    assert answered_in_time(served)


def test_an_unknown_vehicle_name_is_an_error_and_does_not_block_others(served: EmbeddedServer) -> None:
    with client(served) as c, pytest.raises(RpcError):
        c.enable_api_control(True, "x" * 1000)
    assert answered_in_time(served)


@pytest.fixture
def rpc() -> Iterator[RpcServer]:
    srv = RpcServer(port=0, limits=ServerLimits(max_connections=4))
    srv.register("echo", lambda x: x)
    srv.start()
    yield srv
    srv.close()


def call_raw(port: int, payload: bytes, timeout: float = 3.0) -> list[object] | None:
    """Send ``payload``; the decoded reply, or None when the server closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        unpacker = msgpack.Unpacker(raw=False)
        while True:
            data = sock.recv(65536)
            if not data:
                return None
            unpacker.feed(data)
            for msg in unpacker:
                return list(msg)


def test_deep_nesting_gets_an_error_not_a_dead_thread(rpc: RpcServer) -> None:
    deep: object = 1
    for _ in range(1000):
        deep = [deep]
    reply = call_raw(rpc.port, msgpack.packb([0, 1, "echo", [deep]]))
    assert reply is None or (reply[0] == 1 and reply[2] is not None)
    assert call_raw(rpc.port, msgpack.packb([0, 2, "echo", [5]])) == [1, 2, None, 5]


def test_an_array_header_of_200m_items_is_closed_at_once(rpc: RpcServer) -> None:
    t0 = time.monotonic()
    reply = call_raw(rpc.port, b"\x94\x00\x01\xa4echo\x91\xdd" + (200_000_000).to_bytes(4, "big"))
    assert reply is None or reply[2] is not None
    assert time.monotonic() - t0 < 2.0
    assert call_raw(rpc.port, msgpack.packb([0, 3, "echo", ["ok"]])) == [1, 3, None, "ok"]


def test_connections_beyond_the_cap_are_closed_and_the_server_still_answers(rpc: RpcServer) -> None:
    held = [socket.create_connection(("127.0.0.1", rpc.port), timeout=3) for _ in range(8)]
    try:
        time.sleep(0.3)
        closed = 0
        for s in held:
            s.settimeout(0.5)
            with contextlib.suppress(TimeoutError):
                closed += s.recv(1) == b""
        assert closed >= 4
    finally:
        for s in held:
            s.close()
    time.sleep(0.3)
    assert call_raw(rpc.port, msgpack.packb([0, 4, "echo", [1.5]])) == [1, 4, None, 1.5]
