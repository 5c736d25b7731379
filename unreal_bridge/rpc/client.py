"""The blocking msgpack-RPC client: one TCP socket, a deadline for each whole call, answers decoded
straight to NumPy arrays (:mod:`rt_lidar.unreal_bridge.fast_decode`), requests kept in flight."""

from __future__ import annotations

import collections
import contextlib
import itertools
import select
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy.typing as npt

from .. import fast_decode
from ..errors import ConnectionLost, MessageTooLarge, ProtocolError, RpcError, RpcTimeout
from .messages import NOTIFY, REQUEST, RESPONSE
from .packing import new_packer

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "HINT_PAUSE_S", "RpcClient"]

#: Largest answer a client accepts by default: 256 MiB. The embedded server's lidar answers take
#: ~95 bytes a ray (500 k rays, its default budget: 47 MiB), so up to ~2.7 M rays fit. The client's
#: buffer grows with the bytes that arrive, never to a size a header merely declares.
DEFAULT_MAX_MESSAGE_SIZE = 256 * 1024 * 1024
HINT_PAUSE_S = 0.05
"""Silence after which a reader short of a hinted message size tries to decode what it has anyway."""
SOCK_BUF = 8 * 1024 * 1024  # socket buffers that hold a 100k-point answer whole
_INITIAL_BUF = 1 << 20  # the client's receive buffer between big answers
_KEEP_BUF = 64 << 20  # a grown buffer up to this size is kept for the next answer


class RpcClient:
    """A blocking msgpack-RPC client on one TCP socket (thread-safe: one call in flight at a time).

    Connects on the first call (and again after a lost connection). ``timeout`` is a deadline for the
    whole call (connect, send, every byte of the answer), not for each ``recv``: a server that drips
    bytes cannot hold a call past it. On timeout the connection is closed and :class:`RpcTimeout`
    raised. An answer over ``max_message_size`` bytes is refused (:class:`MessageTooLarge`) as soon as
    its header says so; the receive buffer grows only with bytes that arrived.
    Arguments' floats go as float32 unless ``single_float=False`` (float64, for ``double`` parameters).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 41451,
        timeout: float | None = 60.0,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        single_float: bool = True,
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.max_message_size = max_message_size
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._packer = new_packer(single_float)
        self._sock: socket.socket | None = None
        self._buf = bytearray(min(_INITIAL_BUF, max_message_size + 1))
        self._filled = 0
        self._deadline: float | None = None  # of the call in progress (monotonic), None: no timeout
        self._in_flight: collections.deque[tuple[int, str, Mapping[str, npt.DTypeLike]]] = collections.deque()
        """Requests sent by :meth:`send_request` whose answers are not read yet, in the order sent."""
        self._answers: dict[int, Any] = {}
        """Answers read ahead of the one a call waited for (by msgid)."""

    # connection ------------------------------------------------------------------------------------
    def connect(self) -> None:
        """Open the connection now (calls do it on demand)."""
        with self._lock:
            self._connect(None)

    def _remaining(self, method: str | None, doing: str) -> float | None:
        """Seconds left to the call's deadline (None: no deadline); :class:`RpcTimeout` when none."""
        if self._deadline is None:
            return None
        left = self._deadline - time.monotonic()
        if left <= 0:
            self.close()
            raise RpcTimeout(method, f"{doing}: the call's {self.timeout} s deadline passed")
        return left

    def _connect(self, method: str | None) -> socket.socket:
        if self._sock is not None:
            return self._sock
        try:
            left = self._remaining(method, "connecting")
            sock = socket.create_connection((self.host, self.port), timeout=left)
        except TimeoutError as exc:
            raise RpcTimeout(method, f"connecting to {self.host}:{self.port} timed out") from exc
        except OSError as exc:
            raise ConnectionLost(method, f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCK_BUF)
        self._sock = sock
        self._filled = 0
        self._shrink()
        return sock

    def _shrink(self) -> None:
        """Drop a buffer a big answer grew (memory goes back after a spike)."""
        if len(self._buf) > _KEEP_BUF and self._filled <= _INITIAL_BUF:
            small = bytearray(min(_INITIAL_BUF, self.max_message_size + 1))
            small[: self._filled] = self._buf[: self._filled]
            self._buf = small

    def close(self) -> None:
        """Close the connection (a later call reconnects; answers still in flight are lost)."""
        self._in_flight.clear()
        self._answers.clear()
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # calls -----------------------------------------------------------------------------------------
    def call(self, method: str, *args: Any) -> Any:
        """Call ``method(*args)`` and return its result as msgpack decodes it (str keys, bytes for bin)."""
        return self._roundtrip(method, args, {})

    def call_arrays(self, method: str, args: Sequence[Any], arrays: Mapping[str, npt.DTypeLike]) -> Any:
        """Call ``method(*args)``; arrays under the map keys in ``arrays`` come back as NumPy arrays.

        This is the fast path for big numeric answers (``point_cloud``): see :mod:`fast_decode`.
        """
        return self._roundtrip(method, tuple(args), arrays)

    def notify(self, method: str, *args: Any) -> None:
        """Send the notification ``[2, method, args]`` (no answer comes)."""
        with self._lock:
            self._start_deadline()
            self._send(method, self._packer.pack([NOTIFY, method, list(args)]))

    def _start_deadline(self) -> None:
        self._deadline = None if self.timeout is None else time.monotonic() + self.timeout

    def _send(self, method: str, data: bytes) -> None:
        sock = self._connect(method)
        try:
            sock.settimeout(self._remaining(method, "sending the request"))
            sock.sendall(data)
        except TimeoutError as exc:
            self.close()
            raise RpcTimeout(
                method, f"sending the request: the call's {self.timeout} s deadline passed"
            ) from exc
        except OSError as exc:
            self.close()
            raise ConnectionLost(method, f"sending the request failed: {exc}") from exc

    def send_request(
        self, method: str, args: Sequence[Any], arrays: Mapping[str, npt.DTypeLike] | None = None
    ) -> int:
        """Send the request ``method(*args)`` now and return its msgid; :meth:`read_response` takes its
        answer later. Meanwhile the server works on it while this side does something else (a frame's
        decode overlapping the server's cast of the next one); the connection serves requests in order,
        so any later call reads this answer first and keeps it for :meth:`read_response`."""
        with self._lock:
            self._start_deadline()
            msgid = next(self._ids) & 0xFFFFFFFF
            self._send(method, self._packer.pack([REQUEST, msgid, method, list(args)]))
            self._in_flight.append((msgid, method, arrays or {}))
            return msgid

    def read_response(self, msgid: int) -> Any:
        """The result of the request :meth:`send_request` sent as ``msgid`` (the whole call's timeout
        counts from now); its error as :class:`RpcError`. :class:`ConnectionLost` when the connection
        went away since (its answer is lost with it)."""
        with self._lock:
            self._start_deadline()
            while msgid not in self._answers:
                if not any(m == msgid for m, _, _ in self._in_flight):
                    raise ConnectionLost(None, f"the answer to request {msgid} was lost with its connection")
                self._read_in_flight()
            method, message = self._answers.pop(msgid)
        return self._result(method, message)

    def _read_in_flight(self) -> None:
        """Read the answer of the oldest request in flight into :attr:`_answers`."""
        msgid, method, arrays = self._in_flight[0]
        message = self._read_message(method, arrays)
        self._in_flight.popleft()
        self._check_response(method, msgid, message)
        self._answers[msgid] = (method, message)

    def _check_response(self, method: str, msgid: int, message: Any) -> None:
        if not (
            isinstance(message, list) and len(message) == 4 and message[0] == RESPONSE and message[1] == msgid
        ):
            self.close()
            raise ProtocolError(f"answer to '{method}' (id {msgid}) is not its response: {message!r:.80}")

    @staticmethod
    def _result(method: str, message: list[Any]) -> Any:
        if message[2] is not None:
            raise RpcError(method, message[2])
        return message[3]

    def _roundtrip(self, method: str, args: tuple[Any, ...], arrays: Mapping[str, npt.DTypeLike]) -> Any:
        with self._lock:
            self._start_deadline()
            msgid = next(self._ids) & 0xFFFFFFFF
            self._send(method, self._packer.pack([REQUEST, msgid, method, list(args)]))
            while self._in_flight:  # answers of requests sent ahead come first: kept for their reader
                self._read_in_flight()
            message = self._read_message(method, arrays)
            self._check_response(method, msgid, message)
        return self._result(method, message)

    def _read_message(self, method: str, arrays: Mapping[str, npt.DTypeLike]) -> Any:
        """Receive one whole message into the buffer and decode it.

        Decoding is tried when the stream pauses, so a big answer is decoded once, not once per chunk:
        at once if the buffer holds the size the last try said is needed (or nothing is known yet),
        after :data:`HINT_PAUSE_S` of silence short of it (that size is exact for uniform numeric
        arrays, only a hint otherwise). The buffer doubles only when full, so its size stays within
        twice the bytes received; a message that surely needs more than ``max_message_size`` bytes
        is refused before they come.
        """
        sock = self._sock
        assert sock is not None
        need, attempt = 1, self._filled > 0
        while True:
            if attempt:
                view = memoryview(self._buf)[: self._filled]
                try:
                    message, end = fast_decode.decode(view, 0, arrays)
                except fast_decode.Truncated as exc:
                    need = max(exc.need, self._filled + 1)
                    self._refuse_if_over(method, exc.least)
                except Exception as exc:
                    self.close()
                    raise ProtocolError(f"invalid msgpack in the answer to '{method}': {exc}") from exc
                else:
                    rest = self._filled - end
                    if rest:  # bytes of a following message (same length slice: no resize)
                        self._buf[:rest] = self._buf[end : self._filled]
                    self._filled = rest
                    self._shrink()
                    return message
                finally:
                    del view
            self._refuse_if_over(method, self._filled + 1)
            if self._filled == len(self._buf):
                grown = bytearray(min(2 * len(self._buf), self.max_message_size + 1))
                grown[: self._filled] = self._buf[: self._filled]
                self._buf = grown
            left = self._remaining(method, f"{self._filled} bytes of the answer received")
            try:
                sock.settimeout(left)
                got = sock.recv_into(memoryview(self._buf)[self._filled :])
            except TimeoutError as exc:
                self.close()
                got_so_far = f"{self._filled} bytes of the answer received"
                raise RpcTimeout(
                    method, f"{got_so_far}: the call's {self.timeout} s deadline passed"
                ) from exc
            except OSError as exc:
                self.close()
                raise ConnectionLost(method, f"receiving the answer failed: {exc}") from exc
            if got == 0:
                self.close()
                raise ConnectionLost(method, "the server closed the connection")
            self._filled += got
            # all hinted bytes here: decode when the burst ends; short of the hint: after a pause
            wait = 0.0 if need <= 1 or self._filled >= need else HINT_PAUSE_S
            if self._deadline is not None:
                wait = min(wait, max(self._deadline - time.monotonic(), 0.0))
            attempt = not select.select([sock], [], [], wait)[0]

    def _refuse_if_over(self, method: str, size: int) -> None:
        if size > self.max_message_size:
            self.close()
            raise MessageTooLarge(
                f"answer to '{method}' declares at least {size} bytes; the client's cap is "
                f"{self.max_message_size} bytes (max_message_size)"
            )
