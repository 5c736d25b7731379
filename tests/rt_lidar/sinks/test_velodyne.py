"""Velodyne packets: written by us, read back by velodyne-decoder (someone else's reader)."""

from __future__ import annotations

import functools
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import with_second_returns

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.points import empty_points
from rt_lidar.sensor.beam_origins import firing_geometry, ranges_from_decoded
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.pcap import DEFAULT_EPOCH_NS, read_pcap_udp
from rt_lidar.sinks.velodyne import MODELS as PACKET_MODELS
from rt_lidar.sinks.velodyne import VelodynePacketizer, calibration_yaml, velodyne_pcap_sink

vd = pytest.importorskip("velodyne_decoder")

# the HDL-64E preset is an S2 unit: its firing table (48 us a firing) is the decoder's S2 timing
MODELS = {"VLP-16": "VLP16", "VLP-32C": "VLP32C", "HDL-32E": "HDL32E", "HDL-64E": "HDL64E_S2"}
# a real S2.1 unit's file (a user's calibration): its beams start 2.6 cm sideways and 10-21 cm up
SZTAKI = str(Path(__file__).resolve().parents[2] / "data" / "vendor" / "velodyne" / "64e_s2.1-sztaki.yaml")
DECODER_MODELS = {**MODELS, SZTAKI: "HDL64E_S2"}
EPOCH_S = DEFAULT_EPOCH_NS // 1_000_000_000


@functools.lru_cache(maxsize=8)
def _preset(name: str) -> SensorPreset:
    """A shipped preset by name, or the preset of a calibration file (the model it guesses, quietly)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_preset(name)


def _write(tmp_path: Path, name: str, scans, mode: str) -> Path:
    path = tmp_path / f"{Path(name).stem}.pcap"
    sink = velodyne_pcap_sink(str(path), {"mode": mode})
    sink.open(SinkContext(_preset(name), scenario={"test": True}))
    for scan in scans:
        sink.write(scan)
    sink.close()
    return path


def _decode(path: Path, name: str | None) -> np.ndarray:
    """Decoded points + absolute device time (s); ``name=None``: the decoder finds model and calibration;
    a calibration file: the decoder reads that file, as a user would."""
    cfg = vd.Config(max_range=1000.0)
    if name is not None:
        cfg.model = getattr(vd.Model, DECODER_MODELS[name])
        cfg.calibration = (
            vd.Calibration.read(name)
            if Path(name).is_file()
            else vd.Calibration.from_string(calibration_yaml(_preset(name)))
        )
    parts = []
    for stamp, pts in vd.read_pcap(str(path), cfg):
        times = stamp.device + pts[:, vd.PointField.time].astype(np.float64)
        parts.append(np.column_stack([pts.astype(np.float64), times]))
    return np.concatenate(parts)


def _encodable(name: str, scan: Scan) -> np.ndarray:
    """The points of ``scan`` whose distance fits the 16-bit field (the test's far twins can exceed
    131 m at 2 mm): the range along the beam, from its origin where the preset's beams have one."""
    preset, points = _preset(name), scan.points
    corr = np.array([b.dist_correction_m or 0.0 for b in sorted(preset.beams, key=lambda b: b.ring)])
    if preset.beam_origins_m is None:
        rng = np.sqrt(points["x"] ** 2 + points["y"] ** 2 + points["z"] ** 2)
    else:
        d, o = firing_geometry(preset, np.int64(scan.start_ns) + points["t"].astype(np.int64), points["ring"])
        rng = ranges_from_decoded(preset, points, o, d)
    rng = rng - corr[points["ring"]]
    return points[np.round(rng / PACKET_MODELS[preset.packet_format].distance_m) <= 65535]


def _agreement(name: str, scans, dec: np.ndarray, mode: str) -> dict[str, float]:
    """Compare decoded points with ours point by point; returns the largest errors."""
    ours = np.concatenate([_encodable(name, s) for s in scans])
    assert dec.shape[0] == ours.size  # the decoder merges identical dual returns, as we expect
    t_abs = ours["t"] * 1e-9 + EPOCH_S  # scan starts are multiples of the period: t is from sim 0 + start
    t_abs += np.concatenate([np.full(_encodable(name, s).size, s.start_ns * 1e-9) for s in scans])
    o_r = np.sqrt(ours["x"].astype(float) ** 2 + ours["y"] ** 2 + ours["z"] ** 2)
    d_r = np.linalg.norm(dec[:, :3], axis=1)
    f = vd.PointField
    o = np.lexsort((o_r, t_abs, ours["ring"]))
    d = np.lexsort((d_r, dec[:, 8], dec[:, f.ring]))
    np.testing.assert_array_equal(dec[d, f.ring], ours["ring"][o])
    o_az = np.degrees(np.arctan2(ours["y"][o], ours["x"][o]))
    d_az = np.degrees(np.arctan2(dec[d, 1], dec[d, 0]))
    if not any(b.focal_slope for b in _preset(name).beams):  # a file's focal terms rescale the decoded
        np.testing.assert_array_equal(dec[d, f.intensity], np.clip(np.round(ours["intensity"][o]), 0, 255))
    if mode == "dual":
        twins = ours["return_id"][o] == 1
        assert np.all(dec[d][twins, f.return_type] == 2)  # the farther echo is reported as the last one
    return {
        "range_m": float(np.abs(d_r[d] - o_r[o]).max()),
        "azimuth_deg": float(np.abs((d_az - o_az + 180.0) % 360.0 - 180.0).max()),
        "time_us": float(np.abs(dec[d, 8] - t_abs[o]).max() * 1e6),
    }


@pytest.mark.parametrize("mode", ["strongest", "dual"])
@pytest.mark.parametrize("name", [*MODELS, pytest.param(SZTAKI, id="HDL-64E-sztaki-file")])
def test_decoder_reads_our_points(tmp_path, pipeline_scans, name, mode):
    """Every point (dual: and its farther twin on the same beam) where the decoder puts it: the shipped
    presets, and a user's HDL-64E file whose beams start off the centre, decoded with that file."""
    preset = _preset(name)
    scans = list(pipeline_scans(preset, 2))
    if mode == "dual":
        scans = [with_second_returns(s, preset=preset) for s in scans]
    err = _agreement(name, scans, _decode(_write(tmp_path, name, scans, mode), name), mode)
    assert err["range_m"] < 0.01
    # 0.01 deg packet resolution; the decoder interpolates between two rounded block azimuths
    assert err["azimuth_deg"] <= 0.015
    # our firing times are the decoder's timing tables (the stamp is floored to 1 us)
    assert err["time_us"] < 2.0


def _empty_scans(name: str, first: int, n: int) -> list[Scan]:
    period = scan_period_ns(_preset(name))
    return [Scan(k, k * period, empty_points(), 0, 0) for k in range(first, first + n)]


@pytest.mark.parametrize("mode", ["strongest", "dual"])
@pytest.mark.parametrize("name", ["HDL-64E", pytest.param(SZTAKI, id="sztaki-file")])
def test_hdl64e_stream_carries_its_calibration(tmp_path, pipeline_scans, name, mode):
    """An HDL-64E's status bytes carry the unit's calibration: the decoder finds the model and the
    calibration in our packets alone (one status cycle: 4160 packets) and decodes the same points (the
    shipped preset, and a user's file whose beams start off the centre)."""
    preset = _preset(name)
    scans = list(pipeline_scans(preset, 2))
    if mode == "dual":
        scans = [with_second_returns(s, preset=preset) for s in scans]
    n_empty = 11 if mode == "strongest" else 5  # dual: twice the packets per second
    path = _write(tmp_path, name, scans + _empty_scans(name, 2, n_empty), mode)
    model, calib = vd.hdl64e.read_calibration_from_pcap(str(path))
    assert model == vd.Model.HDL64E_S2
    lasers = {las["laser_id"]: las for las in yaml.safe_load(calib.to_string())["lasers"]}
    # the stream carries whole hundredths of a degree and whole mm: the preset's values rounded to them
    for b in preset.beams:
        got = lasers[b.laser_id]
        assert np.degrees(got["vert_correction"]) == pytest.approx(b.elevation_deg, abs=0.005 + 1e-6)
        assert np.degrees(got["rot_correction"]) == pytest.approx(round(b.azimuth_offset_deg, 2), abs=1e-5)
        for key in ("dist_correction", "vert_offset_correction", "horiz_offset_correction"):
            want = getattr(b, key + "_m") or 0.0
            assert got.get(key, 0.0) == pytest.approx(round(want, 3), abs=1e-6)
    status = vd.hdl64e.read_status_info(vd.hdl64e.iter_pcap_packets(str(path)))
    assert status["Model"] == "S2" and status["RPM"] == 600 and status["IP Source"] == "192.168.1.201"
    assert status["Multiple Return Status"] == ("Both" if mode == "dual" else "Strongest")
    assert status["Current Time"].year == 2024 and status["GPS Time Present"]
    err = _agreement(name, scans, _decode(path, None), mode)
    # angles travel in 0.01 deg (interpolated: 0.015), and the azimuth offsets rounded to them
    rounding = np.abs(preset.azimuth_offsets_deg - np.round(preset.azimuth_offsets_deg, 2)).max()
    assert err["range_m"] < 0.01 and err["azimuth_deg"] <= 0.015 + rounding
    assert err["time_us"] < 2.0


def test_hdl64e_blocks_banks_and_status_bytes(pipeline_scans):
    preset = load_preset("HDL-64E")
    for mode, group in (("strongest", 2), ("dual", 4)):
        pz = VelodynePacketizer(preset, mode=mode, position_hz=0)
        pk = np.concatenate([b.payloads for s in pipeline_scans("HDL-64E", 2) for b in pz.packetize(s)])
        blocks = pk[:, :1200].reshape(-1, 12, 100)
        flag = blocks[:, :, 0:2].copy().view("<u2")[..., 0]
        np.testing.assert_array_equal(flag, np.tile([0xEEFF, 0xDDFF], (len(pk), 6)))
        az = blocks[:, :, 2:4].copy().view("<u2")[..., 0].astype(np.int64)
        firing_az = az.reshape(len(pk), -1, group)
        assert np.all(firing_az == firing_az[..., :1])  # the blocks of one firing share its azimuth
        step = np.diff(firing_az[..., 0].ravel()) % 36000
        assert np.all((step >= 17) & (step <= 18))  # 48 us a firing at 10 Hz: 0.173 deg
        stamps = pk[:, 1200:1204].copy().view("<u4").ravel().astype(np.int64)
        assert set(np.diff(stamps)) <= {12 // group * 48 - 1, 12 // group * 48, 12 // group * 48 + 1}
        kinds = pk[:16, 1204].tobytes()  # the status cycle starts with the first packet
        assert kinds == b"HMSDNYGTV" + bytes(7)
        assert list(pk[:6, 1205]) == [0, 0, 0, 1, 1, 24]  # 2024-01-01T00:00:00Z


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
    assert len(data) / len(pos) == pytest.approx(14, abs=1)  # the manual's "about 14 to 1"
    assert b"$GPRMC,000000,A" in pos[0].payload
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
    with pytest.warns(UserWarning, match=f"cut short inside record {n - 1} .*read {n - 1:,} whole records"):
        assert len(list(read_pcap_udp(path))) == n - 1
    assert sum(len(p) for _, p in vd.read_pcap(str(path), vd.Config(model=vd.Model.VLP16))) > 0


def test_hdl64e_through_the_sink_specs(tmp_path, pipeline_scans):
    """``--sink velodyne-pcap:`` and ``--sink velodyne-udp:`` with the HDL-64E preset: the same data
    packets both ways, and no position packets (the HDL-64E sends none)."""
    import contextlib
    import socket

    from rt_lidar.sinks.base import make_sink

    scan = pipeline_scans("HDL-64E", 1)[0]
    rx = {}
    for port in ("data", "position"):
        rx[port] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx[port].setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        rx[port].bind(("127.0.0.1", 0))
    data_port, pos_port = (rx[p].getsockname()[1] for p in ("data", "position"))
    udp = make_sink(f"velodyne-udp:127.0.0.1:{data_port},position_port={pos_port},latency_ms=20")
    pcap = make_sink(f"velodyne-pcap:{tmp_path / 'hdl64.pcap'}")
    for sink in (udp, pcap):
        sink.open(SinkContext(load_preset("HDL-64E")))
        sink.write(scan)
        sink.close()
    got: dict[str, list[bytes]] = {"data": [], "position": []}
    for port, sock in rx.items():
        sock.settimeout(0.5)
        with contextlib.suppress(TimeoutError):
            while True:
                got[port].append(sock.recv(2048))
        sock.close()
    recs = list(read_pcap_udp(tmp_path / "hdl64.pcap"))
    data = [r.payload for r in recs if r.dst_port == 2368]
    assert len(data) == -(-2083 // 6) and all(len(p) == 1206 for p in data)  # one scan, last one padded
    assert not [r for r in recs if r.dst_port == 8308] and not got["position"]
    assert got["data"] == data
