"""Network faults as real decoders see them: velodyne-decoder and ouster-sdk (its own venv) count the
datagrams lost and out of order in pcaps written through the faults; the stream's messages too."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from peers import needs_peer, peer_python

from rt_lidar.faults.spec import faults_from_table
from rt_lidar.faults.wiring import fault_plan
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.ouster import ouster_pcap_sink
from rt_lidar.sinks.pcap import read_pcap_udp
from rt_lidar.sinks.velodyne import velodyne_pcap_sink

ROOT = Path(__file__).resolve().parents[3]
OUSTER_PEER = peer_python("ouster")


def _scans(preset: str, n: int) -> list[Scan]:
    built = build_pipeline(preset, "street", seed=0)
    try:
        return built.pipeline.scans(n)
    finally:
        built.pipeline.close()


def _write(sink, preset: str, scans, faults=()):
    plan = fault_plan(faults_from_table({"fault": list(faults)}, "test"), load_preset(preset), 7)
    sink.open(SinkContext(load_preset(preset), faults=plan))
    for s in scans:
        got = plan.on_scan(s) if plan else s
        if got is not None:  # None: the sensor is down (a run's loop holds it back)
            sink.write(got)
    sink.close()
    return plan, sink


def test_velodyne_decoder_counts_lost_and_reordered_packets(tmp_path):
    vd = pytest.importorskip("velodyne_decoder")
    scans = _scans("VLP-16", 3)
    faults = [
        {"kind": "packet_loss", "rate": 0.1, "burst": 3.0},
        {"kind": "reorder", "rate": 0.05, "depth": 4},
    ]
    _write(velodyne_pcap_sink(str(tmp_path / "clean.pcap"), {"position_hz": "0"}), "VLP-16", scans)
    plan, sink = _write(
        velodyne_pcap_sink(str(tmp_path / "lossy.pcap"), {"position_hz": "0"}), "VLP-16", scans, faults
    )
    counts = sink.packetizer.net.counts
    cfg = vd.Config(model=vd.Model.VLP16)

    def device_stamps(path: Path) -> np.ndarray:
        """Each datagram decoded alone by velodyne-decoder: its device time (s), in capture order."""
        out = []
        for rec in read_pcap_udp(path):
            dec = vd.ScanDecoder(cfg)
            stamp, _pts = dec.decode(vd.PacketVector([vd.VelodynePacket(rec.stamp_ns * 1e-9, rec.payload)]))
            out.append(stamp.device)
        return np.array(out)

    clean, lossy = device_stamps(tmp_path / "clean.pcap"), device_stamps(tmp_path / "lossy.pcap")
    assert np.all(np.diff(clean) > 0)
    lost = len(set(np.round(clean * 1e6).tolist()) - set(np.round(lossy * 1e6).tolist()))
    late = int(np.count_nonzero(lossy < np.maximum.accumulate(lossy)))
    assert lost == counts["lost"] > 0.05 * clean.size
    assert late == counts["reordered"] > 0
    assert lossy.size == clean.size - lost
    report = plan.report()
    assert report[0]["injected"]["packets"]["velodyne-pcap.lost"] == lost
    # the decoder's own pcap reader still makes clouds of what came
    got = sum(p.shape[0] for _s, p in vd.read_pcap(str(tmp_path / "lossy.pcap"), cfg))
    want = sum(p.shape[0] for _s, p in vd.read_pcap(str(tmp_path / "clean.pcap"), cfg))
    assert 0.7 * want < got < want


def test_duplicates_delay_and_truncation_in_the_pcap(tmp_path):
    scans = _scans("VLP-16", 2)
    faults = [
        {"kind": "duplicate", "rate": 0.1},
        {"kind": "truncate", "rate": 0.1, "bytes": 100},
        {"kind": "delay", "delay_ms": 3.0, "jitter_ms": 0.5},
    ]
    _write(velodyne_pcap_sink(str(tmp_path / "clean.pcap"), {"position_hz": "0"}), "VLP-16", scans)
    _, sink = _write(
        velodyne_pcap_sink(str(tmp_path / "bad.pcap"), {"position_hz": "0"}), "VLP-16", scans, faults
    )
    clean, bad = list(read_pcap_udp(tmp_path / "clean.pcap")), list(read_pcap_udp(tmp_path / "bad.pcap"))
    c = sink.packetizer.net.counts
    assert len(bad) == len(clean) + c["duplicated"] and c["duplicated"] > 0
    assert sum(len(r.payload) == 100 for r in bad) >= c["truncated"] > 0
    first = {r.payload[-6:-2]: r.stamp_ns for r in reversed(clean)}  # the packet's own stamp bytes
    delays = [r.stamp_ns - first[r.payload[-6:-2]] for r in bad if len(r.payload) == 1206]
    assert min(delays) >= 3.0e6 and max(delays) <= 3.5e6 + 1
    assert all(b.stamp_ns >= a.stamp_ns for a, b in itertools.pairwise(bad))  # captured in arrival order


OUSTER_READER = """
import sys, json, numpy as np
from ouster.sdk import open_source
from ouster.sdk.core import ChanField
src = open_source(sys.argv[1], meta=[sys.argv[2]], index=False)
out = []
for fs in src:
    s = fs[0]
    out.append({"fid": int(s.frame_id), "missing_cols": int(np.count_nonzero(s.status == 0)),
                "range_sum": int(s.field(ChanField.RANGE).astype(np.int64).sum())})
print(json.dumps(out))
"""


@needs_peer("ouster")
def test_ouster_sdk_sees_the_lost_packets_as_missing_columns(tmp_path):
    scans = _scans("OS1-64", 3)
    _, sink = _write(
        ouster_pcap_sink(str(tmp_path / "os.pcap"), {"profile": "RNG19"}),
        "OS1-64",
        scans,
        [{"kind": "packet_loss", "rate": 0.08, "burst": 2.0, "sink": "ouster-pcap"}],
    )
    _write(ouster_pcap_sink(str(tmp_path / "clean.pcap"), {"profile": "RNG19"}), "OS1-64", scans)
    (tmp_path / "r.py").write_text(OUSTER_READER)

    def read(name: str) -> list[dict]:
        proc = subprocess.run(
            [
                str(OUSTER_PEER),
                str(tmp_path / "r.py"),
                str(tmp_path / f"{name}.pcap"),
                str(tmp_path / f"{name}.json"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return json.loads(proc.stdout)

    clean, lossy = read("clean"), read("os")
    data = {
        n: sum(r.dst_port == 7502 for r in read_pcap_udp(tmp_path / f"{n}.pcap")) for n in ("clean", "os")
    }
    lost = data["clean"] - data["os"]  # lidar packets (the IMU's are lost too: counted apart)
    assert 0 < lost <= sink.packetizer.net.counts["lost"]
    assert sum(f["missing_cols"] for f in clean) == 0
    cpp = 16  # columns per packet of the OS1-64's 1024x10 mode
    assert sum(f["missing_cols"] for f in lossy) == lost * cpp
    assert [f["fid"] for f in lossy] == [f["fid"] for f in clean]


def test_ouster_reboot_brings_a_new_init_id_and_frame_ids_from_zero(tmp_path):
    from rt_lidar.sinks.ouster import OusterPacketizer

    scans = _scans("OS1-64", 4)
    _plan, sink = _write(
        ouster_pcap_sink(str(tmp_path / "os.pcap"), {"profile": "RNG19"}),
        "OS1-64",
        scans,
        [{"kind": "reboot", "start_s": 0.1, "end_s": 0.2}],
    )
    inner = sink.packetizer.inner
    assert isinstance(inner, OusterPacketizer)
    rows = [r.payload for r in read_pcap_udp(tmp_path / "os.pcap") if r.dst_port == 7502]
    pk = np.frombuffer(b"".join(rows), inner.packet_dtype)
    init = pk["init"].astype(np.int64) @ np.array([1, 1 << 8, 1 << 16])
    fid = pk["fid"].astype(np.int64)
    per_scan = len(inner.packets)
    assert len(rows) == 3 * per_scan  # scan 1 was never sent
    assert len(set(init[:per_scan].tolist())) == 1 and init[per_scan] != init[0]
    assert fid[:per_scan].tolist() == [0] * per_scan
    assert fid[per_scan:].tolist() == [0] * per_scan + [1] * per_scan  # scans 2, 3 after the boot


def test_stream_receiver_sees_lost_duplicated_and_reordered_scans():
    """Every message a ZeroMQ SUB socket gets, decoded with the stream's own frame decoder."""
    import zmq

    from rt_lidar.faults.network import FaultyStream, NetworkFaults
    from rt_lidar.sinks.stream import ZmqStreamSink, decode_frame

    preset = load_preset("VLP-16")
    table = [
        {"kind": "packet_loss", "rate": 0.2},
        {"kind": "duplicate", "rate": 0.1},
        {"kind": "reorder", "rate": 0.15, "depth": 2},
    ]
    plan = fault_plan(faults_from_table({"fault": table}, "test"), preset, 3)
    assert plan is not None
    inner = ZmqStreamSink("tcp://127.0.0.1:*", hwm=1000)
    sink = FaultyStream(inner, NetworkFaults(plan.network, "zmq", plan.seed, plan))
    sink.open(SinkContext(preset, faults=plan))
    base = _scans("VLP-16", 1)[0]
    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVHWM, 1000)
    sub.connect(inner.address)
    got: list[int] = []
    try:
        warm = Scan(0, 0, base.points[:10], base.fired, base.dropped)
        for _ in range(200):  # PUB drops everything before the handshake: warm up on the bare sink
            inner.write(warm)
            if sub.poll(20):
                break
        while sub.poll(200):
            sub.recv_multipart()
        for k in range(100, 160):
            sink.write(Scan(k, k * 100_000_000, base.points[:100], base.fired, base.dropped))
        sink.close()
        while sub.poll(500):
            frame = decode_frame(sub.recv_multipart(copy=False))
            if frame.kind == "scan":
                got.append(int(frame.header["scan_index"]))
    finally:
        sub.close(linger=0)
    c = sink.net.counts
    sent = set(range(100, 160))
    assert len(sent - set(got)) == c["lost"] > 0
    assert len(got) - len(set(got)) == c["duplicated"] > 0
    late = sum(1 for a, b in itertools.pairwise(got) if b < a)
    assert 0 < late <= c["reordered"]


def test_velodyne_udp_datagrams_lost_and_reordered_on_loopback():
    """The live sink over a real socket: what a listener receives, decoded by velodyne-decoder."""
    from udp_listen import datagrams

    from rt_lidar.sinks.velodyne import velodyne_udp_sink

    vd = pytest.importorskip("velodyne_decoder")
    scans = _scans("VLP-16", 2)
    faults = [
        {"kind": "packet_loss", "rate": 0.1, "burst": 2.0},
        {"kind": "reorder", "rate": 0.05, "depth": 3},
    ]
    with datagrams(rcvbuf=4 << 20) as (port, got):
        sink = velodyne_udp_sink(f"127.0.0.1:{port}", {"position_hz": "0", "clock": "sim", "process": "0"})
        plan = fault_plan(faults_from_table({"fault": faults}, "test"), load_preset("VLP-16"), 5)
        sink.open(SinkContext(load_preset("VLP-16"), lockstep=True, faults=plan))
        for s in scans:
            sink.write(s)
        sink.close()
    c = sink.packetizer.net.counts
    cfg = vd.Config(model=vd.Model.VLP16)
    stamps = []
    for data in got:
        stamp, _ = vd.ScanDecoder(cfg).decode(vd.PacketVector([vd.VelodynePacket(1.0, data)]))
        stamps.append(stamp.device)
    dev = np.array(stamps)
    spacing = np.median(np.diff(np.sort(dev)))
    expected = round((dev.max() - dev.min()) / spacing) + 1
    assert len(got) == c["sent"] > 0
    late = int(np.count_nonzero(dev < np.maximum.accumulate(dev)))
    assert 0 < late <= c["reordered"]  # one held back behind packets that were lost arrives in order
    assert expected - len(set(np.round(dev * 1e6).tolist())) <= c["lost"] > 0


def test_velodyne_packets_stop_at_a_reboot_and_start_over_after_it(tmp_path):
    vd = pytest.importorskip("velodyne_decoder")
    scans = _scans("VLP-16", 4)
    _write(velodyne_pcap_sink(str(tmp_path / "clean.pcap"), {"position_hz": "0"}), "VLP-16", scans)
    plan, _ = _write(
        velodyne_pcap_sink(str(tmp_path / "boot.pcap"), {"position_hz": "0"}),
        "VLP-16",
        scans,
        [{"kind": "reboot", "start_s": 0.1, "end_s": 0.2}],
    )
    cfg = vd.Config(model=vd.Model.VLP16)

    def stamps(name: str) -> np.ndarray:
        out = []
        for rec in read_pcap_udp(tmp_path / name):
            stamp, _ = vd.ScanDecoder(cfg).decode(vd.PacketVector([vd.VelodynePacket(1.0, rec.payload)]))
            out.append(stamp.device % 3600.0)  # microseconds past the hour: sim time (epoch on the hour)
        return np.array(out)

    clean, boot = stamps("clean.pcap"), stamps("boot.pcap")
    packet_s = float(np.median(np.diff(clean)))
    assert not np.any((boot > 0.1 - packet_s) & (boot < 0.2 - packet_s))  # nothing while down
    assert np.all(np.diff(boot) > 0)
    before, after = boot[boot < 0.1], boot[boot >= 0.2 - packet_s]
    assert before.size == np.count_nonzero(clean < 0.1 - packet_s)  # scan 0's last partial packet died
    assert after[0] == pytest.approx(0.2, abs=packet_s)  # packets start over at scan 2
    assert plan.report()[0]["injected"]["scans_dropped"] == 1


OUSTER_FRAMES = """
import sys, json
from ouster.sdk import open_source
src = open_source(sys.argv[1], meta=[sys.argv[2]], index=False)
print(json.dumps([int(fs[0].frame_id) for fs in src]))
"""


@needs_peer("ouster")
def test_ouster_sdk_needs_the_new_metadata_after_a_reboot(tmp_path):
    """A rebooted Ouster has a new init_id: ouster-sdk refuses its packets under the old metadata, as
    with a real sensor, and decodes them (frame ids from 0) under metadata with the new id."""
    scans = _scans("OS1-64", 4)
    plan, _ = _write(
        ouster_pcap_sink(str(tmp_path / "os.pcap"), {"profile": "RNG19"}),
        "OS1-64",
        scans,
        [{"kind": "reboot", "start_s": 0.1, "end_s": 0.2}],
    )
    new_id = plan.report()[0]["injected"]["packets"]["ouster-pcap.init_id"]
    meta = json.loads((tmp_path / "os.json").read_text())
    assert new_id != meta["sensor_info"]["initialization_id"]
    meta["sensor_info"]["initialization_id"] = new_id
    (tmp_path / "new.json").write_text(json.dumps(meta))
    (tmp_path / "r.py").write_text(OUSTER_FRAMES)

    def frames(meta_name: str) -> list[int]:
        proc = subprocess.run(
            [str(OUSTER_PEER), str(tmp_path / "r.py"), str(tmp_path / "os.pcap"), str(tmp_path / meta_name)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return json.loads(proc.stdout.strip().splitlines()[-1])

    assert frames("os.json") == [0]  # before the reboot only
    assert frames("new.json") == [0, 1]  # scans 2 and 3, counted from the boot
