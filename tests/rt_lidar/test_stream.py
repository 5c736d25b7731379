"""The ZeroMQ stream: real sockets on loopback; headers, zero-copy buffers, drops, reconnects."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.points import POINT_DTYPE
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.base import SINKS, SinkContext
from rt_lidar.sinks.stream import StreamPublisher, StreamSubscriber, ZmqStreamSink, decode_frame


def _scan(n: int, index: int = 0) -> Scan:
    pts = np.zeros(n, POINT_DTYPE)
    pts["x"] = np.linspace(1, 50, n, dtype=np.float32)
    pts["intensity"] = np.arange(n) % 255
    pts["ring"] = np.arange(n) % 64
    return Scan(index, index * 100_000_000, pts, fired=n + 10, dropped=10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _first_frame(sink: ZmqStreamSink, sub: StreamSubscriber, scan: Scan, timeout: float = 5.0) -> dict:
    """Publish until the subscriber is joined (PUB drops everything before the handshake)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        sink.write(scan)
        got = sub.poll(50)
        if "scan" in got:
            return got
    raise AssertionError("subscriber never received a frame")


@pytest.fixture
def sink():
    s = ZmqStreamSink("tcp://127.0.0.1:*", hwm=2)
    s.open(SinkContext(preset=load_preset("HDL-64E")))
    yield s
    s.close()


def test_without_nodrop_a_full_subscriber_loses_frames_the_publisher_cannot_see() -> None:
    """``nodrop=0``: ZeroMQ drops per subscriber, silently; only the subscriber's gaps show it."""
    s = ZmqStreamSink("tcp://127.0.0.1:*", hwm=2, nodrop=False)
    s.open(SinkContext(preset=load_preset("HDL-64E")))
    scan = _scan(131_072)
    try:
        with StreamSubscriber(s.address, rcvhwm=2) as sub:
            _first_frame(s, sub, scan)
            for _ in range(60):
                s.write(scan)
            while sub.poll(300):
                time.sleep(0.05)
            # PUB drops the newest messages at its high-water mark, so what was queued arrives in
            # order; the frame after the drain shows the loss as a gap, however fast the reader was
            _first_frame(s, sub, scan)
            assert sub.stats.gaps > 0 and s.stats.dropped == 0
    finally:
        s.close()


def test_roundtrip_header_and_points(sink: ZmqStreamSink) -> None:
    scan = _scan(5000, index=7)
    with StreamSubscriber(sink.address) as sub:
        got = _first_frame(sink, sub, scan)["scan"]
    h = got.header
    assert h["kind"] == "scan" and h["v"] == 1 and h["preset"] == "HDL-64E" and h["frame_id"] == "lidar"
    assert h["n"] == 5000 and h["scan_index"] == 7 and h["sim_time_ns"] == 700_000_000
    assert abs(h["wall_time_ns"] - time.time_ns()) < 5e9 and len(h["elevations_deg"]) == 64
    assert got.points is not None and got.points.dtype == POINT_DTYPE
    np.testing.assert_array_equal(got.points, scan.points)
    assert not got.points.flags.owndata  # a view of the received message, not a copy


def test_publish_never_blocks_without_subscriber(sink: ZmqStreamSink) -> None:
    scan = _scan(131_072)
    for _ in range(40):
        sink.write(scan)
    # nobody subscribes: every frame goes nowhere, at once, and the publisher says so
    assert sink.stats.sent + sink.stats.dropped == 40 and sink.stats.unheard == 40


def test_slow_subscriber_drops_are_counted(sink: ZmqStreamSink) -> None:
    scan = _scan(131_072)
    with StreamSubscriber(sink.address, rcvhwm=2) as sub:
        first = _first_frame(sink, sub, scan)["scan"].seq
        assert sink.publisher is not None and sink.publisher.subscribers == 1
        dropped0 = sink.stats.dropped
        t0 = time.perf_counter()
        for _ in range(60):  # 60 x 4.7 MB: far more than the HWMs and the TCP buffers hold
            sink.write(scan)
        assert time.perf_counter() - t0 < 1.0  # the publisher did not wait for the reader
        last = -1
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 0.5:
            got = sub.poll(20)
            if "scan" in got:
                last, quiet_since = got["scan"].seq, time.monotonic()
                time.sleep(0.05)  # a slow reader
        sink.write(scan)  # the queue is empty now: this one arrives, so no drop lies past the last seen
        got = sub.poll(2000)
        last = got["scan"].seq
        st = sub.stats
    assert st.dropped > 0 and st.gaps > 0
    # every sequence number from the first to the last one seen is either received or counted as lost
    assert st.received + st.gaps == last - first + 1
    # and both sides counted the same drops: the publisher's are exactly the subscriber's gaps
    assert sink.stats.dropped - dropped0 == st.gaps


def test_subscriber_keeps_latest_and_counts_skipped(sink: ZmqStreamSink) -> None:
    scan = _scan(100)
    with StreamSubscriber(sink.address, rcvhwm=100) as sub:
        first = _first_frame(sink, sub, scan)["scan"].seq
        for _ in range(5):
            sink.write(scan)
            time.sleep(0.05)  # paced, so the PUB side's HWM of 2 drops none even on a busy machine
        time.sleep(0.5)
        received0, skipped0 = sub.stats.received, sub.stats.skipped
        got = sub.poll(100)
        st = sub.stats
        # the PUB side's HWM of 2 may drop some (silently); whatever arrived, only the newest is kept
        assert st.received + st.gaps == got["scan"].seq - first + 1
        assert st.received - received0 >= 2
        assert st.skipped - skipped0 == st.received - received0 - 1


def test_reconnects_after_publisher_restart() -> None:
    address = f"tcp://127.0.0.1:{_free_port()}"
    ctx = SinkContext(preset=load_preset("VLP-16"))
    first = ZmqStreamSink(address)
    first.open(ctx)
    sub = StreamSubscriber(address, reconnect_after_s=0.3)
    try:
        _first_frame(first, sub, _scan(100))
        for _ in range(3):
            first.write(_scan(100))
        while sub.poll(300):  # drain what is in flight, however slow the machine
            pass
        first.close()
        time.sleep(0.5)
        assert sub.poll(400) == {}  # silent: the subscriber makes a new socket
        second = ZmqStreamSink(address)
        second.open(ctx)
        try:
            got = _first_frame(second, sub, _scan(100))
        finally:
            second.close()
        assert got["scan"].header["preset"] == "VLP-16"
        assert sub.stats.reconnects >= 1 and sub.stats.restarts == 1
    finally:
        sub.close()


def test_camera_frames_and_sink_registry(sink: ZmqStreamSink) -> None:
    rgb = np.random.default_rng(0).integers(0, 255, (27, 48, 3), dtype=np.uint8)
    mask = np.linspace(0, 1, 27 * 48, dtype=np.float32).reshape(27, 48)
    with StreamSubscriber(sink.address) as sub:
        _first_frame(sink, sub, _scan(10))
        sink.write_camera(rgb, mask, 123)
        end = time.monotonic() + 3
        got: dict = {}
        while "camera" not in got and time.monotonic() < end:
            got = sub.poll(50)
    cam = got["camera"]
    np.testing.assert_array_equal(cam.rgb, rgb)
    np.testing.assert_array_equal(cam.mask, mask)
    assert cam.header["sim_time_ns"] == 123 and cam.seq == 0
    made = SINKS["zmq"]("tcp://127.0.0.1:*", {"hwm": "3", "frame_id": "top"})
    assert isinstance(made, ZmqStreamSink) and made.hwm == 3 and made.frame_id == "top"
    with pytest.raises(ConfigError, match=r"sink zmq: unknown option.*bogus.*allowed: camera_every"):
        SINKS["zmq"]("tcp://127.0.0.1:*", {"bogus": "1"})
    assert SINKS["zmq"]("tcp://127.0.0.1:*", {"camera_every": "5"}).camera_every == 5  # type: ignore[attr-defined]
    assert SINKS["zmq"]("tcp://127.0.0.1:*", {"nodrop": "0"}).nodrop is False  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="sink zmq: option camera_every='often': must be a whole number"):
        SINKS["zmq"]("tcp://127.0.0.1:*", {"camera_every": "often"})
    with pytest.raises(ConfigError, match=r"sink zmq: option camera_every='-1': must be in \[0, "):
        SINKS["zmq"]("tcp://127.0.0.1:*", {"camera_every": "-1"})


def test_decode_frame_from_bytes() -> None:
    pub = StreamPublisher("tcp://127.0.0.1:*")
    pub.close()
    pts = _scan(3).points
    import json

    header = {"kind": "scan", "seq": 4, "fields": pts.dtype.descr, "n": 3}
    frame = decode_frame([json.dumps(header).encode(), pts.tobytes()])
    assert frame.seq == 4 and frame.points is not None
    np.testing.assert_array_equal(frame.points, pts)


def test_every_sector_is_published_and_the_sectors_make_the_scan() -> None:
    import zmq

    from rt_lidar.pipeline.builder import build_pipeline
    from rt_lidar.sinks.fanout import SinkFanout

    address = f"tcp://127.0.0.1:{_free_port()}"
    built = build_pipeline("VLP-16", "street", sim_hz=40.0)
    sink = ZmqStreamSink(address, hwm=1000, sectors=True)
    fan = SinkFanout([sink])
    fan.open(SinkContext(preset=built.preset))
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVHWM, 1000)
    sub.connect(address)
    frames: list = []
    try:
        # a subscriber joins a PUB socket asynchronously: publish a probe until one gets through
        deadline = time.monotonic() + 10
        while not frames and time.monotonic() < deadline:
            fan.write(_scan(10, index=999))
            if sub.poll(100):
                frames.append(decode_frame(sub.recv_multipart()))
        assert frames, "the subscriber never joined"
        built.pipeline.on_sector = fan.write_sector
        scans = built.pipeline.scans(2)
        for scan in scans:
            fan.write(scan)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum(f.kind == "scan" and f.seq >= 0 for f in frames) < 20:
            if sub.poll(100):
                frames.append(decode_frame(sub.recv_multipart()))
            elif any(f.kind == "scan" and f.header.get("scan_index") == scans[-1].index for f in frames):
                break
    finally:
        fan.close()
        sub.close(linger=0)
    sectors = [f for f in frames if f.kind == "sector"]
    (last,) = [f for f in frames if f.kind == "scan" and f.header.get("scan_index") == scans[-1].index]
    # a 10 Hz scan at f_sim 40 Hz is 4 sectors; the scan is exactly the union of its sectors
    start = int(last.header["sim_time_ns"])
    mine = [s for s in sectors if start <= s.header["sim_time_ns"] < start + 100_000_000]
    assert len(mine) == 4
    union = np.concatenate([s.points for s in mine])
    assert union.size == last.points.size
    np.testing.assert_array_equal(union["t"] - start, last.points["t"])
    np.testing.assert_array_equal(union["x"], last.points["x"])


def test_the_publisher_knows_its_subscribers(sink: ZmqStreamSink) -> None:
    scan = _scan(10)
    pub = sink.publisher
    assert pub is not None and pub.subscribers == 0
    subs = [StreamSubscriber(sink.address) for _ in range(2)]
    for sub in subs:
        _first_frame(sink, sub, scan)
    assert pub.subscribers == 2
    subs[0].close()
    end = time.monotonic() + 5.0
    while pub.subscribers != 1 and time.monotonic() < end:  # the unsubscription comes with a publish
        sink.write(scan)
        time.sleep(0.02)
    assert pub.subscribers == 1
    subs[1].close()
    while pub.subscribers != 0 and time.monotonic() < end:
        sink.write(scan)
        time.sleep(0.02)
    unheard = sink.stats.unheard
    sink.write(scan)
    assert pub.subscribers == 0 and sink.stats.unheard == unheard + 1


def test_a_subscriber_that_stopped_reading_does_not_hold_up_another(sink: ZmqStreamSink) -> None:
    """Two subscribers, one in a process that never reads (then is suspended): the other still gets
    every frame, and the publisher drops nothing on its account."""
    import os
    import signal
    import subprocess
    import sys

    code = (
        "import time; from rt_lidar.sinks.stream import StreamSubscriber; "
        f"s = StreamSubscriber({sink.address!r}); print('up', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"up"
        scan = _scan(131_072)
        with StreamSubscriber(sink.address, background=True) as sub:
            end = time.monotonic() + 10.0
            while (sink.publisher is None or sink.publisher.subscribers < 2) and time.monotonic() < end:
                sink.write(scan)  # both joined (the subscriptions are read as frames go out)
                time.sleep(0.02)
            os.kill(child.pid, signal.SIGSTOP)
            received0 = sub.stats.received
            for _ in range(60):  # 60 x 4.7 MB: far more than the stopped one's queue and TCP buffers
                sink.write(scan)
                time.sleep(0.03)
            time.sleep(0.3)
            assert sub.stats.received - received0 >= 55, sub.stats
            assert sink.stats.dropped == 0
    finally:
        child.kill()
        child.wait()


def test_the_frames_published_just_before_close_reach_the_subscriber_and_close_is_bounded() -> None:
    """A run that ends right after publishing its last scans: closing gives the queued frames up to
    CLOSE_LINGER_MS to go out (they did not before: the end of a run was lost), and a subscriber that
    reads nothing never holds the close up longer."""
    import json

    import zmq

    from rt_lidar.sinks.stream import CLOSE_LINGER_MS

    pub = StreamPublisher("tcp://127.0.0.1:*", hwm=1000)
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVHWM, 1000)
    sub.connect(pub.address)
    deadline = time.monotonic() + 10
    while pub.subscribers == 0 and time.monotonic() < deadline:  # its subscription has arrived
        pub.publish({"kind": "scan", "i": -1}, [])
        time.sleep(0.01)
    assert pub.subscribers == 1
    payload = np.zeros(200_000, np.uint8)  # 200 kB a frame: several still queued at the close
    for i in range(30):
        assert pub.publish({"kind": "scan", "i": i}, [payload])
    pub.close()
    got = []
    while sub.poll(2000):
        parts = sub.recv_multipart()
        header = json.loads(parts[0])
        if header["i"] >= 0:  # (not a probe)
            assert len(parts[1]) == payload.size
            got.append(header["i"])
    sub.close(linger=0)
    assert got == list(range(30))

    stalled = StreamPublisher("tcp://127.0.0.1:*", hwm=1000, nodrop=False)
    reader = zmq.Context.instance().socket(zmq.SUB)  # subscribes, then never reads
    reader.setsockopt(zmq.SUBSCRIBE, b"")
    reader.setsockopt(zmq.RCVHWM, 1)
    reader.setsockopt(zmq.RCVBUF, 4096)
    reader.connect(stalled.address)
    time.sleep(0.2)
    big = np.zeros(2_000_000, np.uint8)
    for _ in range(50):
        stalled.publish({"kind": "scan"}, [big])
    t0 = time.monotonic()
    stalled.close()
    assert time.monotonic() - t0 < CLOSE_LINGER_MS / 1000 + 1.0
    reader.close(linger=0)
