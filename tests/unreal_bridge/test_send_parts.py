"""``rpc.send_parts``: a reply's pieces sent scatter-gather, in order, whole, within one deadline for
the whole send (as ``sendall``), and joined once where the socket has no ``sendmsg``."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from rt_lidar.unreal_bridge.rpc import pack, pack_parts, send_parts


def _receive_all(sock: socket.socket, n: int, out: list[bytes], delay_s: float = 0.0) -> None:
    got = bytearray()
    while len(got) < n:
        chunk = sock.recv(min(65536, n - len(got)))
        if not chunk:
            break
        got += chunk
        time.sleep(delay_s)
    out.append(bytes(got))


def _pair(buf: int = 4096) -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buf)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buf)
    return a, b


def _message() -> object:
    rng = np.random.default_rng(0)
    fields = {
        f"f{i}": {
            "dtype": "<f4",
            "data": memoryview(rng.random(17000 + 977 * i).astype(np.float32).view(np.uint8)),
        }
        for i in range(6)
    }
    return [1, 7, None, {"fields": fields, "small": list(range(40)), "name": "x" * 300}]


def test_the_pieces_arrive_in_order_as_the_joined_message_through_partial_sends() -> None:
    message = _message()
    packed = pack_parts(message)
    assert len(packed.parts) > 2 and len(packed) == len(pack(message))
    tx, rx = _pair()
    out: list[bytes] = []
    reader = threading.Thread(target=_receive_all, args=(rx, len(packed), out, 0.001))
    reader.start()
    send_parts(tx, packed.parts, 5.0)  # a 4 KiB send buffer and a slow reader: many partial sends
    reader.join(10)
    assert out == [pack(message)] == [bytes(packed)]
    tx.close()
    rx.close()


def test_a_reader_that_stops_reading_times_the_whole_send_out() -> None:
    tx, rx = _pair()
    parts = [bytes(1 << 20), memoryview(bytes(1 << 20))]
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        send_parts(tx, parts, 0.3)
    assert time.monotonic() - t0 < 2.0
    tx.close()
    rx.close()


class _NoSendmsg:
    """A socket as Windows has it: no ``sendmsg``."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def settimeout(self, t: float | None) -> None:
        self._sock.settimeout(t)

    def sendall(self, data: bytes) -> None:
        self._sock.sendall(data)


def test_without_sendmsg_the_pieces_go_joined() -> None:
    message = _message()
    packed = pack_parts(message)
    tx, rx = _pair(1 << 20)
    out: list[bytes] = []
    reader = threading.Thread(target=_receive_all, args=(rx, len(packed), out))
    reader.start()
    send_parts(_NoSendmsg(tx), packed.parts, 5.0)  # type: ignore[arg-type]
    reader.join(10)
    assert out == [pack(message)]
    tx.close()
    rx.close()
