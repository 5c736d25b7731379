"""Velodyne packets: written by us, read back by velodyne-decoder (someone else's reader)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import with_second_returns

from rt_lidar.presets import load_preset
from rt_lidar.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.pcap import DEFAULT_EPOCH_NS, read_pcap_udp
from rt_lidar.sinks.velodyne import VelodynePacketizer, calibration_yaml, velodyne_pcap_sink

vd = pytest.importorskip("velodyne_decoder")

MODELS = {"VLP-16": "VLP16", "VLP-32C": "VLP32C", "HDL-32E": "HDL32E"}


def _write(tmp_path: Path, name: str, scans, mode: str) -> Path:
    path = tmp_path / f"{name}.pcap"
    sink = velodyne_pcap_sink(str(path), {"mode": mode})
    sink.open(SinkContext(load_preset(name), scenario={"test": True}))
    for scan in scans:
        sink.write(scan)
    sink.close()
    return path


def _decode(path: Path, name: str) -> np.ndarray:
    preset = load_preset(name)
    cfg = vd.Config(model=getattr(vd.Model, MODELS[name]), max_range=1000.0)
    cfg.calibration = vd.Calibration.from_string(calibration_yaml(preset))
    parts = []
    for stamp, pts in vd.read_pcap(str(path), cfg):
        times = stamp.host + pts[:, vd.PointField.time].astype(np.float64)
        parts.append(np.column_stack([pts.astype(np.float64), times]))
    return np.concatenate(parts)


@pytest.mark.parametrize("mode", ["strongest", "dual"])
@pytest.mark.parametrize("name", list(MODELS))
def test_decoder_reads_our_points(tmp_path, pipeline_scans, name, mode):
    scans = list(pipeline_scans(name, 2))
    if mode == "dual":
        scans = [with_second_returns(s) for s in scans]
    dec = _decode(_write(tmp_path, name, scans, mode), name)
    ours = np.concatenate([s.points for s in scans])
    t_abs = np.concatenate([s.points["t"] + s.start_ns for s in scans])
    assert dec.shape[0] == ours.size  # the decoder merges identical dual returns, as we expect

    o_r = np.sqrt(ours["x"].astype(float) ** 2 + ours["y"] ** 2 + ours["z"] ** 2)
    d_r = np.linalg.norm(dec[:, :3], axis=1)
    f = vd.PointField
    o = np.lexsort((o_r, t_abs, ours["ring"]))
    d = np.lexsort((d_r, dec[:, 8], dec[:, f.ring]))
    np.testing.assert_array_equal(dec[d, f.ring], ours["ring"][o])
    assert np.abs(d_r[d] - o_r[o]).max() < 0.01
    o_az = np.degrees(np.arctan2(ours["y"][o], ours["x"][o]))
    d_az = np.degrees(np.arctan2(dec[d, 1], dec[d, 0]))
    # 0.01 deg packet resolution; the decoder interpolates between two rounded block azimuths
    assert np.abs((d_az - o_az + 180.0) % 360.0 - 180.0).max() <= 0.015
    np.testing.assert_array_equal(dec[d, f.intensity], np.clip(np.round(ours["intensity"][o]), 0, 255))
    if mode == "dual":
        twins = ours["return_id"][o] == 1
        assert np.all(dec[d][twins, f.return_type] == 2)  # the farther echo is reported as the last one


def test_timestamps_factory_bytes_and_position_packets(tmp_path, pipeline_scans):
    scans = list(pipeline_scans("VLP-16", 3))
    recs = list(read_pcap_udp(_write(tmp_path, "VLP-16", scans, "strongest")))
    data = [r for r in recs if r.dst_port == 2368]
    pos = [r for r in recs if r.dst_port == 8308]
    assert all(len(r.payload) == 1206 for r in data) and all(len(r.payload) == 512 for r in pos)
    stamps = np.array([struct.unpack("<I", r.payload[1200:1204])[0] for r in data], np.int64)
    assert {r.payload[1204:] for r in data} == {b"\x37\x22"}
    # first firing of packet k is slot 24k: microseconds past the hour of its sim time (epoch at 00:00)
    period = scan_period_ns(load_preset("VLP-16"))
    expect = (np.arange(len(data)) * 24 * period // 1808 + DEFAULT_EPOCH_NS) // 1000 % 3_600_000_000
    np.testing.assert_array_equal(stamps, expect)
    host = np.array([r.stamp_ns for r in data])
    assert np.all(np.diff(host) > 0) and abs(np.median(np.diff(host)) - 1_327_000) < 2000
    assert len(pos) == 1 and b"$GPRMC,000000,A" in pos[0].payload
    assert struct.unpack("<I", pos[0].payload[198:202])[0] == 0


def test_packets_run_on_across_scans(pipeline_scans):
    preset = load_preset("VLP-16")
    pz = VelodynePacketizer(preset, position_hz=0)
    batches = [b for s in pipeline_scans("VLP-16", 3) for b in pz.packetize(s)] + pz.finish()
    pk = np.concatenate([b.payloads for b in batches])
    assert pk.shape[0] == -(-3 * 1808 // 24)  # every slot of 3 rotations, the last packet padded
    az = pk[:, :1200].reshape(-1, 12, 100)[:, :, 2:4].copy().view("<u2").ravel().astype(np.int64)
    step = np.diff(az) % 36000
    assert np.all((step >= 38) & (step <= 42))  # two firing cycles of 55.3 us at 10 Hz: 0.398 deg


def test_torn_pcap_reads_up_to_last_whole_packet(tmp_path, pipeline_scans):
    path = _write(tmp_path, "VLP-16", list(pipeline_scans("VLP-16", 2)), "strongest")
    n = len(list(read_pcap_udp(path)))
    raw = path.read_bytes()
    path.write_bytes(raw[:-700])
    assert len(list(read_pcap_udp(path))) == n - 1
    assert sum(len(p) for _, p in vd.read_pcap(str(path), vd.Config(model=vd.Model.VLP16))) > 0
