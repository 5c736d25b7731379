"""Velodyne position packets (port 8308): byte by byte against the manuals' offsets, and read by
velodyne-decoder's ``TelemetryPacket``; dual-return data packets of the pucks."""

from __future__ import annotations

import datetime as dt
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.points import empty_points
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.pcap import DEFAULT_EPOCH_NS, PcapRecord, read_pcap_udp
from rt_lidar.sinks.velodyne import velodyne_pcap_sink

vd = pytest.importorskip("velodyne_decoder")

LAT0, LON0 = 52.5163, 13.3777
VELOCITY = np.array([6.0, 8.0, 0.0])  # m/s: 10 m/s over ground, course atan2(6, 8) = 36.87 deg


def _moving_scans(name: str, n: int) -> list[Scan]:
    """Empty rotations of a sensor moving at ``VELOCITY`` from the world origin."""
    period = scan_period_ns(load_preset(name))
    return [
        Scan(k, k * period, empty_points(), 0, 0, sensor_position=VELOCITY * (k * period * 1e-9))
        for k in range(n)
    ]


def _records(tmp_path: Path, name: str, scans, **options: str) -> list[PcapRecord]:
    path = tmp_path / f"{name}.pcap"
    sink = velodyne_pcap_sink(str(path), {"lat": str(LAT0), "lon": str(LON0), **options})
    sink.open(SinkContext(load_preset(name)))
    for s in scans:
        sink.write(s)
    sink.close()
    return list(read_pcap_udp(path))


def _expected_fix(second: int) -> tuple[float, float]:
    """Latitude, longitude (deg) of the sensor at ``second`` s after sim start (x east, y north)."""
    e, n, _ = VELOCITY * second
    lat = LAT0 + math.degrees(n / 6_378_137.0)
    lon = LON0 + math.degrees(e / (6_378_137.0 * math.cos(math.radians(LAT0))))
    return lat, lon


def _checked_sentence(payload: bytes, end: int) -> list[str]:
    """The NMEA sentence at 206: ``$GPRMC``, CR LF, valid checksum, NUL padding up to ``end``."""
    raw = payload[206:end]
    sentence = raw.rstrip(b"\0")
    assert not raw[len(sentence) :].strip(b"\0")
    assert sentence.startswith(b"$GPRMC,") and sentence.endswith(b"\r\n")
    body, star, check = sentence[1:-2].partition(b"*")
    xor = 0
    for ch in body:
        xor ^= ch
    assert star and check.decode() == f"{xor:02X}"
    return body.decode().split(",")


@pytest.mark.parametrize("name", ["VLP-16", "VLP-32C"])
def test_puck_position_packet_byte_by_byte(tmp_path, name):
    """VLP-32C manual, "Position Packet Structure Field Offsets" (p. 60); VLP-16 manual 63-9243 Rev D,
    Table 9-3: the same timestamp, PPS byte and sentence, and nothing else (no temperatures)."""
    recs = _records(tmp_path, name, _moving_scans(name, 25))
    pos = [r for r in recs if r.dst_port == 8308]
    data = [r for r in recs if r.dst_port == 2368]
    assert len(data) / len(pos) == pytest.approx(14, abs=1)  # "about 14 to 1"
    seconds_seen = set()
    for r in pos:
        p = r.payload
        assert len(p) == 512 and r.src_port == 8308
        t = r.stamp_ns - DEFAULT_EPOCH_NS  # the pcap stamp is the send time (us resolution)
        if name == "VLP-16":  # Table 9-3: 198 unused bytes, timestamp, PPS, 3 unused, sentence
            assert not any(p[0:198]) and not any(p[203:206])
        else:
            assert not any(p[0:187])  # reserved
            assert (p[187], p[188], p[189]) == (45, 40, 38)  # top, bottom board, at ADC calibration
            assert struct.unpack("<h", p[190:192])[0] == 2  # change since the ADC calibration
            assert struct.unpack("<I", p[192:196])[0] == t // 1_000_000_000  # seconds since it
            assert (p[196], p[197]) == (1, 0)  # reason: power-on; no calibration running
            assert (p[203], p[204], p[205]) == (0, 0, 38)  # no shutdown, power-up temperature
        assert struct.unpack("<I", p[198:202])[0] == r.stamp_ns // 1000 % 3_600_000_000
        assert p[202] == 2  # PPS locked
        f = _checked_sentence(p, 334)
        assert not any(p[334:512])
        second = t // 1_000_000_000
        assert f[1] == f"00000{second}" and f[2] == "A" and f[9] == "010124"  # 2024-01-01 00:00:0s
        lat, lon = _expected_fix(second)
        got_lat = (int(f[3][:2]) + float(f[3][2:]) / 60.0) * (1 if f[4] == "N" else -1)
        got_lon = (int(f[5][:3]) + float(f[5][3:]) / 60.0) * (1 if f[6] == "E" else -1)
        assert abs(got_lat - lat) < 2e-6 and abs(got_lon - lon) < 2e-6  # 1e-4 minutes: 0.2 m
        if second >= 1:  # a second's sentence is built at its first packet; scans then give a velocity
            assert float(f[7]) == pytest.approx(10.0 * 3600 / 1852, abs=0.05)  # knots
            assert float(f[8]) == pytest.approx(36.9, abs=0.05)
        seconds_seen.add(second)
    assert seconds_seen == {0, 1, 2}


@pytest.mark.parametrize("name", ["VLP-16", "VLP-32C"])
def test_velodyne_decoder_reads_our_position_packets(tmp_path, name):
    recs = _records(tmp_path, name, _moving_scans(name, 15))
    pos = [r for r in recs if r.dst_port == 8308]
    T = vd.TelemetryPacket
    for r in pos:
        tp = T(list(r.payload))
        assert tp.pps_status == T.PpsStatus.LOCKED and not tp.thermal_shutdown
        assert tp.usec_since_toh == r.stamp_ns // 1000 % 3_600_000_000
        if name == "VLP-32C":
            assert (tp.temp_board_top, tp.temp_board_bottom, tp.temp_at_powerup) == (45, 40, 38)
            assert tp.temp_during_adc_calibration == 38 and tp.temp_change_since_adc_calibration == 2
            assert tp.adc_calibration_reason == T.AdcCalibrationReason.POWER_ON
        else:  # the VLP-16 manual has no temperatures: read as 0
            assert (tp.temp_board_top, tp.temp_board_bottom, tp.temp_at_powerup) == (0, 0, 0)
        assert not tp.adc_calib_in_progress
        second = (r.stamp_ns - DEFAULT_EPOCH_NS) // 1_000_000_000
        assert tp.nmea_time == dt.datetime(2024, 1, 1, 0, 0, second)
        lon, lat, alt = tp.gps_position
        exp_lat, exp_lon = _expected_fix(second)
        assert abs(lat - exp_lat) < 2e-6 and abs(lon - exp_lon) < 2e-6 and alt == 0
        info = tp.parse_nmea()
        assert info.fix_available and (info.utc_year, info.utc_month, info.utc_day) == (2024, 1, 1)
    assert len(pos) >= 14


def test_hdl32e_position_packets_once_a_second(tmp_path):
    """HDL-32E manual, Appendix B: GPS timestamp at 198, the sentence at 206 (72 bytes); no PPS byte."""
    recs = _records(tmp_path, "HDL-32E", _moving_scans("HDL-32E", 25))
    pos = [r for r in recs if r.dst_port == 8308]
    assert [r.stamp_ns - DEFAULT_EPOCH_NS for r in pos] == [0, 1_000_000_000, 2_000_000_000]
    for r in pos:
        p = r.payload
        assert not any(p[:198]) and not any(p[202:206])  # gyros/accelerometers left zero; no PPS byte
        assert struct.unpack("<I", p[198:202])[0] == r.stamp_ns // 1000 % 3_600_000_000
        _checked_sentence(p, 278)
        assert not any(p[278:])


def test_hdl64e_sends_no_position_packets(tmp_path):
    """HDL-64E S3 manual: GPS time and status ride in the data packets' last 6 bytes; no port 8308."""
    from rt_lidar.errors import ConfigError

    recs = _records(tmp_path, "HDL-64E", _moving_scans("HDL-64E", 25))
    assert recs and not [r for r in recs if r.dst_port == 8308]
    with pytest.raises(ConfigError, match="HDL-64E: sends no position packets"):
        _records(tmp_path, "HDL-64E", _moving_scans("HDL-64E", 1), position_hz="1")
    assert _records(tmp_path, "HDL-64E", _moving_scans("HDL-64E", 1), position_hz="0")


@pytest.mark.parametrize(("name", "product"), [("VLP-16", 0x22), ("VLP-32C", 0x28)])
def test_puck_dual_return_packets(tmp_path, pipeline_scans, name, product):
    """Dual mode: return-mode byte 0x39 and the product id; velodyne-decoder reports both returns
    (the point-by-point agreement is test_velodyne.py's test_decoder_reads_our_points[dual])."""
    from conftest import with_second_returns

    scans = [with_second_returns(s) for s in pipeline_scans(name, 1)]
    recs = _records(tmp_path, name, scans, mode="dual", position_hz="0")
    data = [r.payload for r in recs if r.dst_port == 2368]
    assert data and {p[1204:] for p in data} == {bytes([0x39, product])}
    assert not [r for r in recs if r.dst_port == 8308]
    cfg = vd.Config(model=getattr(vd.Model, name.replace("-", "")))
    pts = np.concatenate([p for _, p in vd.read_pcap(str(tmp_path / f"{name}.pcap"), cfg)])
    kinds = set(np.unique(pts[:, vd.PointField.return_type]).astype(int))
    assert kinds >= {1, 2} and len(pts) > scans[0].points.size * 0.9


@pytest.mark.parametrize(
    ("name", "flags", "factory"),
    [
        ("VLP-16", {0xEEFF}, b"\x37\x22"),
        ("VLP-32C", {0xEEFF}, b"\x37\x28"),
        ("HDL-32E", {0xEEFF}, b"\x37\x21"),
        ("HDL-64E", {0xEEFF, 0xDDFF}, None),
    ],
)
def test_data_packet_layout_as_the_manuals_give_it(tmp_path, pipeline_scans, name, flags, factory):
    """Data packets on 2368, payload offsets (the manuals count the 42-byte header too):
    - VLP-16 manual 63-9243 Rev D, 9.3.2 "Data Packet Structure": 1248 bytes = 42 header, twelve
      100-byte data blocks (flag FF EE, azimuth u16 in 0.01 deg, 32 x (distance u16, reflectivity
      u8)), a 4-byte timestamp, two factory bytes at 0x4DE (return mode 0x37/0x38/0x39) and 0x4DF
      (product id: HDL-32E 0x21, VLP-16 0x22, VLP-32C 0x28; Table 9-2 "Factory Byte Values");
    - HDL-64E S3 manual, "Packet Format and Status Byte for GPS Time Stamping": blocks of the upper
      (FF EE) and lower (FF DD) laser banks, then the last 6 bytes: timestamp u32 microseconds past
      the hour, status type, status value."""
    scans = list(pipeline_scans(name, 1))
    recs = _records(tmp_path, name, scans, position_hz="0")
    data = [r.payload for r in recs if r.dst_port == 2368]
    assert data and all(len(p) == 1206 for p in data) and 42 + 1206 == 1248
    for p in data[:50]:
        blocks = np.frombuffer(p[:1200], np.uint8).reshape(12, 100)
        flag = blocks[:, 0].astype(int) | blocks[:, 1].astype(int) << 8
        assert set(flag.tolist()) <= flags and set(flag.tolist()) == flags  # FF EE (and FF DD)
        az = blocks[:, 2].astype(int) | blocks[:, 3].astype(int) << 8
        assert np.all(az < 36000)
        stamp = struct.unpack("<I", p[1200:1204])[0]
        assert stamp < 3_600_000_000
        if factory is not None:
            assert p[1204:1206] == factory  # packet offsets 0x4DE, 0x4DF
    if factory is None:  # Appendix E: status types H M S D N Y G T V once every 16 packets
        types = bytes(p[1204] for p in data[:16])
        assert types[:9] == b"HMSDNYGTV", types
        assert dict(zip(types, (p[1205] for p in data[:16]), strict=True))[ord("G")] == ord("A")
