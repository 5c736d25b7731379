"""Hesai PandarXT-32 data packets (``--sink hesai-pcap:FILE``, ``--sink hesai-udp:HOST:PORT``).

The XT32's UDP payload (1080 bytes, protocol 6.1): a pre-header (``EE FF``, version 6.1, two reserved
bytes), a header (32 channels, 8 blocks, a reserved byte, the distance unit 4 mm, the returns, flags),
eight blocks of an azimuth (uint16, 0.01 deg, clockwise) and 32 channels of distance (uint16, 4 mm),
reflectivity and a reserved byte, then the tail: reserved bytes, the return mode (0x37 strongest, 0x38
last, 0x39 last + strongest), the motor speed, the UTC date and time, microseconds, a factory byte, and
a UDP sequence number. A block holds one firing of the 32 channels; in dual mode blocks come in pairs,
the last return first. A point's azimuth is its block's plus its channel's calibrated offset, as
Hesai's decoders compute it: the channels of a block are written at the block's azimuth.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink
from rt_lidar.sinks.pcap import (
    DEFAULT_EPOCH_NS,
    PacketBatch,
    PacketPcapSink,
    point_columns,
    rotation_centideg,
    slots_per_scan,
)
from rt_lidar.sinks.udp import PACER_OPTIONS, UdpPacketSink

__all__ = ["PAYLOAD_BYTES", "HesaiXT32Packetizer", "hesai_pcap_sink", "hesai_udp_sink"]

CHANNELS, BLOCKS, DISTANCE_M = 32, 8, 0.004
RETURN_MODE_BYTE = {"strongest": 0x37, "last": 0x38, "dual": 0x39}
_BODY = 12
_TAIL = _BODY + BLOCKS * (2 + 4 * CHANNELS)  # 1052
PAYLOAD_BYTES = _TAIL + 24 + 4  # tail + UDP sequence number: 1080
_SENSOR_IP, _DEST_IP = "192.168.1.201", "255.255.255.255"


class HesaiXT32Packetizer:
    """Scans -> PandarXT-32 data packets, in send order (one firing of the 32 channels a block)."""

    def __init__(
        self, preset: SensorPreset, mode: str | None = None, epoch_ns: int = DEFAULT_EPOCH_NS
    ) -> None:
        if preset.packet_format != "hesai-xt32" or preset.n_rings != CHANNELS:
            raise ConfigError(
                f"preset {preset.name}: packet format '{preset.packet_format}' with {preset.n_rings} beams: "
                "the Hesai packet writer writes the PandarXT-32's (packet_format 'hesai-xt32', 32 beams)"
            )
        self.preset = preset
        self.mode = mode or preset.returns.default
        if self.mode not in RETURN_MODE_BYTE:
            raise ConfigError(f"hesai return mode '{self.mode}': expected strongest, last or dual")
        self.epoch_ns = int(epoch_ns)
        self.ports = {"data": 2368}
        self.period_ns = scan_period_ns(preset)
        self.slots = slots_per_scan(preset)
        self.n_returns = 2 if self.mode == "dual" else 1
        self.cols_per_packet = BLOCKS // self.n_returns
        self.max_offset_ns = int(np.round(preset.firing_offsets_us.max() * 1000.0))
        s = preset.scan
        self._az0 = s.scan_start_azimuth_deg
        self._sign = -1.0 if s.rotation_direction == "cw" else 1.0
        self._next_packet: int | None = None
        self._carry: tuple[np.ndarray, ...] = (np.empty(0, np.int64),) * 2 + (np.empty(0, np.float32),) * 2

    def slot_time_ns(self, k: np.ndarray | int) -> np.ndarray:
        """Sim time of firing slot ``k``."""
        return np.asarray(k, np.int64) * self.period_ns // self.slots

    def _azimuth(self, t_ns: np.ndarray) -> np.ndarray:
        return rotation_centideg(t_ns, self.period_ns, self._az0, self._sign)

    def packetize(self, scan: Scan) -> list[PacketBatch]:
        """The packets whose every firing lies before the end of ``scan``."""
        cpp = self.cols_per_packet
        pts = scan.points
        col = point_columns(self.preset, scan)
        ring = pts["ring"].astype(np.int64)
        rng = np.sqrt(pts["x"] ** 2 + pts["y"] ** 2 + pts["z"] ** 2).astype(np.float32)
        inten = pts["intensity"].astype(np.float32)
        if self._next_packet is None:
            self._next_packet = int(-((-scan.start_ns * self.slots) // self.period_ns)) // cpp
        c0, r0, d0, i0 = self._carry
        col, ring = np.concatenate([c0, col]), np.concatenate([r0, ring])
        rng, inten = np.concatenate([d0, rng]), np.concatenate([i0, inten])
        end_ns = scan.start_ns + self.period_ns
        done_cols = int(-((-(end_ns - self.max_offset_ns) * self.slots) // self.period_ns))
        p0, p1 = self._next_packet, max(done_cols // cpp, self._next_packet)
        keep = col >= p1 * cpp
        self._carry = (col[keep], ring[keep], rng[keep], inten[keep])
        sel = (col >= p0 * cpp) & ~keep
        self._next_packet = p1
        return [self._batch(p0, p1, col[sel], ring[sel], rng[sel], inten[sel])]

    def finish(self) -> list[PacketBatch]:
        """The last partial packet."""
        if self._next_packet is None or self._carry[0].size == 0:
            return []
        c, r, d, i = self._carry
        p0, p1 = self._next_packet, int(c.max()) // self.cols_per_packet + 1
        self._carry = tuple(a[:0] for a in self._carry)
        self._next_packet = p1
        return [self._batch(p0, p1, c, r, d, i)]

    def _picks(self, key: np.ndarray, units: np.ndarray, level: np.ndarray) -> list[np.ndarray]:
        """Per firing: the strongest / the last return, or (last, strongest) in dual mode."""
        order_strong = np.lexsort((-units, level, key))  # by key, then power, then nearer first
        order_last = np.lexsort((level, units, key))
        ends_s = np.flatnonzero(np.r_[key[order_strong][1:] != key[order_strong][:-1], True])
        ends_l = np.flatnonzero(np.r_[key[order_last][1:] != key[order_last][:-1], True])
        strongest, last = order_strong[ends_s], order_last[ends_l]
        if self.mode == "strongest":
            return [strongest]
        if self.mode == "last":
            return [last]
        return [last, strongest]

    def _batch(
        self, p0: int, p1: int, col: np.ndarray, ring: np.ndarray, rng: np.ndarray, inten: np.ndarray
    ) -> PacketBatch:
        n, cpp = p1 - p0, self.cols_per_packet
        out = np.zeros((n, PAYLOAD_BYTES), np.uint8)
        if n == 0:
            return PacketBatch("data", out, np.empty(0, np.int64))
        units = np.round(rng / DISTANCE_M)
        ok = (units >= 1) & (units <= 65535)
        col, ring, units, inten = col[ok], ring[ok], units[ok].astype(np.int64), inten[ok]
        level = np.clip(np.round(inten), 0, 255).astype(np.int64)
        local = col - p0 * cpp
        packet, j = np.divmod(local, cpp)
        dist = np.zeros((n, BLOCKS, CHANNELS), np.uint16)
        refl = np.zeros((n, BLOCKS, CHANNELS), np.uint8)
        for place, idx in enumerate(self._picks(local * CHANNELS + ring, units, level)):
            blk = j[idx] * self.n_returns + place
            dist[packet[idx], blk, ring[idx]] = units[idx]
            refl[packet[idx], blk, ring[idx]] = level[idx]
        first_col = (p0 + np.arange(n, dtype=np.int64)) * cpp
        block_col = first_col[:, None] + np.arange(BLOCKS)[None, :] // self.n_returns
        az = self._azimuth(self.slot_time_ns(block_col))
        body = np.zeros((n, BLOCKS, 2 + 4 * CHANNELS), np.uint8)
        body[:, :, 0:2] = az[..., None].view(np.uint8).reshape(n, BLOCKS, 2)
        chan = np.zeros((n, BLOCKS, CHANNELS, 4), np.uint8)
        chan[..., 0:2] = dist[..., None].view(np.uint8).reshape(n, BLOCKS, CHANNELS, 2)
        chan[..., 2] = refl
        body[:, :, 2:] = chan.reshape(n, BLOCKS, 4 * CHANNELS)
        out[:, :6] = (0xEE, 0xFF, 6, 1, 0, 0)
        out[:, 6:12] = (CHANNELS, BLOCKS, 0, int(DISTANCE_M * 1000), self.n_returns, 0)
        out[:, _BODY:_TAIL] = body.reshape(n, -1)
        wall = self.slot_time_ns(first_col) + self.epoch_ns
        rpm = round(60e9 / self.period_ns)
        for k in range(n):
            t = dt.datetime.fromtimestamp(int(wall[k]) // 1_000_000_000, dt.UTC)
            us = int(wall[k]) // 1000 % 1_000_000
            tail = bytearray(24)
            tail[10] = RETURN_MODE_BYTE[self.mode]
            tail[11:13] = rpm.to_bytes(2, "little")
            tail[13:19] = bytes((t.year - 1900, t.month, t.day, t.hour, t.minute, t.second))
            tail[19:23] = us.to_bytes(4, "little")
            tail[23] = 0x42  # factory information
            out[k, _TAIL : _TAIL + 24] = np.frombuffer(bytes(tail), np.uint8)
            out[k, _TAIL + 24 :] = np.frombuffer(
                int(p0 + k).to_bytes(4, "little", signed=False)[:4], np.uint8
            )
        return PacketBatch("data", out, self.slot_time_ns(first_col + cpp))


def _factory(options: dict[str, str], kind: str) -> tuple[Callable[[SinkContext], HesaiXT32Packetizer], dict]:
    opts = SinkOptions(kind, options, options)
    mode = opts.choice("mode", "", tuple(RETURN_MODE_BYTE)) or None
    epoch = opts.integer("epoch_ns", DEFAULT_EPOCH_NS, 0, 2**63 - 1)

    def make(context: SinkContext) -> HesaiXT32Packetizer:
        return HesaiXT32Packetizer(context.preset, mode=mode, epoch_ns=epoch)

    return make, {k: v for k, v in options.items() if k not in ("mode", "epoch_ns")}


@register_sink("hesai-pcap")
def hesai_pcap_sink(target: str, options: dict[str, str]) -> PacketPcapSink:
    """``--sink hesai-pcap:out.pcap[,mode=dual][,epoch_ns=N]`` (a PandarXT-32 preset)."""
    SinkOptions("hesai-pcap", options, {"mode", "epoch_ns"})
    make, _ = _factory(options, "hesai-pcap")
    return PacketPcapSink(target, make, _SENSOR_IP, _DEST_IP)


@register_sink("hesai-udp")
def hesai_udp_sink(target: str, options: dict[str, str]) -> UdpPacketSink:
    """``--sink hesai-udp:HOST:PORT[,mode=dual][,latency_ms=50][,clock=wall|sim]``."""
    SinkOptions("hesai-udp", options, {"mode", "epoch_ns"} | PACER_OPTIONS)
    make, rest = _factory(options, "hesai-udp")
    return UdpPacketSink(target or "127.0.0.1:2368", make, rest, {}, kind="hesai-udp")
