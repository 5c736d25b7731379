"""Answers worked out after the call (``Later``, unreal_bridge.later) on a real server over loopback: the
connection reads and runs its next requests meanwhile, two such answers of one connection are worked
on at once, and the answers still go out in the order of the requests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest

from rt_lidar.unreal_bridge.later import CONNECTION_DEPTH, CONNECTION_HELD, Workers
from rt_lidar.unreal_bridge.rpc import REQUEST, RESPONSE, Later, RpcClient, RpcServer, exception_message


class Log:
    """What the handlers did, with monotonic times."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any, float]] = []
        self.lock = threading.Lock()
        self.running = 0
        self.most_running = 0

    def note(self, what: str, tag: Any) -> None:
        with self.lock:
            self.events.append((what, tag, time.monotonic()))

    def when(self, what: str, tag: Any) -> float:
        return next(t for w, g, t in self.events if w == what and g == tag)


@pytest.fixture
def served() -> Iterator[tuple[RpcServer, Log]]:
    srv = RpcServer(port=0)
    log = Log()

    def slow(tag: Any, seconds: float) -> Later:
        log.note("asked", tag)  # in request order, in the connection's thread

        def work() -> Any:
            with log.lock:
                log.running += 1
                log.most_running = max(log.most_running, log.running)
            log.note("start", tag)
            time.sleep(seconds)
            log.note("end", tag)
            with log.lock:
                log.running -= 1
            return tag

        return Later(work)

    def fast(tag: Any) -> Any:
        log.note("fast", tag)
        return tag

    def broken() -> Later:
        def work() -> None:
            raise ValueError("the cast failed")

        return Later(work)

    srv.register("slow", slow)
    srv.register("fast", fast)
    srv.register("broken", broken)
    srv.start()
    yield srv, log
    srv.close()


def _send_all(port: int, calls: list[tuple[str, list[Any]]]) -> list[Any]:
    """Send every request at once on one raw connection; the responses in the order they arrived."""
    with socket.create_connection(("127.0.0.1", port), timeout=10.0) as sock:
        sock.sendall(b"".join(msgpack.packb([REQUEST, i, m, p]) for i, (m, p) in enumerate(calls)))
        unpacker = msgpack.Unpacker(raw=False)
        out: list[Any] = []
        while len(out) < len(calls):
            data = sock.recv(65536)
            assert data, "the server closed the connection"
            unpacker.feed(data)
            out.extend(unpacker)
        return out


def test_answers_go_out_in_request_order_while_the_next_requests_run(served) -> None:
    srv, log = served
    got = _send_all(srv.port, [("slow", ["a", 0.6]), ("fast", ["b"]), ("slow", ["c", 0.05])])
    assert [(r[0], r[1], r[2], r[3]) for r in got] == [
        (RESPONSE, 0, None, "a"),
        (RESPONSE, 1, None, "b"),
        (RESPONSE, 2, None, "c"),
    ]
    # the fast call ran, and the third call's work was done, while the first was still being worked on
    assert log.when("fast", "b") < log.when("end", "a")
    assert log.when("end", "c") < log.when("end", "a")


def test_one_connection_owes_at_most_its_depth_of_answers(served) -> None:
    srv, log = served
    calls = [("slow", [k, 0.3]) for k in range(CONNECTION_DEPTH + 2)]
    got = _send_all(srv.port, calls)
    assert [r[3] for r in got] == list(range(CONNECTION_DEPTH + 2))
    assert log.most_running == CONNECTION_DEPTH  # two at once, never more
    # the third is prepared in its turn, but worked on only once the first answer is ready
    assert log.when("start", CONNECTION_DEPTH) >= log.when("end", 0)


def test_a_later_answer_that_fails_is_the_calls_error_answer(served) -> None:
    srv, _log = served
    got = _send_all(srv.port, [("broken", []), ("fast", [1])])
    assert got[0][2] == exception_message("broken", 0, "the cast failed") and got[0][3] is None
    assert (got[1][2], got[1][3]) == (None, 1)


def test_with_every_worker_busy_the_answer_is_worked_out_in_the_connections_thread(served) -> None:
    srv, log = served
    srv._workers = Workers(depth=0)  # no slot ever free
    got = _send_all(srv.port, [("slow", ["a", 0.1]), ("fast", ["b"])])
    assert [r[3] for r in got] == ["a", "b"]
    assert log.when("fast", "b") > log.when("end", "a")  # one call at a time, as before


def test_a_client_gone_with_answers_owed_leaves_the_server_serving(served) -> None:
    srv, log = served
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10.0)
    sock.sendall(
        msgpack.packb([REQUEST, 0, "slow", ["gone", 0.2]]) + msgpack.packb([REQUEST, 1, "fast", [1]])
    )
    deadline = time.monotonic() + 5
    while not any(w == "start" for w, _g, _t in log.events) and time.monotonic() < deadline:
        time.sleep(0.01)
    sock.close()  # before the answer is ready
    time.sleep(0.4)
    assert any(w == "end" and g == "gone" for w, g, _t in log.events)
    with RpcClient(port=srv.port, timeout=10.0) as client:
        assert client.call("fast", 2) == 2
        assert client.call("slow", "after", 0.01) == "after"
    deadline = time.monotonic() + 5
    while srv.connection_count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.connection_count == 0


def test_an_answer_ready_just_after_the_check_still_goes_out(served, monkeypatch) -> None:
    """The worker finishes between the connection's send of the ready answers and its next look: the
    connection must not block on reading with an answer ready (it would wait for the idle timeout)."""
    srv, _log = served
    flush = RpcServer._flush

    def slow_flush(self, conn, outbox) -> None:
        flush(self, conn, outbox)
        time.sleep(0.05)  # the 10 ms job finishes meanwhile

    monkeypatch.setattr(RpcServer, "_flush", slow_flush)
    with RpcClient(port=srv.port, timeout=3.0) as client:
        for k in range(5):
            assert client.call("slow", k, 0.01) == k


def test_a_slow_answer_does_not_let_the_answers_behind_it_pile_up(served) -> None:
    """A long first answer and a flood of requests behind it: the connection runs only as many of them
    as it may hold answers for, then waits for the first to go out."""
    srv, log = served
    calls = [("slow", ["first", 0.5])] + [("fast", [k]) for k in range(12)]
    got = _send_all(srv.port, calls)
    assert [r[3] for r in got] == ["first", *range(12)]
    ran_before = [g for w, g, t in log.events if w == "fast" and t < log.when("end", "first")]
    assert len(ran_before) <= CONNECTION_HELD - 1


def test_a_client_that_stops_sending_still_gets_every_answer_it_is_owed(served) -> None:
    srv, _log = served
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10.0) as sock:
        calls = [("slow", ["a", 0.2]), ("fast", ["b"]), ("slow", ["c", 0.1])]
        sock.sendall(b"".join(msgpack.packb([REQUEST, i, m, p]) for i, (m, p) in enumerate(calls)))
        sock.shutdown(socket.SHUT_WR)  # done sending: reads until the server closes
        unpacker = msgpack.Unpacker(raw=False)
        while data := sock.recv(65536):
            unpacker.feed(data)
        assert [r[3] for r in unpacker] == ["a", "b", "c"]


def test_closing_the_server_does_not_wait_for_answers_still_worked_on() -> None:
    srv = RpcServer(port=0)
    started = threading.Event()

    def long_cast() -> Later:
        def work() -> int:
            started.set()
            time.sleep(3.0)
            return 1

        return Later(work)

    srv.register("long", long_cast)
    srv.start()
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10.0)
    sock.sendall(msgpack.packb([REQUEST, 0, "long", []]))
    assert started.wait(5.0)
    t0 = time.monotonic()
    srv.close(timeout=0.5)
    assert time.monotonic() - t0 < 2.0
    sock.close()
