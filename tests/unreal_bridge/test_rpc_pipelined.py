"""Requests sent ahead of their answers (``RpcClient.send_request`` / ``read_response``) against a real
server on loopback: answers come back to the request they belong to, whatever is called meanwhile."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rt_lidar.unreal_bridge.errors import ConnectionLost, RpcError
from rt_lidar.unreal_bridge.rpc import RpcClient, RpcServer


@pytest.fixture
def server():
    srv = RpcServer(port=0)
    gate = threading.Event()
    srv.register("echo", lambda x: x)
    srv.register("block", lambda n: bytes(np.arange(n, dtype=np.uint8)))  # a big answer

    def fail() -> None:
        raise ValueError("no")

    srv.register("fail", fail)
    srv.register("wait", lambda: gate.wait(5.0))
    srv.start()
    yield srv
    gate.set()
    srv.close()


def test_answers_read_later_and_out_of_order_belong_to_their_requests(server) -> None:
    with RpcClient(port=server.port, timeout=10.0) as client:
        first = client.send_request("echo", ["a"])
        big = client.send_request("block", [200])
        last = client.send_request("echo", [3])
        # a plain call meanwhile reads the answers ahead of its own and keeps them
        assert client.call("echo", "between") == "between"
        assert client.read_response(last) == 3
        assert client.read_response(big) == bytes(range(200))
        assert client.read_response(first) == "a"
        with pytest.raises(ConnectionLost):  # read once: gone
            client.read_response(first)


def test_an_error_answer_raises_for_its_own_request_only(server) -> None:
    with RpcClient(port=server.port, timeout=10.0) as client:
        bad = client.send_request("fail", [])
        good = client.send_request("echo", [7])
        assert client.read_response(good) == 7
        with pytest.raises(RpcError):
            client.read_response(bad)
        assert client.call("echo", 1) == 1  # the connection is still in step


def test_a_lost_connection_loses_the_answers_in_flight(server) -> None:
    client = RpcClient(port=server.port, timeout=10.0)
    pending = client.send_request("echo", ["x"])
    client.close()
    with pytest.raises(ConnectionLost, match="lost with its connection"):
        client.read_response(pending)
    assert client.call("echo", 2) == 2  # a new connection, in step from the start


def test_the_timeout_counts_from_the_read(server) -> None:
    with RpcClient(port=server.port, timeout=0.3) as client:
        slow = client.send_request("wait", [])
        with pytest.raises(Exception, match="deadline"):
            client.read_response(slow)


@pytest.mark.parametrize("n", [0, 1, 255, 256, 65535, 65536, 300_001])
def test_a_memoryview_packs_as_msgpack_packs_its_bytes(n: int) -> None:
    """``rpc.pack`` writes a memoryview (an answer's field, not copied first) as the bin msgpack makes of
    the same bytes, whatever its size class (bin8/16/32), shape or item type."""
    import msgpack

    from rt_lidar.unreal_bridge.rpc import pack

    raw = np.arange(n, dtype=np.uint8)
    grid = np.arange(3 * (n // 12), dtype=np.float32).reshape(-1, 3)
    value = {"data": memoryview(raw), "grid": [memoryview(grid), 7], "empty": memoryview(grid[:0])}
    want = {"data": raw.tobytes(), "grid": [grid.tobytes(), 7], "empty": b""}
    assert pack(value) == msgpack.packb(want, use_bin_type=True)
