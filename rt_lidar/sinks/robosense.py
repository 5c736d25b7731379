"""RoboSense MSOP data packets (``--sink robosense-pcap:FILE``, ``--sink robosense-udp:HOST:PORT``) of
RS-16, RS-32 and RS-Bpearl presets, laid out as rs_driver's ``RS16MsopPkt`` / ``RS32MsopPkt`` declare
them (network byte order):

- a 42-byte header: the id ``55 AA 05 0A 5A A5 50 A0``, 12 reserved bytes, the first block's time
  (year - 2000, month, day, hour, minute, second, then milliseconds and microseconds as uint16), the
  lidar type, reserved bytes and the temperature (zero);
- 12 blocks of the flag ``FF EE``, the azimuth (uint16, 0.01 deg, clockwise) and 32 channels of
  distance (uint16, 5 mm) and intensity; a channel is the laser's row in ``angle.csv``. The RS-16's
  block holds two firings of its 16 lasers (channels 16-31 the second, half a block later), the
  RS-32's and Bpearl's one firing of 32;
- a 4-byte index (zero) and the tail ``00 FF``: 1248 bytes.

rs_driver turns each channel by the block's azimuth step times its firing time over the block's
duration (its firing tables are the presets' firing offsets), adds the file's azimuth and places the
point at the lens centre (``RX`` turned with the head, ``RZ`` up) plus the distance along the beam, so
the distance written is the range along the beam from the preset's origin. Single returns only
(``strongest`` or ``last``): the return mode lives in the device-info (DIFOP) packets, which are not
written, and rs_driver reads MSOP as single-return without them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.sensor.beam_origins import ranges_along_beams
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink
from rt_lidar.sinks.hesai_packets import HesaiPacketizer, packetizer_factory, utc_fields
from rt_lidar.sinks.pcap import DEFAULT_EPOCH_NS, PacketPcapSink
from rt_lidar.sinks.udp import PACER_OPTIONS, UdpPacketSink

__all__ = ["MSOP_BYTES", "RoboSensePacketizer", "robosense_pcap_sink", "robosense_udp_sink"]

MSOP_ID = bytes((0x55, 0xAA, 0x05, 0x0A, 0x5A, 0xA5, 0x50, 0xA0))
MSOP_BYTES, HEADER, BLOCKS, SLOTS = 1248, 42, 12, 32
LASERS = {"robosense-rs16": 16, "robosense-rs32": 32, "robosense-bp": 32}
_SENSOR_IP, _DEST_IP = "192.168.1.200", "192.168.1.102"


class RoboSensePacketizer(HesaiPacketizer):
    """Scans -> RS-16 / RS-32 / RS-Bpearl MSOP packets, in send order (one firing of every laser a
    column; the RS-16 puts two columns in a block)."""

    PRODUCT = "RS-16 / RS-32 / RS-Bpearl"
    PACKET_FORMATS = tuple(LASERS)
    DISTANCE_M = 0.005
    PAYLOAD_BYTES = MSOP_BYTES

    def __init__(
        self, preset: SensorPreset, mode: str | None = None, epoch_ns: int = DEFAULT_EPOCH_NS
    ) -> None:
        self.CHANNELS = LASERS.get(preset.packet_format, 0)
        self.BLOCKS = BLOCKS * (SLOTS // self.CHANNELS) if self.CHANNELS else 1  # columns a packet
        if (mode or preset.returns.default) not in ("strongest", "last"):
            raise ConfigError(
                f"robosense return mode '{mode or preset.returns.default}': the MSOP writer writes "
                "single returns (strongest or last); rs_driver reads dual returns only with DIFOP packets"
            )
        super().__init__(preset, mode, epoch_ns)
        self.ports = {"data": 6699}
        ids = np.array([b.laser_id if b.laser_id is not None else b.ring + 1 for b in preset.beams])
        self._channel_ring = np.argsort(ids - ids.min(), kind="stable")  # packet channel -> ring

    def ranges(self, pts: np.ndarray) -> np.ndarray:
        """The range along each point's beam from the lens centre (rs_driver's RX, RZ)."""
        return ranges_along_beams(self.preset, pts).astype(np.float32)

    def pack(
        self, az: np.ndarray, dist: np.ndarray, refl: np.ndarray, block_ns: np.ndarray, seq0: int
    ) -> np.ndarray:
        """See :meth:`HesaiPacketizer.pack` (here a "block" is a column: two per MSOP block on an RS-16)."""
        n = dist.shape[0]
        per = SLOTS // self.CHANNELS  # columns an MSOP block
        order = self._channel_ring
        d = dist[:, :, order].reshape(n, BLOCKS, SLOTS)  # (columns, lasers) -> (blocks, 32 slots)
        r = refl[:, :, order].reshape(n, BLOCKS, SLOTS)
        blocks = np.zeros((n, BLOCKS, 4 + 3 * SLOTS), np.uint8)
        blocks[:, :, 0:2] = (0xFF, 0xEE)
        blocks[:, :, 2:4] = self.le_bytes(az[:, ::per], ">u2")
        chan = np.zeros((n, BLOCKS, SLOTS, 3), np.uint8)
        chan[..., 0:2] = self.le_bytes(d, ">u2")
        chan[..., 2] = r
        blocks[:, :, 4:] = chan.reshape(n, BLOCKS, 3 * SLOTS)
        out = np.zeros((n, MSOP_BYTES), np.uint8)
        out[:, :8] = np.frombuffer(MSOP_ID, np.uint8)
        out[:, HEADER : HEADER + BLOCKS * (4 + 3 * SLOTS)] = blocks.reshape(n, -1)
        out[:, -2:] = (0x00, 0xFF)
        wall = self.wall_ns(block_ns[:, 0])
        for k in range(n):
            date, us = utc_fields(int(wall[k]), year_base=2000)
            out[k, 20:26] = np.frombuffer(date, np.uint8)
            out[k, 26:28] = np.frombuffer((us // 1000).to_bytes(2, "big"), np.uint8)
            out[k, 28:30] = np.frombuffer((us % 1000).to_bytes(2, "big"), np.uint8)
        return out


def _factory(options: dict[str, str], kind: str) -> tuple[Callable[[SinkContext], RoboSensePacketizer], dict]:
    return packetizer_factory(options, kind, ("strongest", "last"), RoboSensePacketizer)


@register_sink("robosense-pcap")
def robosense_pcap_sink(target: str, options: dict[str, str]) -> PacketPcapSink:
    """``--sink robosense-pcap:out.pcap[,mode=last][,epoch_ns=N]`` (an RS-16, RS-32 or RS-Bpearl preset)."""
    SinkOptions("robosense-pcap", options, {"mode", "epoch_ns"})
    make, _ = _factory(options, "robosense-pcap")
    return PacketPcapSink(target, make, _SENSOR_IP, _DEST_IP)


@register_sink("robosense-udp")
def robosense_udp_sink(target: str, options: dict[str, str]) -> UdpPacketSink:
    """``--sink robosense-udp:HOST:PORT[,mode=last][,latency_ms=50][,clock=wall|sim]`` (MSOP, port 6699)."""
    SinkOptions("robosense-udp", options, {"mode", "epoch_ns"} | PACER_OPTIONS)
    make, rest = _factory(options, "robosense-udp")
    return UdpPacketSink(target or "127.0.0.1:6699", make, rest, {}, kind="robosense-udp")
