"""Network faults on a rig's outputs: the rig's stream (one ZeroMQ publisher for every sensor) and
the packet sinks of its ``[[sensor]]`` tables take each sensor's faults, its own and the run-wide ones
that name it; a ZeroMQ SUB socket counts the lost, duplicated and reordered scans per sensor."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import pytest

from rt_lidar.faults.spec import load_faults
from rt_lidar.pipeline.builder import build_world
from rt_lidar.rig import load_rig
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.run import drive_rig
from rt_lidar.rig.stream import RigStream

FRAMES = 40

RIG = """
[[sensor]]
name = "left"
preset = "VLP-16"
mount = { xyz = [0.0, 0.5, 1.8] }
faults = "left_faults.toml"
sinks = ["velodyne-pcap:PCAP"]

[[sensor]]
name = "right"
preset = "VLP-16"
mount = { xyz = [0.0, -0.5, 1.8] }
"""

LEFT_FAULTS = """
[[fault]]
kind = "packet_loss"
rate = 0.2

[[fault]]
kind = "reorder"
rate = 0.2
depth = 2
sink = "zmq"
"""

RUN_WIDE = """
[[fault]]
kind = "duplicate"
rate = 0.25
sensor = "right"
"""


def _receive(address: str, got: dict[str, list[int]], ready: threading.Event, done: threading.Event) -> None:
    import zmq

    from rt_lidar.sinks.stream import decode_frame

    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVHWM, 10000)
    sub.connect(address)
    ready.set()
    try:
        while True:
            if sub.poll(200):
                parts = sub.recv_multipart(copy=False)
                if json.loads(bytes(parts[0])).get("kind") != "scan":  # the warm-up's hellos
                    continue
                frame = decode_frame(parts)
                if frame.kind == "scan":
                    got.setdefault(str(frame.header["sensor"]), []).append(int(frame.header["scan_index"]))
            elif done.is_set():
                return
    finally:
        sub.close(linger=0)


def _injected(sensor: dict, kind: str) -> dict[str, int]:
    (fault,) = [f for f in sensor["faults"] if f["kind"] == kind]
    return fault["injected"]["packets"]


def test_rig_stream_and_sensor_packet_sinks_take_the_network_faults(tmp_path: Path):
    rig_path = tmp_path / "rig.toml"
    rig_path.write_text(RIG.replace("PCAP", str(tmp_path / "left.pcap")))
    (tmp_path / "left_faults.toml").write_text(LEFT_FAULTS)
    (tmp_path / "run.toml").write_text(RUN_WIDE)
    rig = load_rig(rig_path)
    stream = RigStream("tcp://127.0.0.1:*", rig, hwm=10000)
    stream.open()  # bound before the subscriber joins; drive_rig keeps it
    assert stream.publisher is not None
    got: dict[str, list[int]] = {}
    ready, done = threading.Event(), threading.Event()
    rx = threading.Thread(target=_receive, args=(stream.address, got, ready, done), daemon=True)
    rx.start()
    ready.wait(10)
    for _ in range(500):  # a subscription reaches the publisher a moment after the connect
        stream.publisher.publish({"kind": "hello"}, [])
        if stream.publisher.subscribers:
            break
        threading.Event().wait(0.01)
    assert stream.publisher.subscribers == 1
    unheard = stream.publisher.stats.unheard
    loop = RigLoop(rig, build_world("wall"), sim_hz=20.0, seed=4)
    try:
        summary = drive_rig(
            loop,
            FRAMES,
            tmp_path / "out",
            stream=stream,
            write_scans=False,
            seed=4,
            faults=load_faults(tmp_path / "run.toml"),
        )
    finally:
        loop.close()
        done.set()
        rx.join(20)
    assert summary["stream"]["unheard"] == unheard  # every scan was sent to the subscriber
    left, right = summary["sensors"]["left"], summary["sensors"]["right"]
    sent = set(range(FRAMES))
    # left: its own file's loss (every sink of it) and reorder (its stream only)
    lost = _injected(left, "packet_loss")
    assert len(sent - set(got["left"])) == lost["zmq.lost"] > 0
    assert len(got["left"]) == len(set(got["left"]))
    backward = sum(1 for a, b in itertools.pairwise(got["left"]) if b < a)
    assert 0 < backward <= _injected(left, "reorder")["zmq.reordered"]
    assert "velodyne-pcap.reordered" not in _injected(left, "reorder")
    # the sensor's packet sink lost datagrams too (as a one-sensor run's pcap does)
    assert lost["velodyne-pcap.lost"] > 0 and (tmp_path / "left.pcap").stat().st_size > 0
    # right: the run-wide duplicate naming it, nothing else
    assert [f["kind"] for f in right["faults"]] == ["duplicate"]
    dup = _injected(right, "duplicate")["zmq.duplicated"]
    assert set(got["right"]) == sent and len(got["right"]) - FRAMES == dup > 0
    assert sorted(got["right"]) == got["right"]


def test_a_rig_sensors_zmq_sink_takes_its_faults(tmp_path: Path):
    """A ``zmq:`` sink in a ``[[sensor]]`` table (not the rig's stream) is a message sink too."""
    pytest.importorskip("zmq")
    rig_path = tmp_path / "rig.toml"
    rig_path.write_text(RIG.replace('"velodyne-pcap:PCAP"', '"zmq:tcp://127.0.0.1:*"'))
    (tmp_path / "left_faults.toml").write_text(LEFT_FAULTS)
    rig = load_rig(rig_path)
    loop = RigLoop(rig, build_world("wall"), sim_hz=20.0, seed=4)
    try:
        summary = drive_rig(loop, 20, tmp_path / "out", write_scans=False, seed=4)
    finally:
        loop.close()
    left = summary["sensors"]["left"]
    assert _injected(left, "packet_loss")["zmq.lost"] > 0
    assert {f["kind"] for f in left["faults"]} == {"packet_loss", "reorder"}
