"""rpclib's msgpack-RPC over real loopback sockets: layouts, ordering, errors, bad input, lost servers."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest

from rt_lidar.unreal_bridge.errors import ConnectionLost, RpcError, RpcTimeout
from rt_lidar.unreal_bridge.rpc import RpcClient, RpcServer


def f32(v: float) -> bytes:
    return b"\xca" + struct.pack(">f", v)


@pytest.fixture
def server() -> Iterator[RpcServer]:
    srv = RpcServer(port=0, max_message_size=4096)
    seen: list[Any] = []
    srv.register("add", lambda a, b: a + b)
    srv.register("half", lambda: 0.25)
    srv.register("echo", lambda x: x)
    srv.register("sleep", lambda s: time.sleep(s) or s)
    srv.register("note", lambda x: seen.append(x))
    srv.register("boom", lambda: (_ for _ in ()).throw(RuntimeError("No lidar with name X exist on vehicle")))
    srv.seen = seen  # type: ignore[attr-defined]
    srv.start()
    yield srv
    srv.close()


def raw(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    return sock


def read_messages(sock: socket.socket, n: int) -> list[Any]:
    unpacker = msgpack.Unpacker(raw=False)
    out: list[Any] = []
    while len(out) < n:
        data = sock.recv(65536)
        assert data, "connection closed early"
        unpacker.feed(data)
        out.extend(unpacker)
    return out


def closed_by_peer(sock: socket.socket, within: float = 3.0) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_server_reply_bytes(server: RpcServer) -> None:
    with raw(server.port) as sock:
        sock.sendall(b"\x94\x00\x2a\xa3add\x92\x01\x02")  # [0, 42, "add", [1, 2]]
        assert sock.recv(100) == b"\x94\x01\x2a\xc0\x03"  # [1, 42, nil, 3]
        sock.sendall(msgpack.packb([0, 7, "half", []]))
        assert sock.recv(100) == b"\x94\x01\x07\xc0" + f32(0.25)  # floats go as float32


def test_client_request_bytes_and_response_parsing() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def fake_server() -> None:
        conn, _ = listener.accept()
        with conn:
            got.append(conn.recv(1000))
            conn.sendall(b"\x94\x01\x00\xc0" + f32(2.5))  # [1, 0, nil, 2.5f]
            got.append(conn.recv(1000))

    thread = threading.Thread(target=fake_server)
    thread.start()
    with RpcClient("127.0.0.1", listener.getsockname()[1], timeout=5) as client:
        assert client.call("getX", 1.5, "a", b"b", True) == 2.5
        client.notify("tick", 3)
    thread.join(5)
    listener.close()
    assert got[0] == b"\x94\x00\x00\xa4getX\x94" + f32(1.5) + b"\xa1a\xc4\x01b\xc3"
    assert got[1] == b"\x93\x02\xa4tick\x91\x03"


def test_pipelined_requests_are_answered_in_order(server: RpcServer) -> None:
    with raw(server.port) as sock:
        msgs = [
            [0, i, "sleep", [0.02 if i % 7 == 0 else 0]] if i % 2 else [0, i, "echo", [i]] for i in range(40)
        ]
        sock.sendall(b"".join(msgpack.packb(m) for m in msgs))
        replies = read_messages(sock, 40)
    assert [r[1] for r in replies] == list(range(40))
    assert all(r[0] == 1 and r[2] is None for r in replies)


def test_notification_is_handled_without_reply(server: RpcServer) -> None:
    with raw(server.port) as sock:
        sock.sendall(msgpack.packb([2, "note", ["hello"]]) + msgpack.packb([2, "nothing", []]))
        sock.sendall(msgpack.packb([0, 1, "echo", ["after"]]))
        assert read_messages(sock, 1) == [[1, 1, None, "after"]]
    assert server.seen == ["hello"]  # type: ignore[attr-defined]


def test_rpclib_error_strings(server: RpcServer) -> None:
    with RpcClient("127.0.0.1", server.port, timeout=5) as client:
        with pytest.raises(RpcError) as unknown:
            client.call("nope", 1, 2)
        assert unknown.value.error == "rpclib: server could not find function 'nope' with argument count 2."
        assert "nope" in str(unknown.value)
        with pytest.raises(RpcError) as arity:
            client.call("add", 1)
        assert arity.value.error == (
            "rpclib: Function 'add' was called with an invalid number of arguments. Expected: 2, got: 1"
        )
        with pytest.raises(RpcError) as boom:
            client.call("boom")
        assert boom.value.error == (
            "rpclib: function 'boom' (called with 0 arg(s)) threw an exception. The exception contained "
            "this information: No lidar with name X exist on vehicle."
        )
        assert client.call("add", 2, 3) == 5  # the connection is still good


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xc1\xc1\xc1",
        msgpack.packb(5),
        msgpack.packb([9, 1, "x", []]),
        msgpack.packb([0, "id", "echo", [1]]),
    ],
    ids=["invalid-bytes", "not-an-array", "bad-type", "bad-id"],
)
def test_malformed_input_closes_only_that_connection(server: RpcServer, garbage: bytes) -> None:
    with RpcClient("127.0.0.1", server.port, timeout=5) as good, raw(server.port) as bad:
        assert good.call("echo", 1) == 1
        bad.sendall(garbage)
        assert closed_by_peer(bad)
        assert good.call("echo", 2) == 2
    with RpcClient("127.0.0.1", server.port, timeout=5) as fresh:
        assert fresh.call("echo", 3) == 3


@pytest.mark.parametrize(
    "oversized",
    [
        msgpack.packb([0, 1, "echo", ["x" * 5000]]),
        b"\x94\x00\x01\xa4echo\x91\xdb\x40\x00\x00\x00" + b"y" * 8192,
    ],
    ids=["big-body", "1GiB-string-header"],
)
def test_oversized_message_closes_the_connection(server: RpcServer, oversized: bytes) -> None:
    with RpcClient("127.0.0.1", server.port, timeout=5) as good, raw(server.port) as bad:
        bad.sendall(oversized)
        assert closed_by_peer(bad)
        assert good.call("echo", "still here") == "still here"


def test_closing_the_server_ends_a_pending_call_promptly(server: RpcServer) -> None:
    client = RpcClient("127.0.0.1", server.port, timeout=30)
    assert client.call("echo", 0) == 0
    threading.Timer(0.2, server.close).start()
    start = time.monotonic()
    with pytest.raises(ConnectionLost) as lost:
        client.call("sleep", 1.0)
    assert time.monotonic() - start < 1.0
    assert "'sleep'" in str(lost.value) and lost.value.method == "sleep"
    time.sleep(0.9)
    with pytest.raises(ConnectionLost, match="'echo'"):
        client.call("echo", 1)  # reconnect fails: nothing listens


def test_killed_server_process_raises_connection_lost() -> None:
    code = (
        "import sys, time\n"
        "from rt_lidar.unreal_bridge.rpc import RpcServer\n"
        "s = RpcServer(port=0); s.register('sleep', lambda t: time.sleep(t)); s.start()\n"
        "print(s.port, flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        client = RpcClient("127.0.0.1", port, timeout=30)
        client.call("sleep", 0)
        threading.Timer(0.2, proc.kill).start()
        start = time.monotonic()
        with pytest.raises(ConnectionLost, match="'sleep'"):
            client.call("sleep", 20)
        assert time.monotonic() - start < 2.0
    finally:
        proc.kill()
        proc.wait(5)


def test_timeout_names_the_call(server: RpcServer) -> None:
    with RpcClient("127.0.0.1", server.port, timeout=0.2) as client:
        with pytest.raises(RpcTimeout, match="'sleep'"):
            client.call("sleep", 0.6)
        time.sleep(0.5)  # calls are serialised: let the sleeping handler finish
        assert client.call("echo", "new connection") == "new connection"


def test_client_floats_arrive_as_float32(server: RpcServer) -> None:
    with RpcClient("127.0.0.1", server.port, timeout=5) as client:
        assert client.call("echo", 0.1) == struct.unpack(">f", struct.pack(">f", 0.1))[0]


def test_close_with_idle_connections_is_prompt() -> None:
    srv = RpcServer(port=0)
    srv.start()
    socks = [raw(srv.port) for _ in range(5)]
    time.sleep(0.05)
    start = time.monotonic()
    srv.close()
    assert time.monotonic() - start < 1.0
    assert all(closed_by_peer(s) for s in socks)
    for s in socks:
        s.close()
