"""Velodyne position (telemetry) packets: the 512-byte payload a sensor sends to port 8308.

Layouts, as each model's user manual gives them (payload offsets, the 42-byte UDP/IP header left out):

- VLP-16 (``"vlp16"``; VLP-16 User Manual 63-9243 Rev D, section 9.3.3 "Position Packet Structure",
  Table 9-3, whose offsets count the 42-byte header): 0-197 unused (null bytes); 198-201 timestamp
  (u32 microseconds past the hour); 202 PPS status (Table 9-4: 0 none, 1 synchronizing, 2 locked,
  3 error); 203-205 unused; 206- the NMEA ``$GPRMC`` sentence, CR LF terminated, null padded to the end
  of the payload. That manual lists no temperatures, so none are written.
- VLP-32C (``"vlp32c"``; VLP-32C User Manual, "Position Packet Structure Field Offsets" table, p. 60;
  the VLS-128 manual's Table 9-2 is the same): 0-186 reserved; 187 (0xBB) temperature of the top
  board, 188 of the bottom board, 189 temperature when the ADC calibration last ran (u8 deg C);
  190-191 change in temperature since that calibration (int16); 192-195 seconds since it (u32); 196
  reason for it (1: power-on); 197 ADC calibration status bits; 198-201 (0xC6) timestamp; 202 (0xCA)
  PPS status; 203 thermal status (1: shut down); 204 last shutdown temperature; 205 temperature at
  power-up; 206-333 (0xCE-0x14D) the NMEA sentence, 128 bytes; 334-511 reserved.
- HDL-32E (``"hdl32"``; HDL-32E User's Manual, Appendix B "Positioning Packet", Figure B3): the GPS
  timestamp at 198 and the ``$GPRMC`` sentence at 206 (72 bytes). Its three gyro / temperature /
  accelerometer words (bytes 14-37) are left zero (the motion is not written there); one a second.
- HDL-64E: no position packet. The HDL-64E S3 manual (63-HDL64ES3 Rev K, "Packet Format and Status
  Byte for GPS Time Stamping", and Appendix E) carries GPS time and status in the last 6 bytes of every
  data packet (timestamp, then a rotating status type and value: H M S D N Y G ...), which
  :mod:`rt_lidar.sinks.velodyne_hdl64` writes; asking it for position packets is a ConfigError.

Puck manuals: "the ratio of data packets to position packets is about 14 to 1": one every 14 data
packets' time. The GPS sends its sentence once a second, after the PPS edge, so consecutive position
packets repeat the sentence of the last whole second while their timestamps advance.

The fix follows the vehicle: the sim world's x/y (metres, x east, y north) around a configurable
origin (latitude, longitude), speed over ground and course from the sensor's motion between scans.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["LAYOUTS", "GpsFix", "PositionTrack", "gprmc", "nmea_checksum", "position_packet"]

_HOUR_US = 3_600_000_000
_EARTH_M = 6_378_137.0
_KNOT_MPS = 1852.0 / 3600.0
PPS_LOCKED = 2
TEMPERATURES_C = {"top": 45, "bottom": 40, "adc_calibration": 38, "power_up": 38}
"""The board temperatures a VLP-32C reports (steady state, no thermal shutdown)."""
LAYOUTS = {"vlp16": 128, "vlp32c": 128, "hdl32": 72}
"""Position packet layouts (module docstring) -> the room for the NMEA sentence at byte 206."""


@dataclass(frozen=True)
class GpsFix:
    """A position fix: degrees, metres a second over ground, course clockwise from north."""

    lat_deg: float
    lon_deg: float
    speed_mps: float = 0.0
    course_deg: float = 0.0


def nmea_checksum(body: str) -> str:
    """XOR of the sentence's characters between ``$`` and ``*``, two hex digits."""
    c = 0
    for ch in body.encode():
        c ^= ch
    return f"{c:02X}"


def _ddmm(value: float, deg_digits: int) -> str:
    deg = int(abs(value))
    minutes = (abs(value) - deg) * 60.0
    if round(minutes, 4) >= 60.0:
        deg, minutes = deg + 1, 0.0
    return f"{deg:0{deg_digits}d}{minutes:07.4f}"


def gprmc(second_ns: int, fix: GpsFix) -> bytes:
    """The ``$GPRMC`` sentence of the fix at the UTC second ``second_ns`` (ns since the Unix epoch)."""
    t = dt.datetime.fromtimestamp(second_ns // 1_000_000_000, dt.UTC)
    body = ",".join(
        [
            "GPRMC",
            f"{t:%H%M%S}",
            "A",
            _ddmm(fix.lat_deg, 2),
            "N" if fix.lat_deg >= 0 else "S",
            _ddmm(fix.lon_deg, 3),
            "E" if fix.lon_deg >= 0 else "W",
            f"{fix.speed_mps / _KNOT_MPS:05.1f}",
            f"{fix.course_deg % 360.0:05.1f}",
            f"{t:%d%m%y}",
            "",
            "",
            "A",
        ]
    )
    return f"${body}*{nmea_checksum(body)}\r\n".encode()


def position_packet(
    wall_ns: int,
    fix: GpsFix | bytes,
    layout: str = "vlp32c",
    uptime_s: int = 0,
    pps: int = PPS_LOCKED,
) -> bytes:
    """The 512-byte position payload assembled at ``wall_ns`` (ns since the Unix epoch) in ``layout``
    (:data:`LAYOUTS`), carrying the sentence of the last whole second (``fix``: that second's fix, or
    its sentence already built)."""
    if layout not in LAYOUTS:
        raise ValueError(f"position packet layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    buf = bytearray(512)
    buf[198:202] = int((wall_ns // 1000) % _HOUR_US).to_bytes(4, "little")
    sentence = fix if isinstance(fix, bytes) else gprmc(wall_ns - wall_ns % 1_000_000_000, fix)
    if layout in ("vlp16", "vlp32c"):
        buf[202] = pps
    if layout == "vlp32c":
        temp = TEMPERATURES_C
        buf[187], buf[188], buf[189] = temp["top"], temp["bottom"], temp["adc_calibration"]
        buf[190:192] = (temp["bottom"] - temp["adc_calibration"]).to_bytes(2, "little", signed=True)
        buf[192:196] = int(uptime_s).to_bytes(4, "little")
        buf[196] = 1  # calibrated at power-on, not since
        buf[205] = temp["power_up"]
    assert len(sentence) <= LAYOUTS[layout]
    buf[206 : 206 + len(sentence)] = sentence
    return bytes(buf)


class PositionTrack:
    """The sensor's path from the scans' start poses, as a GPS receiver would report it."""

    def __init__(self, origin_lat_deg: float, origin_lon_deg: float) -> None:
        self.lat0, self.lon0 = origin_lat_deg, origin_lon_deg
        self._t: list[int] = []
        self._p: list[np.ndarray] = []

    def add(self, t_ns: int, position: np.ndarray) -> None:
        """The sensor's world position (x east, y north, metres) at sim time ``t_ns``."""
        if self._t and t_ns <= self._t[-1]:
            return
        self._t, self._p = [*self._t[-1:], int(t_ns)], [*self._p[-1:], np.asarray(position, np.float64)]

    def fix(self, t_ns: int) -> GpsFix:
        """The fix at ``t_ns``: the last pose moved on at the last velocity."""
        if not self._t:
            return GpsFix(self.lat0, self.lon0)
        vel = np.zeros(3)
        if len(self._t) == 2:
            vel = (self._p[1] - self._p[0]) / ((self._t[1] - self._t[0]) * 1e-9)
        p = self._p[-1] + vel * (t_ns - self._t[-1]) * 1e-9
        lat = self.lat0 + math.degrees(p[1] / _EARTH_M)
        lon = self.lon0 + math.degrees(p[0] / (_EARTH_M * math.cos(math.radians(self.lat0))))
        speed = float(math.hypot(vel[0], vel[1]))
        course = math.degrees(math.atan2(vel[0], vel[1])) % 360.0 if speed > 0.05 else 0.0
        return GpsFix(lat, lon, speed, course)
