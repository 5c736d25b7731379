"""The RPC client against hostile servers on real loopback sockets: a deadline per call, a capped reply.

Each fake server is a plain socket that answers the way an attacker would: one byte at a time, or a
header that declares a huge answer and then nothing.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator

import msgpack
import pytest

from rt_lidar.unreal_bridge import AirSimClient
from rt_lidar.unreal_bridge.errors import MessageTooLarge, RpcTimeout
from rt_lidar.unreal_bridge.rpc import DEFAULT_MAX_MESSAGE_SIZE, RpcClient

#: The answer ``[1, 0, nil, "x" * 200]``: long enough to drip for much longer than a timeout.
ANSWER = msgpack.packb([1, 0, None, "x" * 200])
HUGE = 512 * 1024 * 1024
#: ``[1, 0, nil, <bin32 of 512 MiB>]``: nine bytes that declare half a gigabyte.
HUGE_HEADER = b"\x94\x01\x00\xc0\xc6" + HUGE.to_bytes(4, "big")


class FakeServer:
    """A one-connection server on loopback that reads a request, then runs ``answer(conn)``."""

    def __init__(self, answer: Callable[[socket.socket, threading.Event], None]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self._answer = answer
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.recv(65536)
            with contextlib.suppress(OSError):  # the client gave up and closed: what these tests want
                self._answer(conn, self.stop)
            self.stop.wait(5)

    def close(self) -> None:
        self.stop.set()
        self._thread.join(5)
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[socket.socket, threading.Event], None]], FakeServer]]:
    servers: list[FakeServer] = []

    def start(answer: Callable[[socket.socket, threading.Event], None]) -> FakeServer:
        servers.append(FakeServer(answer))
        return servers[-1]

    yield start
    for srv in servers:
        srv.close()


def drip(period_s: float) -> Callable[[socket.socket, threading.Event], None]:
    def answer(conn: socket.socket, stop: threading.Event) -> None:
        for i in range(len(ANSWER)):
            conn.sendall(ANSWER[i : i + 1])
            if stop.wait(period_s):
                return

    return answer


def test_a_dripping_server_cannot_hold_a_call_past_its_deadline(serve: Callable[..., FakeServer]) -> None:
    srv = serve(drip(0.3))
    with RpcClient("127.0.0.1", srv.port, timeout=1.0) as client:
        t0 = time.monotonic()
        with pytest.raises(RpcTimeout, match=r"'getX'.*deadline") as info:
            client.call("getX")
        took = time.monotonic() - t0
    assert 0.9 < took < 1.6, took  # per recv, each 0.3 s byte would reset a 1 s timeout: 60 s and more
    assert "bytes of the answer received" in str(info.value)


def test_the_deadline_covers_a_whole_airsim_client_call(serve: Callable[..., FakeServer]) -> None:
    srv = serve(drip(0.3))
    with AirSimClient("127.0.0.1", srv.port, timeout=1.0) as client:
        t0 = time.monotonic()
        with pytest.raises(RpcTimeout):
            client.ping()
        assert time.monotonic() - t0 < 1.6


def test_a_fast_answer_within_the_deadline_is_read(serve: Callable[..., FakeServer]) -> None:
    srv = serve(drip(0.001))  # 211 bytes in ~0.2 s: inside a 1 s deadline
    with RpcClient("127.0.0.1", srv.port, timeout=1.0) as client:
        assert client.call("getX") == "x" * 200


def huge_header(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(HUGE_HEADER)


def test_a_reply_header_declaring_512_mib_is_refused_without_allocating_it(
    serve: Callable[..., FakeServer],
) -> None:
    srv = serve(huge_header)
    client = RpcClient("127.0.0.1", srv.port, timeout=5.0)
    tracemalloc.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(MessageTooLarge) as info:
            client.call("getX")
        took = time.monotonic() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        client.close()
    assert took < 1.0  # refused on the header, not after a timeout
    text = str(info.value)
    assert str(HUGE + len(HUGE_HEADER)) in text and str(DEFAULT_MAX_MESSAGE_SIZE) in text, text
    assert peak < 8 << 20, peak  # the 1 MiB receive buffer and change, not 512 MiB


def test_under_the_cap_the_buffer_grows_only_with_bytes_that_arrive(serve: Callable[..., FakeServer]) -> None:
    """A header declaring 200 MiB (under the cap) then silence: the call times out, having allocated
    about what arrived (nine bytes), not 200 MiB."""
    declared = 200 * 1024 * 1024

    def answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"\x94\x01\x00\xc0\xc6" + declared.to_bytes(4, "big") + b"\0" * 1000)

    srv = serve(answer)
    client = RpcClient("127.0.0.1", srv.port, timeout=0.5)
    tracemalloc.start()
    try:
        with pytest.raises(RpcTimeout):
            client.call("getX")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        client.close()
    assert peak < 8 << 20, peak


def test_a_smaller_cap_refuses_a_real_answer_over_it(serve: Callable[..., FakeServer]) -> None:
    big = msgpack.packb([1, 0, None, b"\0" * 5000])

    def answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(big)

    srv = serve(answer)
    with (
        RpcClient("127.0.0.1", srv.port, timeout=5.0, max_message_size=4096) as client,
        pytest.raises(MessageTooLarge, match="cap is 4096"),
    ):
        client.call("getX")
