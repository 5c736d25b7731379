"""Sensor datagrams and pcap files: the packetizer protocol every packet sink shares, the sim epoch,
points to firing slots, and a minimal libpcap writer for UDP (Ethernet / IPv4 / UDP) in NumPy (the reader,
of pcap and pcapng: :mod:`rt_lidar.sinks.pcap_read`).

The writer emits classic pcap (microsecond stamps, link type Ethernet) so Wireshark, dpkt,
velodyne-decoder and ouster-sdk read it. Each batch is written whole and flushed: a recording killed
mid-run keeps every batch before the kill (a reader stops at a torn final record).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import firings_per_scan, scan_period_ns
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.pcap_read import MAGIC_US, PcapRecord, read_pcap_udp

__all__ = [
    "DEFAULT_EPOCH_NS",
    "PacketBatch",
    "PacketPcapSink",
    "Packetizer",
    "PcapRecord",
    "PcapWriter",
    "ipv4_bytes",
    "point_columns",
    "read_pcap_udp",
    "slots_per_scan",
    "stamp_clock",
]

DEFAULT_EPOCH_NS = 1_704_067_200 * 1_000_000_000
"""Wall time of sim time 0 in packets and pcap stamps: 2024-01-01T00:00:00Z (a top of the hour, so
Velodyne's microseconds-past-the-hour stamps equal sim time modulo one hour)."""


@dataclass(frozen=True)
class PacketBatch:
    """Datagrams for one port, in send order."""

    port: str
    """Logical port: ``"data"``, ``"position"`` (Velodyne) or ``"imu"`` (Ouster)."""
    payloads: np.ndarray
    """(N, L) uint8, one datagram a row."""
    send_ns: np.ndarray
    """(N,) int64 sim time (ns since sensor start) at which a real sensor would send each one."""

    def __len__(self) -> int:
        return int(self.payloads.shape[0])


class Packetizer(Protocol):
    """Turns scans into a sensor's datagrams; stateful (a packet may span two scans)."""

    preset: SensorPreset
    ports: dict[str, int]
    """Default UDP port of each logical port."""
    epoch_ns: int

    def packetize(self, scan: Scan) -> list[PacketBatch]:
        """The datagrams completed by ``scan`` (in scan order, scans in index order)."""
        ...

    def finish(self) -> list[PacketBatch]:
        """Whatever is held back (a last, partial packet)."""
        ...


def stamp_clock(packetizer: Packetizer, context: SinkContext, scan: Scan) -> None:
    """Put ``packetizer`` on the run's stamp clock before it packetizes ``scan``: on the wall clock its
    epoch becomes the scan's wall offset (:meth:`SinkContext.stamp_offset_ns`); on the sim clock it
    keeps its own (``epoch_ns=``, by default :data:`DEFAULT_EPOCH_NS`)."""
    if context.stamp == "wall":
        packetizer.epoch_ns = context.stamp_offset_ns(scan)
    elif scan.clock_offset_ns or hasattr(packetizer, "sim_epoch_ns"):  # a clock fault (rt_lidar.faults)
        base = packetizer.__dict__.setdefault("sim_epoch_ns", packetizer.epoch_ns)
        packetizer.epoch_ns = base + scan.clock_offset_ns


def slots_per_scan(preset: SensorPreset) -> int:
    """Firing slots (columns) per rotation."""
    return firings_per_scan(preset) // preset.n_rings


def rotation_centideg(t_ns: np.ndarray, period_ns: int, az0_deg: float, sign: float) -> np.ndarray:
    """A rotating sensor's reported azimuth (uint16 hundredths of a degree, clockwise from the front as
    Velodyne and Hesai packets give it) at sim times ``t_ns``: ``az0_deg`` the counter-clockwise math
    azimuth at the rotation's start, ``sign`` its direction (+1 counter-clockwise)."""
    phase = np.mod(t_ns, period_ns).astype(np.float64) / period_ns
    math_az = az0_deg + sign * 360.0 * phase
    return (np.round(np.mod(-math_az, 360.0) * 100.0).astype(np.int64) % 36000).astype(np.uint16)


def point_columns(preset: SensorPreset, scan: Scan) -> np.ndarray:
    """(N,) int64 global firing slot of each point: the k with ``k*P//C + offset[ring] == t``.

    Exact integer inverse of ``scan_pattern``'s slot times (a ceiling division), so it also holds for
    times a few ns off the slot.
    """
    period, slots = scan_period_ns(preset), slots_per_scan(preset)
    pts = scan.points
    if preset.firing_state_offsets_us is not None:
        return _state_point_columns(preset, scan, period, slots)
    offsets = np.round(preset.firing_offsets_us * 1000.0).astype(np.int64)
    t = np.int64(scan.start_ns) + pts["t"].astype(np.int64) - offsets[pts["ring"].astype(np.intp)]
    return -((-t * slots) // period)


def _state_point_columns(preset: SensorPreset, scan: Scan, period: int, slots: int) -> np.ndarray:
    """:func:`point_columns` of a preset with azimuth states: per state the slot that the point's ring
    would fire at its time with that state's offset; the one whose slot is in that state (and where
    the ring fires), nearest the point's time."""
    table = preset.firing_state_offsets_us
    assert table is not None
    offs = np.where(table >= 0, np.round(table * 1000.0), -1).astype(np.int64)  # (S, R)
    n_states = offs.shape[0]
    pts = scan.points
    ring = pts["ring"].astype(np.intp)
    t = np.int64(scan.start_ns) + pts["t"].astype(np.int64)
    best = np.zeros(len(t), np.int64)
    best_err = np.full(len(t), np.iinfo(np.int64).max)
    for s in range(n_states):
        off = offs[s, ring]
        k = -((-(t - off) * slots) // period)
        err = np.abs(k * period // slots + off - t)
        ok = (off >= 0) & (np.mod(np.mod(k, slots), n_states) == s) & (err < best_err)
        best, best_err = np.where(ok, k, best), np.where(ok, err, best_err)
    return best


_LINKTYPE_ETHERNET = 1
_HDR = 16 + 14 + 20 + 8  # record header + Ethernet + IPv4 + UDP


def ipv4_bytes(addr: str) -> bytes:
    """``"192.168.1.201"`` -> 4 bytes."""
    parts = [int(p) for p in addr.split(".")]
    if len(parts) != 4 or not all(0 <= p <= 255 for p in parts):
        raise ValueError(f"not an IPv4 address: {addr!r}")
    return bytes(parts)


class PcapWriter:
    """Appends UDP datagrams to a pcap file; ``write_batch`` builds all headers of a batch at once."""

    def __init__(self, path: str | Path, src_mac: bytes = bytes.fromhex("607688000001")) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: BinaryIO = self.path.open("wb")
        self._fh.write(struct.pack("<IHHiIII", MAGIC_US, 2, 4, 0, 0, 65535, _LINKTYPE_ETHERNET))
        self._fh.flush()
        self._eth = b"\xff" * 6 + src_mac + b"\x08\x00"
        self._ip_id = 0
        self.packets = 0

    def write_batch(
        self,
        payloads: np.ndarray,
        stamps_ns: np.ndarray,
        src: str,
        dst: str,
        src_port: int,
        dst_port: int,
    ) -> None:
        """Write ``payloads`` ((N, L) uint8, one datagram a row) stamped ``stamps_ns`` ((N,) int64)."""
        payloads = np.ascontiguousarray(payloads, dtype=np.uint8)
        n, size = payloads.shape
        if n == 0:
            return
        rec = np.zeros((n, _HDR + size), np.uint8)
        stamps = np.asarray(stamps_ns, np.int64)
        hdr = rec[:, :16].view("<u4")
        hdr[:, 0] = stamps // 1_000_000_000
        hdr[:, 1] = (stamps % 1_000_000_000) // 1000
        hdr[:, 2] = hdr[:, 3] = 14 + 20 + 8 + size
        rec[:, 16:30] = np.frombuffer(self._eth, np.uint8)
        ip = rec[:, 30:50]
        ids = (self._ip_id + np.arange(n)) & 0xFFFF
        self._ip_id = int(ids[-1]) + 1
        fixed = bytearray(
            struct.pack(
                ">BBHHHBBH4s4s",
                0x45,
                0,
                20 + 8 + size,
                0,
                0x4000,
                64,
                17,
                0,
                ipv4_bytes(src),
                ipv4_bytes(dst),
            )
        )
        ip[:] = np.frombuffer(bytes(fixed), np.uint8)
        ip[:, 4] = ids >> 8
        ip[:, 5] = ids & 0xFF
        words = ip.reshape(n, 10, 2).astype(np.uint32)
        total = (words[:, :, 0] << 8 | words[:, :, 1]).sum(axis=1)
        while np.any(total >> 16):
            total = (total & 0xFFFF) + (total >> 16)
        csum = (~total) & 0xFFFF
        ip[:, 10] = csum >> 8
        ip[:, 11] = csum & 0xFF
        udp = rec[:, 50:58]
        udp[:] = np.frombuffer(struct.pack(">HHHH", src_port, dst_port, 8 + size, 0), np.uint8)
        rec[:, 58:] = payloads
        self._fh.write(rec.tobytes())
        self._fh.flush()
        self.packets += n

    def close(self) -> None:
        """Flush and close the file."""
        if not self._fh.closed:
            self._fh.close()


class PacketPcapSink:
    """A sink writing a packetizer's datagrams to a pcap file, stamped at their send times + epoch."""

    def __init__(
        self,
        path: str | Path,
        make_packetizer: Callable[[SinkContext], Packetizer],
        src_ip: str,
        dst_ip: str,
        ports: dict[str, int] | None = None,
    ) -> None:
        self.path = Path(path)
        self._make = make_packetizer
        self.src_ip, self.dst_ip = src_ip, dst_ip
        self._ports = dict(ports or {})
        self.packetizer: Packetizer | None = None
        self.writer: PcapWriter | None = None
        self._context: SinkContext | None = None

    def open(self, context: SinkContext) -> None:
        """Create the packetizer and the file; write the resolved config beside it."""
        from rt_lidar.faults.network import network_packetizer
        from rt_lidar.sinks.files import write_resolved_config

        self._context = context
        self.packetizer = network_packetizer(self._make, context, "pcap")
        self._ports = {**self.packetizer.ports, **self._ports}
        self.writer = PcapWriter(self.path)
        write_resolved_config(self.path.parent, context)

    def _emit(self, batches: list[PacketBatch]) -> None:
        assert self.writer is not None and self.packetizer is not None, "open() first"
        for b in batches:
            port = self._ports[b.port]
            stamps = b.send_ns + self.packetizer.epoch_ns
            self.writer.write_batch(b.payloads, stamps, self.src_ip, self.dst_ip, port, port)

    def write(self, scan: Scan) -> None:
        """Packetize ``scan`` (stamped on the run's clock) and append its datagrams."""
        assert self.packetizer is not None and self._context is not None, "open() first"
        stamp_clock(self.packetizer, self._context, scan)
        self._emit(self.packetizer.packetize(scan))

    def close(self) -> None:
        """Write the held-back packets and close the file."""
        if self.packetizer is not None and self.writer is not None:
            self._emit(self.packetizer.finish())
            self.writer.close()
