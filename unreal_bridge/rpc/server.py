"""The threaded msgpack-RPC server with rpclib's behaviour: one thread per connection (capped), every
request bounded in size, containers, nesting and time (:mod:`rt_lidar.unreal_bridge.limits`), answers that a
handler defers (:class:`~rt_lidar.unreal_bridge.later.Later`) worked out on worker threads and sent in request
order. Nothing is ever unpickled."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import inspect
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgpack

from ..errors import BackendError, ProtocolError
from ..later import CONNECTION_DEPTH, CONNECTION_HELD, Later, Outbox, Workers
from ..limits import RequestRefused, ServerLimits, check_params, is_loopback
from .client import SOCK_BUF
from .messages import NOTIFY, REQUEST, RESPONSE, arity_message, exception_message, not_found_message
from .packing import Packed, new_packer, pack_parts, send_parts

__all__ = ["Handler", "RpcServer"]

_RECV_CHUNK = 256 * 1024
_log = logging.getLogger(__name__)

Handler = Callable[..., Any]


def _arities(func: Handler) -> tuple[int, ...]:
    params = inspect.signature(func).parameters.values()
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return (sum(1 for p in params if p.kind in kinds),)


class RpcServer:
    """A threaded msgpack-RPC server with rpclib's behaviour; bind functions with :meth:`register`.

    ``port=0`` picks a free port (read :attr:`port`). Handlers run in the connection's thread; calls
    from different connections are serialised by one lock unless ``serialize=False`` (a handler
    registered with ``locked=False`` takes :attr:`call_lock` itself, around bounded work only).
    ``limits`` bounds what clients can cost (:class:`~rt_lidar.unreal_bridge.limits.ServerLimits`);
    ``max_message_size`` is the largest request.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        max_message_size: int | None = None,
        serialize: bool = True,
        limits: ServerLimits | None = None,
    ) -> None:
        limits = limits or ServerLimits()
        if max_message_size is not None:
            limits = dataclasses.replace(limits, max_request_bytes=int(max_message_size))
        self.limits = limits
        self.max_message_size = limits.max_request_bytes
        self._funcs: dict[str, tuple[Handler, tuple[int, ...], bool]] = {}
        self._call_lock: threading.Lock | None = threading.Lock() if serialize else None
        self._listener = socket.create_server((host, port), reuse_port=False)
        self._listener.setblocking(False)
        self.host, self.port = self._listener.getsockname()[:2]
        if not is_loopback(str(self.host)):
            _log.warning(
                "serving %s:%s beyond this machine: the AirSim API has no authentication, anyone who "
                "reaches the port can drive the sim",
                self.host,
                self.port,
            )
        self._wake_r, self._wake_w = socket.socketpair()
        self._closed = threading.Event()
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._conns_lock = threading.Lock()
        self._last_active: dict[socket.socket, float] = {}  # when a connection last finished a call
        self._busy: set[socket.socket] = set()  # connections whose call is being handled
        self._fresh: dict[socket.socket, float] = {}  # accept time of those without a whole request yet
        self._trimmed_at = 0.0  # monotonic time of the last malloc_trim
        self._trim_pending = False
        self._budget_lock = threading.Lock()
        self._pending_total = 0
        self._reply_total = 0
        self._thread: threading.Thread | None = None
        self._workers = Workers()
        """Threads that work out :class:`~rt_lidar.unreal_bridge.later.Later` answers (a cast asked ahead)."""
        self.stats = {
            "refused_connections": 0,
            "accept_errors": 0,
            "closed_for_limits": 0,
            "evicted_idle": 0,
            "evicted_fresh": 0,
        }
        """Counts of connections refused over the cap, failed accepts, connections closed for a limit,
        idle connections and connections without a whole first request closed to make room at the cap."""
        self.on_disconnect: Callable[[], None] | None = None
        """Called (in the connection's thread, without the call lock) after a connection closed."""

    @property
    def call_lock(self) -> contextlib.AbstractContextManager[Any]:
        """The lock that serialises handlers (a no-op without ``serialize``)."""
        return self._call_lock if self._call_lock is not None else contextlib.nullcontext()

    def register(
        self, name: str, func: Handler, arity: int | Sequence[int] | None = None, locked: bool = True
    ) -> None:
        """Bind ``func`` as ``name``; ``arity`` (default: its positional parameter count) is checked.

        ``locked=False``: the handler runs without the call lock (it takes :attr:`call_lock` itself).
        """
        if arity is None:
            arities = _arities(func)
        elif isinstance(arity, int):
            arities = (arity,)
        else:
            arities = tuple(arity)
        self._funcs[name] = (func, arities, locked)

    # lifecycle -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Serve in a background thread."""
        self._thread = threading.Thread(
            target=self.serve_forever, name=f"rpc-accept-{self.port}", daemon=True
        )
        self._thread.start()

    def serve_forever(self) -> None:
        """Accept connections until :meth:`close`; a failed accept never stops it (out of file
        descriptors: it pauses ``accept_backoff_s``, doubling up to 2 s, and tries again)."""
        backoff = self.limits.accept_backoff_s
        with selectors.DefaultSelector() as sel:
            sel.register(self._listener, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._closed.is_set():
                if self._trim_pending:
                    self._trim(0)
                for key, _ in sel.select(timeout=_TRIM_EVERY_S):
                    if key.fileobj is self._wake_r or self._closed.is_set():
                        return
                    try:
                        conn, _addr = self._listener.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError as exc:
                        self.stats["accept_errors"] += 1
                        if exc.errno in _OUT_OF_RESOURCES:
                            _log.warning("accept failed (%s): retrying in %.1f s", exc, backoff)
                            if self._closed.wait(backoff):
                                return
                            backoff = min(2 * backoff, 2.0)
                        continue
                    backoff = self.limits.accept_backoff_s
                    self._spawn(conn)

    def _evict_idle(self) -> bool:
        """At the cap: close the oldest connection that has not sent a whole first request yet (at any
        age: a flood of young held sockets cannot lock clients out), else the one that has gone
        longest without a whole request (idle, or dripping one) if that is long enough; never one in
        a call (its thread sees the shutdown and ends). Called with ``_conns_lock`` held."""
        now = time.monotonic()
        fresh = [c for c in self._fresh if c in self._conns and c not in self._busy]
        if fresh:
            victim = min(fresh, key=lambda c: self._fresh[c])
            self._drop(victim)
            self.stats["evicted_fresh"] += 1
            _log.debug(
                "closing a connection without a first request (%.2f s old) to make room",
                now - self._fresh.get(victim, now),
            )
            return True
        idle = [c for c in self._conns if c not in self._busy]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: self._last_active.get(c, now))
        silent_s = now - self._last_active.get(oldest, now)
        if silent_s < self.limits.evict_idle_after_s:
            return False
        self._drop(oldest)
        self.stats["evicted_idle"] += 1
        _log.warning("closing a connection without a request for %.1f s to make room", silent_s)
        return True

    def _drop(self, conn: socket.socket) -> None:
        """Forget ``conn`` and shut it down (its thread ends); called with ``_conns_lock`` held."""
        self._conns.pop(conn, None)
        self._last_active.pop(conn, None)
        self._fresh.pop(conn, None)
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)

    def _spawn(self, conn: socket.socket) -> None:
        with self._conns_lock:
            full = len(self._conns) >= self.limits.max_connections
            if full and not self._closed.is_set() and self._evict_idle():
                full = False
            if self._closed.is_set() or full:
                if not self._closed.is_set():
                    self.stats["refused_connections"] += 1
                    _log.warning("refusing a connection: %d open", len(self._conns))
                conn.close()
                return
            try:
                conn.setblocking(True)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCK_BUF)
                thread = threading.Thread(target=self._serve_connection, args=(conn,), daemon=True)
                self._conns[conn] = thread
                self._last_active[conn] = self._fresh[conn] = time.monotonic()
                thread.start()
            except (OSError, RuntimeError) as exc:  # out of threads or a socket already reset
                self._conns.pop(conn, None)
                self._fresh.pop(conn, None)
                _log.warning("cannot serve a connection: %s", exc)
                conn.close()

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, close every connection and wait for their threads."""
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._listener.close()
        with self._conns_lock:
            conns = list(self._conns.items())
        for conn, _ in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for _, thread in conns:
            if thread is not threading.current_thread():
                thread.join(timeout)
        self._workers.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> RpcServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connection_count(self) -> int:
        """Connections open now."""
        with self._conns_lock:
            return len(self._conns)

    # connections -----------------------------------------------------------------------------------
    def _charge(self, delta: int) -> bool:
        """Add ``delta`` bytes to the pending total; False (and nothing added) when it would go over."""
        with self._budget_lock:
            if delta > 0 and self._pending_total + delta > self.limits.max_pending_bytes:
                return False
            self._pending_total += delta
            return True

    def _new_unpacker(self, containers: list[int]) -> msgpack.Unpacker:
        lim = self.limits

        def count(obj: Any) -> Any:
            containers[0] += 1
            if containers[0] > lim.max_containers:
                raise RequestRefused(f"a request holds more than {lim.max_containers} arrays and maps")
            return obj

        unpacker = msgpack.Unpacker(
            raw=False,
            strict_map_key=False,
            max_buffer_size=lim.max_request_bytes,
            max_str_len=lim.max_request_bytes,
            max_bin_len=lim.max_request_bytes,
            max_ext_len=lim.max_request_bytes,
            max_array_len=lim.max_array_len,
            max_map_len=lim.max_map_len,
            list_hook=count,
            object_hook=count,
        )
        return unpacker

    def _serve_connection(self, conn: socket.socket) -> None:
        lim = self.limits
        containers = [0]  # arrays and maps of the request now decoding
        unpacker = self._new_unpacker(containers)
        packer = new_packer()
        fed = charged = 0  # bytes fed to the unpacker; bytes charged to the pending budget
        started: float | None = None  # when the request now arriving began
        first_by: float | None = time.monotonic() + lim.first_request_timeout_s  # None once one came
        reason = ""
        outbox = Outbox()  # answers owed, in request order (unreal_bridge.later)
        try:
            while not self._closed.is_set():
                self._flush(conn, outbox)
                if len(outbox) and not outbox.wait(conn, lim.idle_timeout_s):
                    continue  # the answer at the head is ready (or the wait ran out): send it
                now = time.monotonic()
                deadline = now + lim.idle_timeout_s if started is None else started + lim.read_timeout_s
                if first_by is not None:
                    deadline = min(deadline, first_by)
                conn.settimeout(max(deadline - now, 0.001))
                try:
                    data = conn.recv(_RECV_CHUNK)
                except TimeoutError:
                    if first_by is not None and time.monotonic() >= first_by - 0.001:
                        reason = f"no whole first request within {lim.first_request_timeout_s} s"
                    else:
                        reason = "idle" if started is None else "request not whole in time"
                    return
                if not data:  # the client is done sending: what it is owed still goes out
                    self._drain(conn, outbox)
                    return
                if not self._charge(len(data)):
                    reason = "pending bytes over all connections"
                    return
                charged += len(data)
                fed += len(data)
                unpacker.feed(data)
                if started is None:
                    started = now
                for message in unpacker:
                    containers[0] = 0
                    with self._conns_lock:
                        if conn not in self._conns:  # evicted to make room before it was served
                            return
                        self._busy.add(conn)
                        self._fresh.pop(conn, None)
                    first_by = None
                    try:
                        self._make_room(conn, outbox)
                        reply = self._handle(message, packer)
                        if isinstance(reply, _Owed):
                            self._owe(conn, outbox, reply, packer)
                        elif reply is not None:
                            outbox.add(reply)
                        self._flush(conn, outbox)
                    finally:
                        if not len(outbox):
                            self._busy.discard(conn)
                        self._last_active[conn] = time.monotonic()
                pending = fed - unpacker.tell()
                if pending > lim.max_request_bytes:
                    reason = f"request over {lim.max_request_bytes} bytes"
                    return
                self._charge(pending - charged)
                charged = pending
                if pending == 0:
                    started = None
        except msgpack.BufferFull:
            reason = f"request over {lim.max_request_bytes} bytes"
        except RequestRefused as exc:
            reason = str(exc)
        except (ValueError, msgpack.UnpackException, ProtocolError, RecursionError) as exc:
            _log.warning("closing a connection: malformed message: %s", exc)
        except TimeoutError:
            reason = "reply not taken in time"
        except OSError:
            pass
        except Exception:  # a bug must not leak the connection or its budget
            _log.exception("closing a connection after an unexpected error")
        finally:
            outbox.close()
            if reason:
                self.stats["closed_for_limits"] += 1
                _log.warning("closing a connection: %s", reason)
            self._charge(-charged)
            self._trim(fed)
            with self._conns_lock:
                self._conns.pop(conn, None)
                self._last_active.pop(conn, None)
                self._fresh.pop(conn, None)
                self._busy.discard(conn)
            conn.close()
            if self.on_disconnect is not None:
                try:
                    self.on_disconnect()
                except Exception:
                    _log.exception("the disconnect hook failed")

    def _flush(self, conn: socket.socket, outbox: Outbox) -> None:
        """Send the answers at the head of ``outbox`` that are ready, in order."""
        for reply in outbox.ready():
            self._send_reply(conn, reply)
        if not len(outbox):
            self._busy.discard(conn)

    def _send_while(self, conn: socket.socket, outbox: Outbox, waiting: Callable[[], bool]) -> None:
        """While ``waiting()``, wait for the oldest answer being worked on and send the ready ones."""
        while waiting():
            outbox.wait_oldest()
            self._flush(conn, outbox)

    def _make_room(self, conn: socket.socket, outbox: Outbox) -> None:
        """Wait until ``outbox`` holds fewer than :data:`~unreal_bridge.later.CONNECTION_HELD` answers
        (sending those at its head as they get ready) before the next request is run: a client whose
        first answer takes long cannot pile up the answers of the requests it sends behind it."""
        self._send_while(conn, outbox, lambda: len(outbox) >= CONNECTION_HELD)

    def _drain(self, conn: socket.socket, outbox: Outbox) -> None:
        """Send every answer owed, waiting for those still worked on."""
        self._send_while(conn, outbox, lambda: len(outbox) > 0)

    def _owe(self, conn: socket.socket, outbox: Outbox, owed: _Owed, packer: msgpack.Packer) -> None:
        """Work out ``owed`` on a worker thread while this connection reads on, once fewer than
        :data:`~unreal_bridge.later.CONNECTION_DEPTH` answers are owed; in this thread when the server's
        workers are all busy (then as any call: its answer is ready when this returns)."""
        self._send_while(conn, outbox, lambda: outbox.owed() >= CONNECTION_DEPTH)
        future = self._workers.try_submit(lambda: self._answer(owed, new_packer()))
        outbox.add(future if future is not None else self._answer(owed, packer))

    def _send_reply(self, conn: socket.socket, reply: Packed) -> None:
        lim = self.limits
        with self._budget_lock:
            over = self._reply_total + len(reply) > lim.max_reply_bytes_in_flight
            if not over:
                self._reply_total += len(reply)
        if over:
            raise RequestRefused(f"replies over {lim.max_reply_bytes_in_flight} bytes in flight")
        try:
            send_parts(conn, reply.parts, lim.write_timeout_s)
        finally:
            with self._budget_lock:
                self._reply_total -= len(reply)
            self._trim(len(reply))

    def _trim(self, nbytes: int) -> None:
        """After ``nbytes`` were freed (at least :data:`_TRIM_AFTER` counts; 0: the trim left pending),
        hand freed heap back to the system, at most every :data:`_TRIM_EVERY_S`: a trim too soon is
        left pending, and the accept loop does it when its time comes."""
        wanted = nbytes >= _TRIM_AFTER or (nbytes == 0 and self._trim_pending)
        if not wanted:
            return
        now = time.monotonic()
        if now - self._trimmed_at < _TRIM_EVERY_S:
            self._trim_pending = True
            return
        self._trimmed_at, self._trim_pending = now, False
        _release_memory()

    def _handle(self, message: Any, packer: msgpack.Packer) -> Packed | _Owed | None:
        """Dispatch one message; return the reply bytes (None for a notification; an :class:`_Owed`
        for a handler that answered :class:`Later`)."""
        if not isinstance(message, list) or len(message) not in (3, 4):
            raise ProtocolError(f"not a msgpack-RPC message: {message!r:.80}")
        if len(message) == 4 and message[0] == REQUEST:
            _, msgid, method, params = message
            if not isinstance(msgid, int):
                raise ProtocolError(f"request id is not an int: {msgid!r:.40}")
            error, result = self._dispatch(method, params)
            if isinstance(result, Later):
                return _Owed(msgid, str(method), len(params), result)
            return _reply(msgid, str(method), len(params), error, result, packer)
        if len(message) == 3 and message[0] == NOTIFY:
            _, method, params = message
            error, result = self._dispatch(method, params)
            if isinstance(result, Later):
                error = self._work(str(method), len(params), result)[0]
            if error is not None:
                _log.warning("notification %r failed: %s", method, error)
            return None
        raise ProtocolError(f"unexpected msgpack-RPC message type {message[0]!r:.20}")

    def _dispatch(self, method: Any, params: Any) -> tuple[str | None, Any]:
        if not isinstance(params, list):
            params = [params]
        if not isinstance(method, str):
            return f"rpclib: invalid function name {method!r:.40}", None
        entry = self._funcs.get(method)
        if entry is None:
            return not_found_message(method, len(params)), None
        func, arities, locked = entry
        if len(params) not in arities:
            return arity_message(method, arities[0], len(params)), None
        try:
            check_params(params, self.limits.max_depth)
            with self.call_lock if locked else contextlib.nullcontext():
                return None, func(*params)
        except Exception as exc:
            return _error_of(method, len(params), exc), None

    @staticmethod
    def _work(method: str, argc: int, later: Later) -> tuple[str | None, Any]:
        """(error, result) of a :class:`Later` answer, as :meth:`_dispatch` gives a handler's."""
        try:
            return None, later.work()
        except Exception as exc:
            return _error_of(method, argc, exc), None

    def _answer(self, owed: _Owed, packer: msgpack.Packer) -> Packed:
        """The packed answer of ``owed`` (never raises: a failure is the call's error answer)."""
        error, result = self._work(owed.method, owed.argc, owed.later)
        return _reply(owed.msgid, owed.method, owed.argc, error, result, packer)


@dataclasses.dataclass(frozen=True)
class _Owed:
    """A request whose handler answered :class:`Later`."""

    msgid: int
    method: str
    argc: int
    later: Later


def _error_of(method: str, argc: int, exc: Exception) -> str:
    """rpclib's error answer for a handler that raised ``exc``."""
    if isinstance(exc, BackendError):
        return exception_message(method, argc, str(exc))
    _log.debug("handler %r raised", method, exc_info=True)
    info = str(exc.args[0]) if len(exc.args) == 1 else str(exc)
    return exception_message(method, argc, info or type(exc).__name__)


def _reply(
    msgid: int, method: str, argc: int, error: str | None, result: Any, packer: msgpack.Packer
) -> Packed:
    """The packed response; a result that cannot be packed gives the call's error answer instead."""
    try:
        return pack_parts([RESPONSE, msgid, error, result], packer)
    except (TypeError, ValueError, OverflowError) as exc:
        _log.exception("cannot pack the answer to %r", method)
        error = exception_message(method, argc, f"unpackable result: {exc}")
        return pack_parts([RESPONSE, msgid, error, None], packer)


_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_TRIM_AFTER = 4 << 20  # after a reply (or a connection's input) this big, hand freed heap back
_TRIM_EVERY_S = 1.0  # at most this often (a deferred trim follows a skipped one)


def _release_memory() -> None:
    """glibc's ``malloc_trim(0)``: freed memory goes back to the system after a spike (no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
