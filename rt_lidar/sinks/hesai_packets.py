"""What every Hesai spinning-lidar packet writer shares (and the RoboSense MSOP writer borrows): scans ->
per packet the block azimuths and the channels' distances and reflectivities, firings in send order.

A block holds one firing of all channels at the block's azimuth (uint16, 0.01 deg, clockwise), as
Hesai's decoders place a point: the block's azimuth plus its channel's calibrated offset. In dual
mode the blocks come in pairs (last return, then strongest) of one firing. A layout (a subclass)
says how many channels and blocks a packet has, its distance unit, and lays the bytes out
(:meth:`HesaiPacketizer.pack`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext, SinkOptions
from rt_lidar.sinks.pcap import (
    DEFAULT_EPOCH_NS,
    PacketBatch,
    point_columns,
    rotation_centideg,
    slots_per_scan,
)

__all__ = ["RETURN_MODE_BYTE", "HesaiPacketizer", "packetizer_factory", "utc_fields"]

RETURN_MODE_BYTE = {"strongest": 0x37, "last": 0x38, "dual": 0x39}


def utc_fields(wall_ns: int, year_base: int = 1900) -> tuple[bytes, int]:
    """The tail's date and time (year - ``year_base``, month, day, hour, minute, second) and the
    microseconds within the second, of a wall time in ns."""
    t = dt.datetime.fromtimestamp(int(wall_ns) // 1_000_000_000, dt.UTC)
    us = int(wall_ns) // 1000 % 1_000_000
    return bytes((t.year - year_base, t.month, t.day, t.hour, t.minute, t.second)), us


class HesaiPacketizer:
    """Scans -> a Hesai layout's data packets, in send order (one firing of every channel a block)."""

    PRODUCT = ""
    """The products whose packets the layout is (for messages)."""
    PACKET_FORMATS: tuple[str, ...] = ()
    """The presets' ``packet_format`` values this layout writes."""
    CHANNELS = 0
    BLOCKS = 0
    DISTANCE_M = 0.004
    PAYLOAD_BYTES = 0

    def __init__(
        self, preset: SensorPreset, mode: str | None = None, epoch_ns: int = DEFAULT_EPOCH_NS
    ) -> None:
        if preset.packet_format not in self.PACKET_FORMATS or preset.n_rings != self.CHANNELS:
            raise ConfigError(
                f"preset {preset.name}: packet format '{preset.packet_format}' with {preset.n_rings} beams: "
                f"this Hesai packet writer writes the {self.PRODUCT}'s (packet_format "
                f"{' / '.join(repr(f) for f in self.PACKET_FORMATS)}, {self.CHANNELS} beams)"
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
        self.cols_per_packet = self.BLOCKS // self.n_returns
        states = preset.firing_state_offsets_us
        latest = preset.firing_offsets_us.max() if states is None else max(states.max(), 0.0)
        self.max_offset_ns = int(np.round(latest * 1000.0))
        s = preset.scan
        self._az0 = s.scan_start_azimuth_deg
        self._sign = -1.0 if s.rotation_direction == "cw" else 1.0
        self._next_packet: int | None = None
        self._carry: tuple[np.ndarray, ...] = (np.empty(0, np.int64),) * 2 + (np.empty(0, np.float32),) * 2

    @property
    def rpm(self) -> int:
        """The motor speed the tail reports."""
        return round(60e9 / self.period_ns)

    def slot_time_ns(self, k: np.ndarray | int) -> np.ndarray:
        """Sim time of firing slot ``k``."""
        return np.asarray(k, np.int64) * self.period_ns // self.slots

    def packetize(self, scan: Scan) -> list[PacketBatch]:
        """The packets whose every firing lies before the end of ``scan``."""
        cpp = self.cols_per_packet
        pts = scan.points
        col = point_columns(self.preset, scan)
        ring = pts["ring"].astype(np.int64)
        rng = self.ranges(pts)
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

    def ranges(self, pts: np.ndarray) -> np.ndarray:
        """(N,) float32 distance each point's packet carries (here its norm: Hesai presets' beams start
        on the axis)."""
        return np.sqrt(pts["x"] ** 2 + pts["y"] ** 2 + pts["z"] ** 2).astype(np.float32)

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
        n, cpp, nb, nc = p1 - p0, self.cols_per_packet, self.BLOCKS, self.CHANNELS
        if n == 0:
            return PacketBatch("data", np.zeros((0, self.PAYLOAD_BYTES), np.uint8), np.empty(0, np.int64))
        units = np.round(rng / self.DISTANCE_M)
        ok = (units >= 1) & (units <= 65535)
        col, ring, units, inten = col[ok], ring[ok], units[ok].astype(np.int64), inten[ok]
        level = np.clip(np.round(inten), 0, 255).astype(np.int64)
        local = col - p0 * cpp
        packet, j = np.divmod(local, cpp)
        dist = np.zeros((n, nb, nc), np.uint16)
        refl = np.zeros((n, nb, nc), np.uint8)
        for place, idx in enumerate(self._picks(local * nc + ring, units, level)):
            blk = j[idx] * self.n_returns + place
            dist[packet[idx], blk, ring[idx]] = units[idx]
            refl[packet[idx], blk, ring[idx]] = level[idx]
        first_col = (p0 + np.arange(n, dtype=np.int64)) * cpp
        block_col = first_col[:, None] + np.arange(nb)[None, :] // self.n_returns
        az = self.block_azimuths(block_col)
        out = self.pack(az, dist, refl, self.slot_time_ns(block_col), p0)
        return PacketBatch("data", out, self.slot_time_ns(first_col + cpp))

    def block_azimuths(self, block_col: np.ndarray) -> np.ndarray:
        """The azimuth each block carries, of its firing slot ``block_col`` (here the head's, uint16
        hundredths of a degree clockwise)."""
        return rotation_centideg(self.slot_time_ns(block_col), self.period_ns, self._az0, self._sign)

    def pack(
        self, az: np.ndarray, dist: np.ndarray, refl: np.ndarray, block_ns: np.ndarray, seq0: int
    ) -> np.ndarray:
        """(n, PAYLOAD_BYTES) packets of block azimuths ``az`` (n, B), distances in units and
        reflectivities (n, B, C), the blocks' sim firing times ``block_ns`` (n, B); ``seq0`` is the
        first packet's sequence number."""
        raise NotImplementedError

    def block_columns(self, block_ns: np.ndarray) -> np.ndarray:
        """The firing slots of blocks fired at sim times ``block_ns`` (the inverse of
        :meth:`slot_time_ns`)."""
        return -((-np.asarray(block_ns, np.int64) * self.slots) // self.period_ns)

    def wall_ns(self, sim_ns: np.ndarray | int) -> np.ndarray:
        """Wall time (ns) of sim times, on this packetizer's clock."""
        return np.asarray(sim_ns, np.int64) + self.epoch_ns

    @classmethod
    def body_blocks(
        cls, az: np.ndarray, dist: np.ndarray, refl: np.ndarray, unit_bytes: int, flag: bytes = b""
    ) -> np.ndarray:
        """(n, B * block) bytes of the blocks: ``flag``, the azimuth, then per channel the distance and
        the reflectivity in ``unit_bytes`` (3, or 4 with a zero confidence / reserved byte)."""
        n, nb, nc = dist.shape
        head = len(flag) + 2
        body = np.zeros((n, nb, head + unit_bytes * nc), np.uint8)
        if flag:
            body[:, :, : len(flag)] = np.frombuffer(flag, np.uint8)
        body[:, :, head - 2 : head] = cls.le_bytes(az, "<u2")
        chan = np.zeros((n, nb, nc, unit_bytes), np.uint8)
        chan[..., 0:2] = cls.le_bytes(dist, "<u2")
        chan[..., 2] = refl
        body[:, :, head:] = chan.reshape(n, nb, unit_bytes * nc)
        return body.reshape(n, -1)

    @staticmethod
    def le_bytes(values: np.ndarray, dtype: str) -> np.ndarray:
        """Little-endian bytes of ``values`` as ``dtype`` (``"<u2"``, ``"<u4"``), the last axis widened."""
        a = np.ascontiguousarray(np.asarray(values).astype(dtype))
        return a.view(np.uint8).reshape(*a.shape, a.dtype.itemsize)


P = TypeVar("P", bound=HesaiPacketizer)


def packetizer_factory(
    options: dict[str, str],
    kind: str,
    modes: tuple[str, ...],
    build: Callable[[SensorPreset, str | None, int], P],
) -> tuple[Callable[[SinkContext], P], dict[str, str]]:
    """A packet sink's ``(context -> packetizer, the options left for the sink)``: the ``mode`` (one of
    ``modes``; empty: the preset's) and ``epoch_ns`` options of sink ``kind`` read, ``build(preset,
    mode, epoch_ns)`` called per context."""
    opts = SinkOptions(kind, options, options)
    mode = opts.choice("mode", "", modes) or None
    epoch = opts.integer("epoch_ns", DEFAULT_EPOCH_NS, 0, 2**63 - 1)

    def make(context: SinkContext) -> P:
        return build(context.preset, mode, epoch)

    return make, {k: v for k, v in options.items() if k not in ("mode", "epoch_ns")}
