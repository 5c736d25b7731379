"""``--stamp sim|wall``: every sink stamps packets and messages on one clock. With ``wall`` the stamps are
within a second of ``time.time()`` (as a PTP-synchronised sensor's); with ``sim`` they follow the sim
clock (packets at ``DEFAULT_EPOCH_NS`` + sim time, messages at sim time)."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import time

import numpy as np
import pytest
from rosbags.highlevel import AnyReader

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext, make_sink
from rt_lidar.sinks.pcap import DEFAULT_EPOCH_NS, read_pcap_udp

_HOUR_US = 3_600_000_000
_SECOND_NS = 1_000_000_000


def _fresh(scans: tuple[Scan, ...]) -> list[Scan]:
    """The cached scans as if the pipeline had each one just now (what a live run hands the sinks)."""
    return [dataclasses.replace(s, sim_wall_ns=time.time_ns()) for s in scans]


def _write(spec: str, preset: str, scans: list[Scan], stamp: str) -> None:
    sink = make_sink(spec)
    sink.open(SinkContext(preset=load_preset(preset), stamp=stamp))
    for scan in scans:
        sink.write(scan)
    sink.close()


def _velodyne_us(payload: bytes) -> int:
    """A Velodyne data packet's timestamp: microseconds past the hour, at byte 1200."""
    return int(np.frombuffer(payload, "<u4", count=1, offset=1200)[0])


def _us_past_hour_off(stamp_us: np.ndarray, wall_ns: int) -> np.ndarray:
    """Signed distance (s) of microseconds-past-the-hour stamps from the wall time ``wall_ns``."""
    d = (stamp_us.astype(np.int64) - (wall_ns // 1000) % _HOUR_US) % _HOUR_US
    return np.where(d > _HOUR_US // 2, d - _HOUR_US, d) * 1e-6


@pytest.mark.parametrize("stamp", ["sim", "wall"])
def test_velodyne_pcap_stamps_follow_the_clock(tmp_path, pipeline_scans, stamp):
    scans = _fresh(pipeline_scans("VLP-16", 3))
    now = time.time_ns()
    _write(f"velodyne-pcap:{tmp_path / 'v.pcap'}", "VLP-16", scans, stamp)
    data = [r for r in read_pcap_udp(tmp_path / "v.pcap") if r.dst_port == 2368]
    assert len(data) > 100
    records = np.array([r.stamp_ns for r in data], np.int64)
    in_packet = np.array([_velodyne_us(r.payload) for r in data], np.int64)
    assert np.all(np.diff(records) >= 0)
    if stamp == "wall":
        assert np.all(np.abs(records - now) < _SECOND_NS), (records - now) / 1e9
        assert np.all(np.abs(_us_past_hour_off(in_packet, now)) < 1.0)
    else:
        sim_end = scans[-1].start_ns + scan_period_ns(load_preset("VLP-16"))
        assert (
            records[0] >= DEFAULT_EPOCH_NS + scans[0].start_ns and records[-1] <= DEFAULT_EPOCH_NS + sim_end
        )
        # DEFAULT_EPOCH_NS is a top of the hour: the packet's stamp is the sim time in microseconds
        sim_us = (records - DEFAULT_EPOCH_NS) // 1000
        assert np.all((in_packet <= sim_us) & (in_packet > sim_us - 2000))  # first firing, < 2 ms before send


@pytest.mark.parametrize("stamp", ["sim", "wall"])
def test_ouster_packet_stamps_follow_the_clock(tmp_path, pipeline_scans, stamp):
    scans = _fresh(pipeline_scans("OS1-64", 2))
    now = time.time_ns()
    _write(f"ouster-pcap:{tmp_path / 'o.pcap'}", "OS1-64", scans, stamp)
    data = [r for r in read_pcap_udp(tmp_path / "o.pcap") if r.dst_port == 7502]
    assert len(data) > 50
    col0 = np.array([int(np.frombuffer(r.payload, "<u8", count=1)[0]) for r in data], np.int64)  # ts u64 ns
    assert np.all(np.diff(col0) > 0)
    if stamp == "wall":
        assert np.all(np.abs(col0 - now) < _SECOND_NS), (col0 - now) / 1e9
    else:
        period = scan_period_ns(load_preset("OS1-64"))
        assert col0[0] >= DEFAULT_EPOCH_NS + scans[0].start_ns
        assert col0[-1] < DEFAULT_EPOCH_NS + scans[-1].start_ns + period


@pytest.mark.parametrize("stamp", ["sim", "wall"])
def test_rosbag2_message_stamps_follow_the_clock(tmp_path, pipeline_scans, stamp):
    scans = _fresh(pipeline_scans("VLP-16", 3))
    now = time.time_ns()
    _write(f"rosbag2:{tmp_path / 'bag'}", "VLP-16", scans, stamp)
    with AnyReader([tmp_path / "bag"]) as reader:
        conns = [c for c in reader.connections if c.topic == "/points"]
        msgs = [(t, reader.deserialize(raw, c.msgtype)) for c, t, raw in reader.messages(connections=conns)]
    header = np.array([m.header.stamp.sec * _SECOND_NS + m.header.stamp.nanosec for _t, m in msgs], np.int64)
    assert header.tolist() == [t for t, _m in msgs]  # the bag's log time is the header stamp
    if stamp == "wall":
        assert np.all(np.abs(header - now) < _SECOND_NS)
    else:
        assert header.tolist() == [s.start_ns for s in scans]


def test_velodyne_udp_on_the_wall_clock_arrives_stamped_within_a_second_of_now(pipeline_scans):
    """Live packets to a socket, as a HIL bench receives them: each one's stamp against the wall clock at
    the moment it arrives."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(1.0)
    port = rx.getsockname()[1]
    sink = make_sink(f"velodyne-udp:127.0.0.1:{port},process=0,position_port=0")
    sink.open(SinkContext(preset=load_preset("VLP-16"), stamp="wall"))
    offsets: list[float] = []
    try:
        for scan in _fresh(pipeline_scans("VLP-16", 3)):
            sink.write(scan)
        with contextlib.suppress(TimeoutError):
            while True:
                payload = rx.recv(2048)
                arrived = time.time_ns()
                if len(payload) == 1206:
                    offsets.append(float(_us_past_hour_off(np.array([_velodyne_us(payload)]), arrived)[0]))
    finally:
        sink.close()
        rx.close()
    assert len(offsets) > 150  # VLP-16: ~75 data packets a scan
    assert max(abs(o) for o in offsets) < 1.0, offsets[:5]


def test_wall_stamps_never_run_backwards_and_every_sink_stamps_a_scan_alike(pipeline_scans):
    """Scans that come faster than real time (here: all at one instant) keep stamps one period apart and
    run ahead of the wall clock, by as much as ``stamp_lead_max_s`` says; a scan asked for twice (two
    sinks) gets one offset."""
    preset = load_preset("VLP-16")
    period = scan_period_ns(preset)
    context = SinkContext(preset=preset, stamp="wall")
    now = time.time_ns()
    scans = [dataclasses.replace(s, sim_wall_ns=now) for s in pipeline_scans("VLP-16", 3)]
    starts = []
    for scan in scans:
        offset = context.stamp_offset_ns(scan)
        assert context.stamp_offset_ns(scan) == offset  # the second sink of the run
        starts.append(scan.start_ns + offset)
    assert np.diff(starts).tolist() == [period, period]
    assert starts[0] == now - period  # the first scan ends when the pipeline had it
    assert context.stamp_lead_max_s == pytest.approx(2 * period * 1e-9)
    assert SinkContext(preset=preset).stamp_offset_ns(scans[0], 7) == 7  # sim: each sink's own epoch
