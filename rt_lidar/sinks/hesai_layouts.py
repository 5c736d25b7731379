"""The byte layouts of Hesai spinning lidars' data packets (all little-endian), one class each.

- PandarXT-32 / XT32M2X, protocol 6.1 (1080 bytes): a pre-header (``EE FF``, 6.1, two reserved
  bytes), a header (32 channels, 8 blocks, a reserved byte, the distance unit 4 mm, the returns,
  flags), eight blocks of an azimuth and 32 channels of distance (4 mm), reflectivity and a reserved
  byte, then the tail: reserved bytes, the return mode, the motor speed, the UTC date and time,
  microseconds, a factory byte and a UDP sequence number.
- OT128 / Pandar128E3X, protocol 1.4 (861 bytes): the pre-header (``EE FF``, 1.4), a header (128
  channels, 2 blocks, which return the first block holds, the distance unit 4 mm, the returns, flags:
  UDP sequence, IMU and functional safety present, no confidence byte), two blocks of an azimuth and
  128 channels of distance (4 mm) and reflectivity, the body's CRC, 17 bytes of functional safety,
  then the tail: reserved status bytes, the azimuth states (each block's column's state: 0 unless
  the preset has per-state firing offsets from the OT128's firetime file), the operational state (0 high
  resolution, 2 standard), the return mode, the motor speed, the UTC date and time, the microseconds
  of the last block's firing, a factory byte, the UDP sequence number, 22 bytes of IMU data and the
  tail's CRC. The pre-header's fifth byte is above 127 for an OT128 (Hesai's SDK 2.0 tells it from a
  Pandar128E3X so).
- PandarXT-16: the XT32's protocol 6.1 with 16 channels (568 bytes).
- Pandar64 (1194 bytes): a header (``EE FF``, 64 channels, 6 blocks, 1 in dual mode, the distance
  unit 4 mm, two reserved bytes), six blocks of an azimuth and 64 channels of distance (4 mm) and
  reflectivity, then the Pandar40P's tail.
- Pandar40P (1262 bytes, no header): ten blocks of a ``FF EE`` flag, an azimuth and 40 channels of
  distance (4 mm) and reflectivity, then the tail: reserved and status bytes, the motor speed, the
  microseconds, the return mode, a factory byte and the UTC date (year - 2000) and time.
- PandarQT64, protocol 3.1 (1072 bytes): the pre-header (3.1), the header (64 channels, 4 blocks,
  4 mm, flags: UDP sequence), four blocks of an azimuth and 64 channels of distance, reflectivity and
  a confidence byte, then the tail: status bytes, the motor speed, the microseconds, the return mode,
  a factory byte, the UTC date and time and the UDP sequence number.
- PandarQT128, protocol 3.2 (1095 bytes): the pre-header (3.2), the header (128 channels, 2 blocks,
  4 mm, flags: UDP sequence, functional safety, confidence byte), two blocks of an azimuth and 128
  channels of distance, reflectivity and confidence, the body's CRC, 17 bytes of functional safety,
  then the tail (status bytes, mode flag, azimuth states, working mode, return mode, motor speed, UTC
  date and time, microseconds, factory byte), the UDP sequence number and the tail's CRC.

- JT16, protocol 1.8 (80 bytes, one column a packet): the pre-header (``EE FF``, 1.8, data type 0:
  points), the UTC date (year - 1900) and time and the microseconds of the firing, the azimuth and 16
  channels of distance (4 mm) and reflectivity, 10 bytes of point information (the last two a UDP
  sequence number) and a CRC. One return a packet.

- AT128, protocol 4.3 (1086 bytes, no signature): the pre-header (4.3), the header (128 channels, 2
  blocks, 4 mm, flags: UDP sequence, confidence), two blocks of the mirror encoder's angle (0.01 deg
  and a fine byte of 1/256 of it) and 128 channels of distance, reflectivity and confidence, the
  body's CRC, the tail (status bytes, motor speed, microseconds, return mode, factory byte, UTC date
  (year - 1900) and time), the UDP sequence number and the tail's CRC. Only presets made from the
  AT128's ``.dat`` (the encoder angle of a column needs its mirror fields).

The tail's time is the packet's last block's firing (the XT32's: its first block's). The CRCs, the
functional-safety and IMU bytes, the confidence bytes and the status bytes are written as zeros.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.sensor.mirror_adjust import has_adjust
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import firing_states
from rt_lidar.sinks.hesai_packets import RETURN_MODE_BYTE, HesaiPacketizer, utc_fields
from rt_lidar.sinks.pcap import DEFAULT_EPOCH_NS

__all__ = [
    "LAYOUTS",
    "HesaiAT128Packetizer",
    "HesaiJT16Packetizer",
    "HesaiOT128Packetizer",
    "HesaiPandar40PPacketizer",
    "HesaiPandar64Packetizer",
    "HesaiQT64Packetizer",
    "HesaiQT128Packetizer",
    "HesaiXT16Packetizer",
    "HesaiXT32Packetizer",
]


@dataclass(frozen=True)
class TailFields:
    """Where a layout's tail holds the fields the simulator fills (byte offsets into the tail; the
    rest stays zero)."""

    rpm: int
    us: int
    date: int
    mode: int
    factory: int
    seq: int | None = None
    """The 4-byte UDP sequence number's offset, if the tail carries one."""
    year_base: int = 1900


def write_tails(
    packetizer: HesaiPacketizer, out: np.ndarray, start: int, wall: np.ndarray, seq0: int, fields: TailFields
) -> None:
    """Fill each packet's tail (``out[k, start:]``) with the motor speed, the UTC date and time and the
    microseconds of the wall time ``wall[k]``, the return mode, the factory byte and the sequence number."""
    for k in range(len(out)):
        date, us = utc_fields(int(wall[k]), year_base=fields.year_base)
        tail = bytearray(out.shape[1] - start)
        tail[fields.rpm : fields.rpm + 2] = packetizer.rpm.to_bytes(2, "little")
        tail[fields.us : fields.us + 4] = us.to_bytes(4, "little")
        tail[fields.date : fields.date + 6] = date
        tail[fields.mode] = RETURN_MODE_BYTE[packetizer.mode]
        tail[fields.factory] = 0x42  # factory information
        if fields.seq is not None:
            tail[fields.seq : fields.seq + 4] = ((seq0 + k) % 2**32).to_bytes(4, "little")
        out[k, start:] = np.frombuffer(bytes(tail), np.uint8)


PANDAR40P_TAIL = TailFields(rpm=8, us=10, date=16, mode=14, factory=15, year_base=2000)
"""The Pandar40P's tail, which the Pandar64 shares: no sequence number, the year from 2000."""


class HeaderedLayout(HesaiPacketizer):
    """A layout of the pre-header and header (12 bytes: ``EE FF``, the protocol ``VERSION``, the status
    byte; channels, blocks, which return the first block holds, the distance unit in mm, the returns,
    ``FLAGS``), the blocks from byte 12 and a tail at ``TAIL`` with the fields of ``TAIL_FIELDS``."""

    VERSION = (0, 0)
    UNIT_BYTES = 4
    """Bytes a channel of a block: distance and reflectivity, and with 4 a confidence/reserved byte."""
    FLAGS = 0
    BLOCK_ORDER = True
    """Whether the header says which return the first block holds (1 in dual mode: the last)."""
    TAIL_TIME_BLOCK = -1
    """The block whose firing the tail's time is."""
    BODY = 12
    TAIL = 0
    TAIL_FIELDS: ClassVar[TailFields]

    @property
    def status_version(self) -> int:
        """The pre-header's fifth byte."""
        return 0

    def blocks(self, az: np.ndarray, dist: np.ndarray, refl: np.ndarray) -> np.ndarray:
        """(n, B * block) bytes of the blocks (:meth:`HesaiPacketizer.body_blocks`)."""
        return self.body_blocks(az, dist, refl, self.UNIT_BYTES)

    def pack(
        self, az: np.ndarray, dist: np.ndarray, refl: np.ndarray, block_ns: np.ndarray, seq0: int
    ) -> np.ndarray:
        """See :meth:`HesaiPacketizer.pack`."""
        n, nb, nc = dist.shape
        out = np.zeros((n, self.PAYLOAD_BYTES), np.uint8)
        first_block = 1 if self.BLOCK_ORDER and self.mode == "dual" else 0
        out[:, :6] = (0xEE, 0xFF, *self.VERSION, self.status_version, 0)
        out[:, 6:12] = (nc, nb, first_block, int(self.DISTANCE_M * 1000), self.n_returns, self.FLAGS)
        body = self.blocks(az, dist, refl)
        out[:, self.BODY : self.BODY + body.shape[1]] = body
        wall = self.wall_ns(block_ns[:, self.TAIL_TIME_BLOCK])
        write_tails(self, out, self.TAIL, wall, seq0, self.TAIL_FIELDS)
        return out


class HesaiXT32Packetizer(HeaderedLayout):
    """Scans -> PandarXT-32 data packets (protocol 6.1), in send order."""

    PRODUCT = "PandarXT-32"
    PACKET_FORMATS = ("hesai-xt32",)
    CHANNELS, BLOCKS, DISTANCE_M = 32, 8, 0.004
    BODY = 12
    TAIL = BODY + BLOCKS * (2 + 4 * CHANNELS)  # 1052
    PAYLOAD_BYTES = TAIL + 24 + 4  # tail + UDP sequence number: 1080
    TAIL_FIELDS = TailFields(rpm=11, us=19, date=13, mode=10, factory=23, seq=24)
    VERSION, BLOCK_ORDER = (6, 1), False
    TAIL_TIME_BLOCK = 0  # the XT32's tail: its first block's firing


class HesaiXT16Packetizer(HesaiXT32Packetizer):
    """Scans -> PandarXT-16 data packets (protocol 6.1 with 16 channels, 568 bytes), in send order."""

    PRODUCT = "PandarXT-16"
    PACKET_FORMATS = ("hesai-xt16",)
    CHANNELS = 16
    TAIL = HesaiXT32Packetizer.BODY + HesaiXT32Packetizer.BLOCKS * (2 + 4 * CHANNELS)  # 540
    PAYLOAD_BYTES = TAIL + 24 + 4  # 568


class HesaiOT128Packetizer(HeaderedLayout):
    """Scans -> OT128 / Pandar128E3X data packets (protocol 1.4), in send order."""

    PRODUCT = "OT128 / Pandar128E3X"
    PACKET_FORMATS = ("hesai-ot128",)
    CHANNELS, BLOCKS, DISTANCE_M = 128, 2, 0.004
    BODY = 12
    CRC = BODY + BLOCKS * (2 + 3 * CHANNELS)  # 784
    SAFETY = CRC + 4  # 788
    TAIL = SAFETY + 17  # 805
    PAYLOAD_BYTES = TAIL + 56  # 861
    FLAGS = 0x01 | 0x02 | 0x04  # UDP sequence, IMU, functional safety; no confidence byte
    TAIL_FIELDS = TailFields(rpm=13, us=21, date=15, mode=12, factory=25, seq=26)
    VERSION, UNIT_BYTES = (1, 4), 3
    HIGH_RES_CYCLE_US = 40.0
    """Columns closer than this are the high-resolution mode's (27.78 us at 10 Hz), else standard (55.56)."""

    @property
    def status_version(self) -> int:
        """The pre-header's fifth byte: above 127 an OT128's (Hesai's SDK 2.0 tells the OT128 from the
        Pandar128E3X by it), else 0."""
        return 0x80 if self.preset.model == "OT128" else 0

    def pack(
        self, az: np.ndarray, dist: np.ndarray, refl: np.ndarray, block_ns: np.ndarray, seq0: int
    ) -> np.ndarray:
        """See :meth:`HesaiPacketizer.pack`; the tail's azimuth states and operational state added."""
        out = super().pack(az, dist, refl, block_ns, seq0)
        cycle_us = self.period_ns / self.slots / 1000.0
        az_state = firing_states(self.preset, self.block_columns(block_ns))  # (n, B)
        az_word = (az_state[:, 0] << 14) | (az_state[:, 1] << 12)  # block 1: bits 15-14, block 2: 13-12
        out[:, self.TAIL + 9 : self.TAIL + 11] = self.le_bytes(az_word, "<u2")
        out[:, self.TAIL + 11] = 0 if cycle_us < self.HIGH_RES_CYCLE_US else 2  # the operational state
        return out


class HesaiPandar40PPacketizer(HesaiPacketizer):
    """Scans -> Pandar40P data packets (1262 bytes, no pre-header), in send order."""

    PRODUCT = "Pandar40P"
    PACKET_FORMATS = ("hesai-pandar40p",)
    CHANNELS, BLOCKS, DISTANCE_M = 40, 10, 0.004
    TAIL = BLOCKS * (4 + 3 * CHANNELS)  # 1240
    PAYLOAD_BYTES = TAIL + 22  # 1262

    def pack(
        self, az: np.ndarray, dist: np.ndarray, refl: np.ndarray, block_ns: np.ndarray, seq0: int
    ) -> np.ndarray:
        """See :meth:`HesaiPacketizer.pack`."""
        n = dist.shape[0]
        out = np.zeros((n, self.PAYLOAD_BYTES), np.uint8)
        out[:, : self.TAIL] = self.body_blocks(az, dist, refl, 3, flag=b"\xff\xee")
        write_tails(self, out, self.TAIL, self.wall_ns(block_ns[:, -1]), seq0, PANDAR40P_TAIL)
        return out


class HesaiPandar64Packetizer(HesaiPacketizer):
    """Scans -> Pandar64 data packets (1194 bytes), in send order."""

    PRODUCT = "Pandar64"
    PACKET_FORMATS = ("hesai-pandar64",)
    CHANNELS, BLOCKS, DISTANCE_M = 64, 6, 0.004
    BODY = 8
    TAIL = BODY + BLOCKS * (2 + 3 * CHANNELS)  # 1172
    PAYLOAD_BYTES = TAIL + 22  # 1194

    def pack(
        self, az: np.ndarray, dist: np.ndarray, refl: np.ndarray, block_ns: np.ndarray, seq0: int
    ) -> np.ndarray:
        """See :meth:`HesaiPacketizer.pack`."""
        n, nb, nc = dist.shape
        out = np.zeros((n, self.PAYLOAD_BYTES), np.uint8)
        out[:, :8] = (0xEE, 0xFF, nc, nb, 1 if self.mode == "dual" else 0, 4, 0, 0)
        out[:, self.BODY : self.TAIL] = self.body_blocks(az, dist, refl, 3)
        write_tails(self, out, self.TAIL, self.wall_ns(block_ns[:, -1]), seq0, PANDAR40P_TAIL)
        return out


class HesaiQT64Packetizer(HeaderedLayout):
    """Scans -> PandarQT64 data packets (protocol 3.1, 1072 bytes), in send order."""

    PRODUCT = "PandarQT64"
    PACKET_FORMATS = ("hesai-qt64",)
    CHANNELS, BLOCKS, DISTANCE_M = 64, 4, 0.004
    BODY = 12
    TAIL = BODY + BLOCKS * (2 + 4 * CHANNELS)  # 1044
    PAYLOAD_BYTES = TAIL + 28  # 1072
    FLAGS = 0x01  # UDP sequence number present
    TAIL_FIELDS = TailFields(rpm=10, us=12, date=18, mode=16, factory=17, seq=24)
    VERSION = (3, 1)


class HesaiQT128Packetizer(HeaderedLayout):
    """Scans -> PandarQT128 data packets (protocol 3.2, 1095 bytes), in send order."""

    PRODUCT = "PandarQT128"
    PACKET_FORMATS = ("hesai-qt128",)
    CHANNELS, BLOCKS, DISTANCE_M = 128, 2, 0.004
    BODY = 12
    CRC = BODY + BLOCKS * (2 + 4 * CHANNELS)  # 1040
    SAFETY = CRC + 4
    TAIL = SAFETY + 17  # 1061
    PAYLOAD_BYTES = TAIL + 26 + 4 + 4  # tail, UDP sequence number, CRC: 1095
    FLAGS = 0x01 | 0x04 | 0x10  # UDP sequence, functional safety, confidence byte
    TAIL_FIELDS = TailFields(rpm=13, us=21, date=15, mode=12, factory=25, seq=26)
    VERSION = (3, 2)


class HesaiJT16Packetizer(HesaiPacketizer):
    """Scans -> JT16 point packets (protocol 1.8, 80 bytes: one column each), in send order."""

    PRODUCT = "JT16"
    PACKET_FORMATS = ("hesai-jt16",)
    CHANNELS, BLOCKS, DISTANCE_M = 16, 1, 0.004
    BODY = 16
    PAYLOAD_BYTES = BODY + 2 + 3 * CHANNELS + 10 + 4  # block, point info, CRC: 80

    def __init__(
        self, preset: SensorPreset, mode: str | None = None, epoch_ns: int = DEFAULT_EPOCH_NS
    ) -> None:
        if (mode or preset.returns.default) not in ("strongest", "last"):
            raise ConfigError(
                f"hesai return mode '{mode or preset.returns.default}': a JT16 packet holds one return "
                "(strongest or last)"
            )
        super().__init__(preset, mode, epoch_ns)

    def pack(
        self, az: np.ndarray, dist: np.ndarray, refl: np.ndarray, block_ns: np.ndarray, seq0: int
    ) -> np.ndarray:
        """See :meth:`HesaiPacketizer.pack`."""
        n = dist.shape[0]
        out = np.zeros((n, self.PAYLOAD_BYTES), np.uint8)
        out[:, :6] = (0xEE, 0xFF, 1, 8, 0, 0)  # data type 0: points
        body = self.BODY + 2 + 3 * self.CHANNELS
        out[:, self.BODY : body] = self.body_blocks(az, dist, refl, 3)
        wall = self.wall_ns(block_ns[:, 0])
        for k in range(n):
            date, us = utc_fields(int(wall[k]))
            out[k, 6:12] = np.frombuffer(date, np.uint8)
            out[k, 12:16] = np.frombuffer(us.to_bytes(4, "little"), np.uint8)
            out[k, body + 8 : body + 10] = np.frombuffer(((seq0 + k) % 2**16).to_bytes(2, "little"), np.uint8)
        return out


class HesaiAT128Packetizer(HeaderedLayout):
    """Scans -> AT128 data packets (protocol 4.3, 1086 bytes), in send order, of a preset made from the
    AT128's ``.dat`` (its mirror fields and adjust tables: :mod:`rt_lidar.sensor.mirror_adjust`)."""

    PRODUCT = "AT128 (from its .dat)"
    PACKET_FORMATS = ("hesai-at128",)
    CHANNELS, BLOCKS, DISTANCE_M = 128, 2, 0.004
    BODY = 12
    CRC = BODY + BLOCKS * (3 + 4 * CHANNELS)  # 1042
    TAIL = CRC + 4
    PAYLOAD_BYTES = TAIL + 32 + 4 + 4  # tail, UDP sequence number, CRC: 1086
    FLAGS = 0x01 | 0x10  # UDP sequence number; confidence byte
    TAIL_FIELDS = TailFields(rpm=18, us=20, date=26, mode=24, factory=25, seq=32)
    VERSION = (4, 3)

    def __init__(
        self, preset: SensorPreset, mode: str | None = None, epoch_ns: int = DEFAULT_EPOCH_NS
    ) -> None:
        if preset.packet_format in self.PACKET_FORMATS and not has_adjust(preset):
            raise ConfigError(
                f"preset {preset.name}: AT128 packets carry the mirror encoder's angle, which only a preset "
                "made from the sensor's .dat knows (--preset 'AT128E2X_Angle Correction File.dat')"
            )
        super().__init__(preset, mode, epoch_ns)
        fields = preset.scan.mirror_fields_deg
        assert fields is not None and preset.scan.fov_h_deg is not None
        self._fields = np.asarray(fields, np.float64)
        az_off = preset.azimuth_offsets_deg
        self._lo = -preset.scan.fov_h_deg / 2.0 - float(az_off.min())
        self._hi = preset.scan.fov_h_deg / 2.0 - float(az_off.max())

    @property
    def rpm(self) -> int:
        """The mirror motor's speed: one field a frame."""
        return round(60e9 / self.period_ns / len(self._fields))

    def block_azimuths(self, block_col: np.ndarray) -> np.ndarray:
        """The mirror encoder's angle of each block's column, in 1/25600 deg (as the scan pattern puts the
        column: :func:`rt_lidar.sensor.mirror_adjust.mirror_adjust_deg`)."""
        slot = np.mod(block_col, self.slots)
        field = np.mod(block_col // self.slots, len(self._fields))
        col_az = self._hi - (self._hi - self._lo) * slot / max(self.slots - 1, 1)
        enc = np.mod(self._fields[field] + (90.0 - col_az) / 2.0, 360.0)
        return np.round(enc * 25600.0).astype(np.int64) % (360 * 25600)

    def blocks(self, az: np.ndarray, dist: np.ndarray, refl: np.ndarray) -> np.ndarray:
        """The blocks, ``az`` the encoder in 1/25600 deg: 0.01 deg and a fine byte."""
        n, nb, nc = dist.shape
        body = np.zeros((n, nb, 3 + 4 * nc), np.uint8)
        body[:, :, 0:2] = self.le_bytes(az // 256, "<u2")
        body[:, :, 2] = az % 256
        chan = np.zeros((n, nb, nc, 4), np.uint8)
        chan[..., 0:2] = self.le_bytes(dist, "<u2")
        chan[..., 2] = refl
        body[:, :, 3:] = chan.reshape(n, nb, 4 * nc)
        return body.reshape(n, -1)


LAYOUTS: tuple[type[HesaiPacketizer], ...] = (
    HesaiXT32Packetizer,
    HesaiXT16Packetizer,
    HesaiPandar64Packetizer,
    HesaiOT128Packetizer,
    HesaiPandar40PPacketizer,
    HesaiQT64Packetizer,
    HesaiQT128Packetizer,
    HesaiJT16Packetizer,
    HesaiAT128Packetizer,
)
"""Every layout, by the preset packet formats it writes."""
