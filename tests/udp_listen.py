"""Collecting in tests what a UDP sink sends to a loopback port."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def datagrams(rcvbuf: int = 8 << 20, idle_s: float = 2.0) -> Iterator[tuple[int, list[bytes]]]:
    """``(port, got)``: a socket bound to a free 127.0.0.1 port whose datagrams a thread appends to
    ``got`` until none has come for ``idle_s``; leaving the block waits for that, then closes it."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(idle_s)
    got: list[bytes] = []

    def listen() -> None:
        try:
            while True:
                got.append(rx.recv(65535))
        except TimeoutError:
            pass

    thread = threading.Thread(target=listen)
    thread.start()
    try:
        yield rx.getsockname()[1], got
    finally:
        thread.join()
        rx.close()
