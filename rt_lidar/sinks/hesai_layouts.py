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
  then the tail: reserved status bytes, the azimuth states, the operational state (0 high
  resolution, 2 standard), the return mode, the motor speed, the UTC date and time, the microseconds
  of the last block's firing, a factory byte, the UDP sequence number, 22 bytes of IMU data and the
  tail's CRC. The CRCs, the functional-safety bytes and the IMU data are written as zeros.
"""

from __future__ import annotations

import numpy as np

from rt_lidar.sinks.hesai_packets import RETURN_MODE_BYTE, HesaiPacketizer, utc_fields

__all__ = ["LAYOUTS", "HesaiOT128Packetizer", "HesaiXT32Packetizer"]


class HesaiXT32Packetizer(HesaiPacketizer):
    """Scans -> PandarXT-32 data packets (protocol 6.1), in send order."""

    PRODUCT = "PandarXT-32"
    PACKET_FORMATS = ("hesai-xt32",)
    CHANNELS, BLOCKS, DISTANCE_M = 32, 8, 0.004
    BODY = 12
    TAIL = BODY + BLOCKS * (2 + 4 * CHANNELS)  # 1052
    PAYLOAD_BYTES = TAIL + 24 + 4  # tail + UDP sequence number: 1080

    def pack(
        self, az: np.ndarray, dist: np.ndarray, refl: np.ndarray, block_ns: np.ndarray, seq0: int
    ) -> np.ndarray:
        """See :meth:`HesaiPacketizer.pack`."""
        n, nb, nc = dist.shape
        out = np.zeros((n, self.PAYLOAD_BYTES), np.uint8)
        body = np.zeros((n, nb, 2 + 4 * nc), np.uint8)
        body[:, :, 0:2] = self.le_bytes(az, "<u2")
        chan = np.zeros((n, nb, nc, 4), np.uint8)
        chan[..., 0:2] = self.le_bytes(dist, "<u2")
        chan[..., 2] = refl
        body[:, :, 2:] = chan.reshape(n, nb, 4 * nc)
        out[:, :6] = (0xEE, 0xFF, 6, 1, 0, 0)
        out[:, 6:12] = (nc, nb, 0, int(self.DISTANCE_M * 1000), self.n_returns, 0)
        out[:, self.BODY : self.TAIL] = body.reshape(n, -1)
        wall = self.wall_ns(block_ns[:, 0])
        for k in range(n):
            date, us = utc_fields(int(wall[k]))
            tail = bytearray(28)
            tail[10] = RETURN_MODE_BYTE[self.mode]
            tail[11:13] = self.rpm.to_bytes(2, "little")
            tail[13:19] = date
            tail[19:23] = us.to_bytes(4, "little")
            tail[23] = 0x42  # factory information
            tail[24:28] = (seq0 + k).to_bytes(4, "little")
            out[k, self.TAIL :] = np.frombuffer(bytes(tail), np.uint8)
        return out


class HesaiOT128Packetizer(HesaiPacketizer):
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
    HIGH_RES_CYCLE_US = 40.0
    """Columns closer than this are the high-resolution mode's (27.78 us at 10 Hz), else standard (55.56)."""

    def pack(
        self, az: np.ndarray, dist: np.ndarray, refl: np.ndarray, block_ns: np.ndarray, seq0: int
    ) -> np.ndarray:
        """See :meth:`HesaiPacketizer.pack`."""
        n, nb, nc = dist.shape
        out = np.zeros((n, self.PAYLOAD_BYTES), np.uint8)
        body = np.zeros((n, nb, 2 + 3 * nc), np.uint8)
        body[:, :, 0:2] = self.le_bytes(az, "<u2")
        chan = np.zeros((n, nb, nc, 3), np.uint8)
        chan[..., 0:2] = self.le_bytes(dist, "<u2")
        chan[..., 2] = refl
        body[:, :, 2:] = chan.reshape(n, nb, 3 * nc)
        first_block = 1 if self.mode == "dual" else 0  # dual: the first block holds the last return
        out[:, :6] = (0xEE, 0xFF, 1, 4, 0, 0)
        out[:, 6:12] = (nc, nb, first_block, int(self.DISTANCE_M * 1000), self.n_returns, self.FLAGS)
        out[:, self.BODY : self.CRC] = body.reshape(n, -1)
        cycle_us = self.period_ns / self.slots / 1000.0
        state = 0 if cycle_us < self.HIGH_RES_CYCLE_US else 2
        wall = self.wall_ns(block_ns[:, -1])  # the tail's time: the last block's firing
        for k in range(n):
            date, us = utc_fields(int(wall[k]))
            tail = bytearray(56)
            tail[11] = state
            tail[12] = RETURN_MODE_BYTE[self.mode]
            tail[13:15] = self.rpm.to_bytes(2, "little")
            tail[15:21] = date
            tail[21:25] = us.to_bytes(4, "little")
            tail[25] = 0x42  # factory information
            tail[26:30] = ((seq0 + k) % 2**32).to_bytes(4, "little")
            out[k, self.TAIL :] = np.frombuffer(bytes(tail), np.uint8)
        return out


LAYOUTS: tuple[type[HesaiPacketizer], ...] = (HesaiXT32Packetizer, HesaiOT128Packetizer)
"""Every layout, by the preset packet formats it writes."""
