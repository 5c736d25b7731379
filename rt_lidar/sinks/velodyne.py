"""Velodyne data and position packets (VLP-16, VLP-32C, HDL-32E, HDL-64E), built vectorised from scans.

Data packet (1206 bytes): 12 blocks of a bank flag (bytes ``FF EE``), azimuth (uint16, 0.01 deg,
clockwise from the sensor's forward axis: ``rot = -atan2(y, x)``), 32 x (distance uint16, intensity
uint8); then the timestamp (uint32, microseconds past the hour of the packet's first firing), the
return-mode byte (0x37 strongest, 0x38 last, 0x39 dual) and the product id. A VLP-16 block holds two
firing sequences of 16 lasers, a 32-laser block one. In dual mode blocks come in pairs of the same
firings: the even block holds the last return, the odd one the strongest (the second strongest where
the strongest is also the last); with a single return both repeat it. No return: distance 0.

HDL-64E (S2 / S3): one firing of the 64 lasers fills two blocks of the same azimuth, the upper block
(``FF EE``, lasers 0-31) and the lower (``FF DD``, lasers 32-63): six firings a packet. Dual return
(the S3's layout): four blocks a firing, upper and lower strongest, then upper and lower last (the
pairing rules above); three firings a packet. No return-mode byte or product id: the last two bytes
are the status cycle of :mod:`rt_lidar.sinks.velodyne_hdl64`, which also carries the calibration.

A distance is written as the sensor reports it: the range less the laser's ``dist_correction`` (the
decoder adds it back), in the model's distance resolution.

Slots (columns) are counted over the whole run and packets hold a fixed number of them, so packets
run on across scan boundaries as a real sensor's do; the packetizer holds back the partial packet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.beam_origins import (
    firing_geometry,
    ranges_along_beams,
    ranges_from_decoded,
    two_point_corrections,
)
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
from rt_lidar.sinks.velodyne_hdl64 import calibration_stream, status_bytes
from rt_lidar.sinks.velodyne_position import PositionTrack, gprmc, position_packet

__all__ = [
    "DATA_PACKET",
    "MODELS",
    "RETURN_MODE_BYTE",
    "VelodyneModel",
    "VelodynePacketizer",
    "calibration_yaml",
    "position_packet",
    "velodyne_pcap_sink",
    "velodyne_udp_sink",
]

_HOUR_US = 3_600_000_000
_SENSOR_IP, _DEST_IP = "192.168.1.201", "255.255.255.255"
_BANK_FLAGS = (0xEEFF, 0xDDFF, 0xCCFF, 0xBBFF)  # uint16 block flags of lasers 0-31, 32-63, 64-95, 96-127


@dataclass(frozen=True)
class VelodyneModel:
    """Packet layout of one Velodyne model."""

    name: str
    product_id: int | None
    """Factory byte after the return mode; ``None``: the HDL-64E's status bytes instead."""
    lasers: int
    sequences_per_block: int
    distance_m: float
    banks: int = 1
    """Blocks one firing of all lasers fills (HDL-64E: upper and lower bank)."""
    last_first: bool = True
    """Dual return: the last-return block(s) of a firing come before the strongest ones."""
    position_layout: str | None = "vlp16"
    """Position packet layout (:data:`rt_lidar.sinks.velodyne_position.LAYOUTS`); None: the model
    sends none (the HDL-64E)."""
    pairs_dual: bool = False
    """Dual return: each bank's last and strongest blocks side by side, one firing a packet (VLS-128)."""
    stamp_lead_us: float = 0.0
    """The packet's timestamp lies this long after its first firing (VLS-128: 7 us, the top of the
    hour aligned with the fourth firing group, as velodyne_decoder and VeloView time it)."""


MODELS: dict[str, VelodyneModel] = {
    "velodyne-vlp16": VelodyneModel("VLP-16", 0x22, 16, 2, 0.002),
    "velodyne-vlp32c": VelodyneModel("VLP-32C", 0x28, 32, 1, 0.004, position_layout="vlp32c"),
    "velodyne-hdl32": VelodyneModel("HDL-32E", 0x21, 32, 1, 0.002, position_layout="hdl32"),
    "velodyne-hdl64": VelodyneModel(
        "HDL-64E", None, 64, 1, 0.002, banks=2, last_first=False, position_layout=None
    ),
    "velodyne-vls128": VelodyneModel(
        "VLS-128", 0xA1, 128, 1, 0.004, banks=4, position_layout=None, pairs_dual=True, stamp_lead_us=7.0
    ),
}
RETURN_MODE_BYTE = {"strongest": 0x37, "last": 0x38, "dual": 0x39}

_CHANNEL = np.dtype([("distance", "<u2"), ("intensity", "u1")])
_BLOCK = np.dtype([("flag", "<u2"), ("azimuth", "<u2"), ("channels", _CHANNEL, (32,))])
DATA_PACKET = np.dtype([("blocks", _BLOCK, (12,)), ("stamp", "<u4"), ("mode", "u1"), ("product", "u1")])
"""The 1206-byte data packet as a packed structured dtype."""
assert DATA_PACKET.itemsize == 1206


DEFAULT_ORIGIN = (48.1173, 11.5167)
"""Latitude and longitude (deg) of the sim world's origin in the position packets' fixes."""
POSITION_RATIO = 14
"""Puck manuals: "the ratio of data packets to position packets is about 14 to 1"."""


class VelodynePacketizer:
    """Scans -> Velodyne data packets (+ position packets at ``position_hz``), in send order.

    ``position_hz=None``: the model's rate (a puck: one every 14 single-return data packets, ~54 Hz
    for a VLP-16 at 10 Hz; the HDL-32E: 1 Hz; the HDL-64E: none, and asking for them is a
    ConfigError); 0: none. ``origin``: latitude and longitude of the world's
    origin for the fixes.
    """

    def __init__(
        self,
        preset: SensorPreset,
        mode: str | None = None,
        epoch_ns: int = DEFAULT_EPOCH_NS,
        position_hz: float | None = None,
        origin: tuple[float, float] = DEFAULT_ORIGIN,
    ) -> None:
        if preset.packet_format not in MODELS:
            raise ConfigError(
                f"preset {preset.name}: packet format '{preset.packet_format}' has no Velodyne packet "
                f"writer; supported: {', '.join(sorted(MODELS))}"
            )
        self.preset = preset
        self.model = MODELS[preset.packet_format]
        self.mode = mode or preset.returns.default
        if self.mode not in RETURN_MODE_BYTE:
            raise ConfigError(f"velodyne return mode '{self.mode}': expected strongest, last or dual")
        self.epoch_ns = int(epoch_ns)
        self.ports = {"data": 2368, "position": 8308}
        self.period_ns = scan_period_ns(preset)
        self.slots = slots_per_scan(preset)
        self.n_returns = 2 if self.mode == "dual" else 1
        self.blocks_per_group = self.model.banks * self.n_returns
        self.cols_per_packet = 12 * self.model.sequences_per_block // self.blocks_per_group
        layout = self.model.position_layout
        if layout is None and position_hz and self.model.product_id is not None:
            raise ConfigError(
                f"{self.model.name}: this writer sends no position packets yet; drop position_hz"
            )
        if layout is None and position_hz:
            raise ConfigError(
                f"{self.model.name}: sends no position packets (its GPS time and status ride in every "
                "data packet's last 6 bytes, HDL-64E S3 manual); drop position_hz"
            )
        if position_hz is None:
            single_cpp = 12 * self.model.sequences_per_block // self.model.banks
            per_s = self.slots * 1e9 / self.period_ns / single_cpp
            position_hz = 0.0 if layout is None else per_s / POSITION_RATIO if layout != "hdl32" else 1.0
        self.position_period_ns = round(1e9 / position_hz) if position_hz > 0 else 0
        self.track = PositionTrack(*origin)
        self._sentence: tuple[int, bytes] = (-1, b"")
        laser = np.array([b.laser_id if b.laser_id is not None else b.ring for b in preset.beams], np.int64)
        if laser.max() >= self.model.lasers:
            raise ConfigError(f"preset {preset.name}: laser ids exceed {self.model.lasers}")
        self.laser_of_ring = laser
        self.dist_correction_of_ring = _distance_corrections(preset)
        self._status = (
            None
            if self.model.product_id is not None
            else calibration_stream(preset, self.mode, self.epoch_ns, _SENSOR_IP, _DEST_IP)
        )
        self.max_offset_ns = int(np.round(preset.firing_offsets_us.max() * 1000.0))
        s = preset.scan
        self._az0 = s.scan_start_azimuth_deg
        self._sign = -1.0 if s.rotation_direction == "cw" else 1.0
        self._next_packet: int | None = None
        self._next_position_ns = 0
        self._carry: tuple[np.ndarray, ...] = tuple(
            np.empty(0, d) for d in (np.int64,) * 2 + (np.float32,) * 2
        )

    # -- timing -----------------------------------------------------------------------------------
    def slot_time_ns(self, k: np.ndarray | int) -> np.ndarray:
        """Sim time of firing slot ``k`` (its first laser)."""
        return np.asarray(k, np.int64) * self.period_ns // self.slots

    def _rot_centideg(self, t_ns: np.ndarray) -> np.ndarray:
        return rotation_centideg(t_ns, self.period_ns, self._az0, self._sign)

    # -- packets ----------------------------------------------------------------------------------
    def packetize(self, scan: Scan) -> list[PacketBatch]:
        """The packets whose every firing lies before the end of ``scan``."""
        cpp = self.cols_per_packet
        pts = scan.points
        col = point_columns(self.preset, scan)
        ring = pts["ring"].astype(np.intp)
        laser = self.laser_of_ring[ring]
        if self.preset.beam_origins_m is None:
            rng = np.sqrt(pts["x"] ** 2 + pts["y"] ** 2 + pts["z"] ** 2) - self.dist_correction_of_ring[ring]
        elif two_point_corrections(self.preset) is None:  # offsets: the range along the beam from its origin
            rng = ranges_along_beams(self.preset, pts).astype(np.float32) - self.dist_correction_of_ring[ring]
        else:  # and the HDL-64E's two-point corrections: the distance the decoder turned into the point
            d, o = firing_geometry(self.preset, np.int64(scan.start_ns) + pts["t"].astype(np.int64), ring)
            s = ranges_from_decoded(self.preset, pts, o, d)
            rng = s.astype(np.float32) - self.dist_correction_of_ring[ring]
        inten = pts["intensity"].astype(np.float32)
        if self._next_packet is None:
            first = int(-((-scan.start_ns * self.slots) // self.period_ns))
            self._next_packet = first // cpp
            self._next_position_ns = (
                -(-scan.start_ns // max(self.position_period_ns, 1)) * self.position_period_ns
            )
        c0, l0, r0, i0 = self._carry
        col, laser = np.concatenate([c0, col]), np.concatenate([l0, laser])
        rng, inten = np.concatenate([r0, rng]), np.concatenate([i0, inten])
        end_ns = scan.start_ns + self.period_ns
        done_cols = int(-((-(end_ns - self.max_offset_ns) * self.slots) // self.period_ns))
        p0, p1 = self._next_packet, max(done_cols // cpp, self._next_packet)
        keep = col >= p1 * cpp
        self._carry = (col[keep], laser[keep], rng[keep], inten[keep])
        sel = (col >= p0 * cpp) & ~keep
        out = [self._data_batch(p0, p1, col[sel], laser[sel], rng[sel], inten[sel])]
        self._next_packet = p1
        self.track.add(scan.start_ns, scan.sensor_position)
        pos = self._position_batch(int(self.slot_time_ns(p1 * cpp)))
        if pos is not None:
            out.append(pos)
        return out

    def finish(self) -> list[PacketBatch]:
        """The last partial packet (its missing firings empty)."""
        if self._next_packet is None or self._carry[0].size == 0:
            return []
        c, las, r, i = self._carry
        p0 = self._next_packet
        p1 = int(c.max()) // self.cols_per_packet + 1
        self._carry = tuple(a[:0] for a in self._carry)
        self._next_packet = p1
        return [self._data_batch(p0, p1, c, las, r, i)]

    def _pick(self, key: np.ndarray, units: np.ndarray, level: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per firing (``key``): indices of the one return (single modes), or of the last and the
        strongest return (dual; the second strongest where the strongest is also the last)."""
        n_out = 2 if self.mode == "dual" else 1
        multi = np.bincount(key)[key] > 1
        lone = np.flatnonzero(~multi)
        if lone.size == key.size:  # one return per firing: nothing to choose (the common case)
            return (lone,) * n_out
        idx = np.flatnonzero(multi)
        k, u, lv = key[idx] << 24, units[idx].astype(np.int64), level[idx].astype(np.int64)
        by_power = idx[np.argsort(k | lv << 16 | u)]
        k_sorted = key[by_power]
        ends = np.flatnonzero(np.r_[k_sorted[1:] != k_sorted[:-1], True])
        strongest = by_power[ends]
        if self.mode == "strongest":
            return (np.concatenate([lone, strongest]),)
        last = idx[np.argsort(k | u << 8 | lv)][ends]
        if self.mode == "last":
            return (np.concatenate([lone, last]),)
        second = np.where(strongest == last, by_power[ends - 1], strongest)  # groups have >= 2 members
        return np.concatenate([lone, last]), np.concatenate([lone, second])

    def _data_batch(
        self, p0: int, p1: int, col: np.ndarray, laser: np.ndarray, rng: np.ndarray, inten: np.ndarray
    ) -> PacketBatch:
        n, cpp, m = p1 - p0, self.cols_per_packet, self.model
        pk = np.zeros(n, DATA_PACKET)
        if n == 0:
            return PacketBatch("data", pk.view(np.uint8).reshape(0, 1206), np.empty(0, np.int64))
        units = np.round(rng / m.distance_m)
        valid = (units >= 1) & (units <= 65535)
        col, laser, units, inten = col[valid], laser[valid], units[valid].astype(np.uint16), inten[valid]
        local = col - p0 * cpp
        packet, j = np.divmod(local, cpp)
        key = local * m.lasers + laser
        spb, banks, group = m.sequences_per_block, m.banks, self.blocks_per_group
        bank, chan = np.divmod(laser, 32)
        slot = (j % spb) * (32 // spb) + chan
        dist = np.zeros((n, 12, 32), np.uint16)
        level = np.zeros((n, 12, 32), np.uint8)
        ibyte = np.clip(np.round(inten), 0, 255).astype(np.uint8)
        picks = self._pick(key, units, ibyte)  # (one) or (last, strongest)
        for b, idx in enumerate(picks):
            place = b if m.last_first else len(picks) - 1 - b
            if m.pairs_dual:
                blk = j[idx] // spb * group + bank[idx] * len(picks) + place
            else:
                blk = j[idx] // spb * group + place * banks + bank[idx]
            dist[packet[idx], blk, slot[idx]] = units[idx]
            level[packet[idx], blk, slot[idx]] = ibyte[idx]
        blocks = pk["blocks"]
        per_bank = self.n_returns if m.pairs_dual else 1
        blocks["flag"] = np.array(_BANK_FLAGS, np.uint16)[np.arange(12) // per_bank % banks]
        blocks["channels"]["distance"] = dist
        blocks["channels"]["intensity"] = level
        index = p0 + np.arange(n, dtype=np.int64)
        first_col = index[:, None] * cpp
        block_col = first_col + (np.arange(12) // group * spb)[None, :]
        blocks["azimuth"] = self._rot_centideg(self.slot_time_ns(block_col))
        wall = self.slot_time_ns(first_col[:, 0]) + self.epoch_ns
        pk["stamp"] = ((wall + round(m.stamp_lead_us * 1000)) // 1000 % _HOUR_US).astype(np.uint32)
        if self._status is None:
            pk["mode"] = RETURN_MODE_BYTE[self.mode]
            pk["product"] = m.product_id
        else:
            tail = status_bytes(index, wall, self._status)
            pk["mode"], pk["product"] = tail[:, 0], tail[:, 1]
        send = self.slot_time_ns(first_col[:, 0] + cpp)
        return PacketBatch("data", pk.view(np.uint8).reshape(n, 1206), send)

    def _position_batch(self, until_ns: int) -> PacketBatch | None:
        if self.position_period_ns <= 0 or self._next_position_ns >= until_ns:
            return None
        times = np.arange(self._next_position_ns, until_ns, self.position_period_ns, dtype=np.int64)
        self._next_position_ns = int(times[-1]) + self.position_period_ns
        rows = []
        for t in times.tolist():
            wall = t + self.epoch_ns
            second = wall - wall % 1_000_000_000
            if self._sentence[0] != second:  # the GPS's sentence changes once a second
                fix = self.track.fix(second - self.epoch_ns)
                self._sentence = (second, gprmc(second, fix))
            layout = self.model.position_layout
            assert layout is not None
            pk = position_packet(wall, self._sentence[1], layout, t // 1_000_000_000)
            rows.append(np.frombuffer(pk, np.uint8))
        return PacketBatch("position", np.stack(rows), times)


def _distance_corrections(preset: SensorPreset) -> np.ndarray:
    """(n_rings,) float32 ``dist_correction`` per ring; refuses corrections a range cannot invert."""
    out = np.zeros(preset.n_rings, np.float32)
    for b in preset.beams:
        if (b.dist_correction_x_m or b.dist_correction_y_m) and preset.packet_format != "velodyne-hdl64":
            raise ConfigError(
                f"preset {preset.name}: ring {b.ring} has two-point distance corrections, which only "
                "an HDL-64E's packets carry (in its status bytes)"
            )
        out[b.ring] = b.dist_correction_m or 0.0
    return out


def calibration_yaml(preset: SensorPreset) -> str:
    """The preset's beam table as a ROS ``velodyne_pointcloud`` calibration (what velodyne-decoder's
    ``Calibration.from_string`` and the ROS driver read): angles in radians, ``rot_correction`` equal to
    the math-convention azimuth offset, corrections in metres."""
    model = MODELS[preset.packet_format]
    lines = [f"distance_resolution: {model.distance_m}", "lasers:"]
    extra = (
        "dist_correction",
        "dist_correction_x",
        "dist_correction_y",
        "vert_offset_correction",
        "horiz_offset_correction",
    )
    for b in sorted(preset.beams, key=lambda b: b.laser_id if b.laser_id is not None else b.ring):
        lid = b.laser_id if b.laser_id is not None else b.ring
        lines += [
            f"  - laser_id: {lid}",
            f"    rot_correction: {np.radians(b.azimuth_offset_deg):.9f}",
            f"    vert_correction: {np.radians(b.elevation_deg):.9f}",
        ]
        lines += [f"    {k}: {getattr(b, k + '_m') or 0.0}" for k in extra]
        lines += [
            f"    focal_distance: {b.focal_distance or 0.0}",
            f"    focal_slope: {b.focal_slope or 0.0}",
        ]
    lines.append(f"num_lasers: {len(preset.beams)}")
    return "\n".join(lines) + "\n"


def packetizer_factory(
    options: dict[str, str],
) -> tuple[Callable[[SinkContext], VelodynePacketizer], dict[str, str]]:
    """``mode=``, ``epoch_ns=``, ``position_hz=``, ``lat=``, ``lon=`` -> a factory
    ``SinkContext -> VelodynePacketizer``."""
    opts = SinkOptions("velodyne", options, options)
    mode = opts.choice("mode", "", tuple(RETURN_MODE_BYTE)) or None
    epoch = opts.integer("epoch_ns", DEFAULT_EPOCH_NS, 0, 2**63 - 1)
    pos_hz = opts.number("position_hz", 1.0, 0.0, 1000.0) if "position_hz" in options else None
    origin = (
        opts.number("lat", DEFAULT_ORIGIN[0], -89.999999, 89.999999),
        opts.number("lon", DEFAULT_ORIGIN[1], -180.0, 180.0),
    )

    def make(context: SinkContext) -> VelodynePacketizer:
        return VelodynePacketizer(
            context.preset, mode=mode, epoch_ns=epoch, position_hz=pos_hz, origin=origin
        )

    own = {"mode", "epoch_ns", "position_hz", "lat", "lon"}
    rest = {k: v for k, v in options.items() if k not in own}
    return make, rest


@register_sink("velodyne-pcap")
def velodyne_pcap_sink(target: str, options: dict[str, str]) -> PacketPcapSink:
    """``--sink velodyne-pcap:out.pcap[,mode=dual][,epoch_ns=N][,position_hz=54][,lat=48.1,lon=11.5]``."""
    SinkOptions("velodyne-pcap", options, {"mode", "epoch_ns", "position_hz", "lat", "lon"})
    make, _ = packetizer_factory(options)
    return PacketPcapSink(target, make, _SENSOR_IP, _DEST_IP)


@register_sink("velodyne-udp")
def velodyne_udp_sink(target: str, options: dict[str, str]) -> UdpPacketSink:
    """``--sink velodyne-udp:HOST:PORT[,position_port=8308][,mode=dual][,latency_ms=50][,clock=wall|sim]``."""
    opts = SinkOptions(
        "velodyne-udp",
        options,
        {"mode", "epoch_ns", "position_hz", "position_port", "lat", "lon"} | PACER_OPTIONS,
    )
    make, rest = packetizer_factory(options)
    ports = {"position": opts.integer("position_port", 0, 0, 65535)} if "position_port" in rest else {}
    rest.pop("position_port", None)
    return UdpPacketSink(target or "127.0.0.1:2368", make, rest, ports, kind="velodyne-udp")
