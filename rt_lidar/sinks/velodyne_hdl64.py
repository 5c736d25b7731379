"""HDL-64E S2 status bytes: what an HDL-64E sends where newer Velodynes put the factory bytes.

The HDL-64E has no return-mode byte and no product id. The last two bytes of each data packet are a
status type and a status value, cycling every 16 packets: nine status values (``H M S D N Y``: the UTC
time and date of the packet, ``G`` GPS status, ``T`` temperature, ``V`` firmware version) and seven
bytes of a 1820-byte stream that carries the unit's calibration. That stream, as velodyne-decoder's
``hdl64e`` reader parses it: ``UNIT#``, the upper and lower block noise thresholds, then 64 records
of 28 bytes whose first 21 are ``<BhhhhhhhhhBB`` (laser id, vertical and rotational correction in
0.01 deg; far, x and y distance correction, vertical and horizontal offset and focal distance in mm;
focal slope in 0.1; min and max intensity); its last 28 bytes (over the last record's 7 spare ones):
calibration date and time, humidity, RPM, FOV min / max, real-life hours, source and destination IP,
multiple-return status (0 strongest, 1 last, 2 both), warning bits, power level and, on an S2, the
stream length as its checksum. A reader that sees the whole cycle (4160 packets, about 1.2 s in
single return at 10 Hz) recovers the model and the calibration from the data stream alone.
"""

from __future__ import annotations

import datetime as dt
import struct

import numpy as np

from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sinks.pcap import ipv4_bytes

__all__ = ["CYCLE", "STREAM_BYTES", "calibration_stream", "status_bytes"]

STATUS_TYPES = b"HMSDNYGTV"
CYCLE = 16
"""Packets per status cycle: the nine status values, then seven calibration-stream bytes."""
_STREAM_PER_CYCLE = CYCLE - len(STATUS_TYPES)
STREAM_BYTES = 1820
_RECORD = 28
_TAIL = 28
_MULTI_RETURN = {"strongest": 0, "last": 1, "dual": 2}
_GPS_STATUS = ord("A")  # S3 manual Appendix E: "A" = GPS receiving both sync signal and NMEA record
_TEMPERATURE_C = 30
_FIRMWARE = 1
_NOISE_THRESHOLD = 24
_WARNINGS = 0x60  # PPS present, GPS time present (the simulated GPS is locked)
_POWER_LEVEL = 0xA0


def _i16(x: float) -> int:
    return int(np.clip(np.round(x), -32768, 32767))


def calibration_stream(preset: SensorPreset, mode: str, epoch_ns: int, src_ip: str, dst_ip: str) -> bytes:
    """The 1820-byte calibration stream of ``preset`` (an S2 unit) in return ``mode``."""
    buf = bytearray(STREAM_BYTES)
    buf[0:7] = b"UNIT#" + bytes([_NOISE_THRESHOLD, _NOISE_THRESHOLD])
    for b in preset.beams:
        lid = b.laser_id if b.laser_id is not None else b.ring
        mm = (
            b.dist_correction_m,
            b.dist_correction_x_m,
            b.dist_correction_y_m,
            b.vert_offset_correction_m,
            b.horiz_offset_correction_m,
            b.focal_distance,
        )
        rec = struct.pack(
            "<BhhhhhhhhhBB",
            lid,
            _i16(b.elevation_deg * 100.0),
            _i16(b.azimuth_offset_deg * 100.0),
            *(_i16((v or 0.0) * 1000.0) for v in mm),
            _i16((b.focal_slope or 0.0) * 10.0),
            0,  # min intensity
            255,  # max intensity
        )
        at = 7 + lid * _RECORD
        buf[at : at + len(rec)] = rec
    t = dt.datetime.fromtimestamp(epoch_ns // 1_000_000_000, dt.UTC)  # calibrated at the sim epoch
    rpm = round((preset.scan.rotation_hz or 10.0) * 60.0)
    tail = struct.pack(
        "<6BBhHHH4s4sBBBH",
        t.year - 2000,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
        0,  # humidity %
        rpm,
        0,
        36000,
        0,
        ipv4_bytes(src_ip),
        ipv4_bytes(dst_ip),
        _MULTI_RETURN[mode],
        _WARNINGS,
        _POWER_LEVEL,
        STREAM_BYTES,  # an S2 checks the stream by its length
    )
    assert len(tail) == _TAIL
    buf[STREAM_BYTES - _TAIL :] = tail
    return bytes(buf)


def status_bytes(packet: np.ndarray, wall_ns: np.ndarray, stream: bytes) -> np.ndarray:
    """(N, 2) uint8 status type and value of the packets with global index ``packet`` (int64) whose
    first firing is at ``wall_ns`` (ns since the Unix epoch)."""
    packet = np.asarray(packet, np.int64)
    pos = packet % CYCLE
    sec = np.asarray(wall_ns, np.int64) // 1_000_000_000
    days = (sec // 86400).astype("datetime64[D]")
    months = days.astype("datetime64[M]")
    years = days.astype("datetime64[Y]")
    values = np.stack(
        [
            sec // 3600 % 24,
            sec // 60 % 60,
            sec % 60,
            (days - months).astype(np.int64) + 1,
            (months - years).astype(np.int64) + 1,
            years.astype(np.int64) + 1970 - 2000,
            np.full(packet.shape, _GPS_STATUS),
            np.full(packet.shape, _TEMPERATURE_C),
            np.full(packet.shape, _FIRMWARE),
        ],
        axis=1,
    )
    out = np.zeros((packet.size, 2), np.uint8)
    status = pos < len(STATUS_TYPES)
    types = np.frombuffer(STATUS_TYPES, np.uint8)
    out[status, 0] = types[pos[status]]
    out[status, 1] = values[np.flatnonzero(status), pos[status]]
    k = np.flatnonzero(~status)
    at = (packet[k] // CYCLE * _STREAM_PER_CYCLE + pos[k] - len(STATUS_TYPES)) % STREAM_BYTES
    out[k, 0] = 0  # a calibration byte: any type that is not a status letter
    out[k, 1] = np.frombuffer(stream, np.uint8)[at]
    return out
