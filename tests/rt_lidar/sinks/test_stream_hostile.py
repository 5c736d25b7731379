"""The stream subscriber against a hostile publisher: a real ZeroMQ PUB on loopback sends garbage, then
good frames. Bad messages are counted and skipped, the reader thread lives on, oversized ones are capped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import numpy as np
import pytest
import zmq

from rt_lidar.points import POINT_DTYPE
from rt_lidar.sinks.stream import FrameError, StreamSubscriber, decode_frame

GARBAGE: list[list[bytes]] = [
    [b"\xff\xfe not json"],
    [b"[1, 2, 3]"],  # JSON, not an object
    [b"[" * 100_000],  # nesting that makes json raise RecursionError
    [b"[" + b"1," * 600_000 + b"1]"],  # a 1.2 MB header: over MAX_HEADER_BYTES, never parsed
    [b'{"kind": "evil"}'],
    [b'{"kind": "scan", "fields": "nope", "n": 1}', b"\0" * 64],
    [b'{"kind": "scan", "fields": [["x", "|O"]], "n": 1}', b"\0" * 8],
    [b'{"kind": "scan", "fields": [["x", "<f4"]], "n": 1000000}', b"\0" * 4],  # short buffer
    [b'{"kind": "scan", "fields": [["x", "<f4"]], "n": -5}', b""],
    [b'{"kind": "scan", "fields": [["x", "<f4"]], "n": 3}'],  # no data part
    [b'{"kind": "scan", "seq": "x", "fields": [["x", "<f4"]], "n": 0}', b""],
    [b'{"kind": "camera", "height": -1, "width": 3}', b""],
    [b'{"kind": "camera", "height": 100, "width": 100}', b"\0" * 10],
    [b'{"kind": "camera", "height": 1, "width": 1, "mask": true, "mask_shape": [1e9, 2]}', b"abc", b""],
]


def good_frame(seq: int, n: int = 100) -> list[bytes]:
    pts = np.zeros(n, POINT_DTYPE)
    pts["x"] = np.arange(n)
    header = {"v": 1, "kind": "scan", "seq": seq, "session": "s", "fields": POINT_DTYPE.descr, "n": n}
    return [json.dumps(header).encode(), pts.tobytes()]


@pytest.fixture
def pub() -> Iterator[tuple[zmq.Socket, str]]:
    sock = zmq.Context.instance().socket(zmq.PUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind("tcp://127.0.0.1:*")
    yield sock, sock.getsockopt_string(zmq.LAST_ENDPOINT)
    sock.close(linger=0)


def until_good(
    sock: zmq.Socket, sub: StreamSubscriber, before: list[list[bytes]], timeout: float = 10
) -> int:
    """Send ``before`` then a good frame until the subscriber shows one (PUB drops all before the
    handshake); returns its ``seq``."""
    end, seq = time.monotonic() + timeout, 0
    while time.monotonic() < end:
        for parts in before:
            sock.send_multipart(parts)
        sock.send_multipart(good_frame(seq))
        seq += 1
        got = sub.poll(100)
        if "scan" in got:
            frame = got["scan"]
            assert frame.points is not None and frame.points["x"][99] == 99
            return frame.seq
    raise AssertionError("no good frame arrived")


def test_decode_frame_refuses_each_garbage_message_with_a_reason() -> None:
    for parts in GARBAGE:
        with pytest.raises(FrameError):
            decode_frame(parts)
    assert decode_frame(good_frame(3)).seq == 3


def test_garbage_is_counted_and_skipped_and_the_reader_thread_lives(pub: tuple[zmq.Socket, str]) -> None:
    sock, address = pub
    with StreamSubscriber(address, background=True, rcvhwm=1000) as sub:
        until_good(sock, sub, [])  # joined
        bad_before = sub.stats.bad
        for parts in GARBAGE:
            sock.send_multipart(parts)
        until_good(sock, sub, [])
        assert sub._thread is not None and sub._thread.is_alive()
        assert sub.stats.bad - bad_before == len(GARBAGE), sub.stats
        assert sub.stats.last_bad
        # and it keeps going: more good frames after the garbage
        bad_before = sub.stats.bad
        until_good(sock, sub, GARBAGE[:3])
        assert sub.stats.bad >= bad_before + 3 and sub._thread.is_alive()


def test_a_message_over_the_cap_is_skipped(pub: tuple[zmq.Socket, str]) -> None:
    """Two parts each under MAXMSGSIZE but over the cap together: the whole-message check refuses it."""
    sock, address = pub
    cap = 1 << 20
    with StreamSubscriber(address, background=True, max_frame_bytes=cap, rcvhwm=1000) as sub:
        until_good(sock, sub, [])
        header = json.dumps({"kind": "scan", "fields": [["x", "<f4"]], "n": 150_000}).encode()
        sock.send_multipart([header, b"\0" * 600_000, b"\0" * 600_000])
        until_good(sock, sub, [])
        assert sub.stats.bad >= 1 and "cap" in sub.stats.last_bad, sub.stats


def test_a_part_over_maxmsgsize_is_not_buffered_and_good_frames_follow(pub: tuple[zmq.Socket, str]) -> None:
    """A 64 MiB part against a 1 MiB cap: ZeroMQ drops that connection before buffering the part; the
    subscriber reconnects and takes the good frames that follow."""
    sock, address = pub
    with StreamSubscriber(address, background=True, max_frame_bytes=1 << 20, rcvhwm=1000) as sub:
        until_good(sock, sub, [])
        sock.send_multipart([b'{"kind": "scan"}', b"\0" * (64 << 20)])
        until_good(sock, sub, [])
        assert sub._thread is not None and sub._thread.is_alive()
