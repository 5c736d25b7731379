"""Connection slots of the RPC server over loopback: threads stay capped, held idle sockets cannot lock
clients out (one that never sent a whole request makes room at once, else the one silent longest), a
connection in a call is never the one closed, a connection without a first request is closed in time."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from rt_lidar.unreal_bridge.errors import ConnectionLost
from rt_lidar.unreal_bridge.limits import ServerLimits
from rt_lidar.unreal_bridge.rpc import RpcClient, RpcServer


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@pytest.fixture
def srv() -> Iterator[RpcServer]:
    server = RpcServer(port=0, limits=ServerLimits(max_connections=4, evict_idle_after_s=0.5))
    server.register("echo", lambda x: x)
    server.register("sleep", _sleep, locked=False)
    server.start()
    yield server
    server.close()


def test_100_connections_keep_threads_at_the_cap(srv: RpcServer) -> None:
    before = threading.active_count()
    held = [socket.create_connection(("127.0.0.1", srv.port), timeout=3) for _ in range(100)]
    try:
        time.sleep(0.3)
        assert srv.connection_count <= 4
        assert threading.active_count() <= before + 4 + 1
    finally:
        for s in held:
            s.close()


def test_idle_held_sockets_make_room_for_a_client(srv: RpcServer) -> None:
    held = [socket.create_connection(("127.0.0.1", srv.port), timeout=3) for _ in range(4)]
    try:
        time.sleep(0.8)  # all four silent past evict_idle_after_s
        t0 = time.monotonic()
        with RpcClient("127.0.0.1", srv.port, timeout=3) as client:
            assert client.call("echo", "in") == "in"
        assert time.monotonic() - t0 < 1.0
        assert srv.stats["evicted_idle"] + srv.stats["evicted_fresh"] >= 1
    finally:
        for s in held:
            s.close()


def test_a_connection_in_a_call_is_not_evicted(srv: RpcServer) -> None:
    with RpcClient("127.0.0.1", srv.port, timeout=5) as busy:
        result: list[object] = []
        worker = threading.Thread(target=lambda: result.append(busy.call("sleep", 1.5)))
        worker.start()
        time.sleep(0.2)
        held = [socket.create_connection(("127.0.0.1", srv.port), timeout=3) for _ in range(3)]
        try:
            time.sleep(0.8)  # the busy one is silent too, but in a call
            for _ in range(3):  # newcomers evict the idle held sockets, never the busy one
                socket.create_connection(("127.0.0.1", srv.port), timeout=3).close()
                time.sleep(0.6)
            worker.join(5)
            assert result == [1.5]
        finally:
            for s in held:
                s.close()


def test_young_silent_sockets_make_room_at_once(srv: RpcServer) -> None:
    """Issue 18: slots all younger than ``evict_idle_after_s`` but without a request: no wait."""
    held = [socket.create_connection(("127.0.0.1", srv.port), timeout=3) for _ in range(4)]
    try:
        time.sleep(0.1)
        t0 = time.monotonic()
        with RpcClient("127.0.0.1", srv.port, timeout=3) as client:
            assert client.call("echo", "in") == "in"
        assert time.monotonic() - t0 < 0.5
        assert srv.stats["evicted_fresh"] >= 1 and srv.stats["refused_connections"] == 0
        held[0].settimeout(1.0)
        assert held[0].recv(1) == b""  # the oldest silent one went
    finally:
        for s in held:
            s.close()


def test_young_served_connections_keep_their_slots(srv: RpcServer) -> None:
    clients = [RpcClient("127.0.0.1", srv.port, timeout=3) for _ in range(4)]
    try:
        for c in clients:
            assert c.call("echo", 1) == 1
        with RpcClient("127.0.0.1", srv.port, timeout=3) as late, pytest.raises(ConnectionLost):
            late.call("echo", 2)  # every slot served a request less than 0.5 s ago
        assert [c.call("echo", 3) for c in clients] == [3, 3, 3, 3]
        assert srv.stats["refused_connections"] >= 1 and srv.stats["evicted_fresh"] == 0
    finally:
        for c in clients:
            c.close()


def test_a_connection_without_a_first_request_is_closed_in_time() -> None:
    limits = ServerLimits(first_request_timeout_s=0.4)
    with RpcServer(port=0, limits=limits) as server:
        server.register("echo", lambda x: x)
        server.start()
        silent = socket.create_connection(("127.0.0.1", server.port), timeout=3)
        dripping = socket.create_connection(("127.0.0.1", server.port), timeout=3)
        dripping.sendall(b"\x94\x00")  # a request begun, never finished
        with RpcClient("127.0.0.1", server.port, timeout=3) as served:
            assert served.call("echo", 1) == 1
            t0 = time.monotonic()
            assert silent.recv(1) == b"" and dripping.recv(1) == b""
            assert 0.3 < time.monotonic() - t0 < 1.5
            time.sleep(0.3)
            assert served.call("echo", 2) == 2  # a connection that sent one is not on that clock
        silent.close()
        dripping.close()
