"""Ouster OS1 lidar packets (LEGACY profile) and the sensor metadata JSON that goes with them.

LEGACY packet: 16 columns, each: timestamp u64 ns, measurement id u16, frame id u16, encoder count
u32 (90112 a turn), per channel 12 bytes (range u32 mm in 20 bits, reflectivity u16, signal u16,
near-IR u16, unused u16), status u32 (0xFFFFFFFF valid). Measurement id m = our firing slot within
the rotation: Ouster's m = 0 looks backwards and the head turns clockwise, as our scan starts at 180
deg. The metadata is ours (from the preset) or a real sensor's (``metadata=real.json``): then its beam
angles and lidar mode are kept and completed to a file ouster-sdk 1.0 reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastcrc
import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink
from rt_lidar.sinks.pcap import DEFAULT_EPOCH_NS, PacketBatch, PacketPcapSink, point_columns, slots_per_scan
from rt_lidar.sinks.udp import PACER_OPTIONS, UdpPacketSink

__all__ = ["OusterPacketizer", "metadata_for", "ouster_pcap_sink", "ouster_udp_sink"]

COLUMNS_PER_PACKET = 16
ENCODER_TICKS = 90112


def metadata_for(
    preset: SensorPreset, given: dict[str, Any] | None = None, profile: str = "LEGACY"
) -> dict[str, Any]:
    """Sensor metadata (ouster-sdk 1.0 layout) for ``preset`` and the lidar packet ``profile``; beam
    angles and lidar mode of ``given`` (a real sensor's metadata, full or reduced) take precedence."""
    cols = slots_per_scan(preset)
    fps = round(preset.scan.rotation_hz or 10)
    mode = f"{cols}x{fps}"
    alt = [float(e) for e in preset.elevations_deg]
    az = [float(-a) for a in preset.azimuth_offsets_deg]
    if given:
        intr = given.get("beam_intrinsics", given)
        alt = list(intr.get("beam_altitude_angles", alt))
        az = list(intr.get("beam_azimuth_angles", az))
        mode = given.get("config_params", {}).get("lidar_mode", given.get("lidar_mode", mode))
    h = len(alt)
    if h != preset.n_rings:
        raise ConfigError(f"ouster metadata has {h} beams, preset {preset.name} {preset.n_rings}")
    m_cols, m_fps = (int(v) for v in str(mode).split("x"))
    if m_cols != cols:
        raise ConfigError(f"ouster metadata lidar_mode {mode}: the preset fires {cols} columns a turn")
    return {
        "beam_intrinsics": {
            "beam_altitude_angles": alt,
            "beam_azimuth_angles": az,
            "beam_to_lidar_transform": [1.0, 0, 0, 15.806, 0, 1.0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 1.0],
            "lidar_origin_to_beam_origin_mm": 15.806,
        },
        "config_params": {
            "lidar_mode": mode,
            "udp_port_lidar": 7502,
            "udp_port_imu": 7503,
            "udp_profile_lidar": profile,
            "udp_profile_imu": "LEGACY",
        },
        "lidar_data_format": {
            "column_window": [0, cols - 1],
            "columns_per_frame": cols,
            "columns_per_packet": COLUMNS_PER_PACKET,
            "pixels_per_column": h,
            "pixel_shift_by_row": [[18, 12, 6, 0][i % 4] for i in range(h)] if h == 64 else [0] * h,
            "udp_profile_lidar": profile,
            "udp_profile_imu": "LEGACY",
            "fps": m_fps,
        },
        "lidar_intrinsics": {
            "lidar_to_sensor_transform": [-1.0, 0, 0, 0, 0, -1.0, 0, 0, 0, 0, 1.0, 36.18, 0, 0, 0, 1.0]
        },
        "imu_intrinsics": {
            "imu_to_sensor_transform": [1.0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 1.0, 0, 0, 0, 0, 1.0]
        },
        "sensor_info": {
            "prod_line": f"OS-1-{h}",
            "prod_sn": str(PROD_SN),
            "prod_pn": "rt-lidar",
            "build_rev": "v2.0.0",
            "build_date": "",
            "image_rev": "",
            "initialization_id": INIT_ID,
            "status": "RUNNING",
        },
        "calibration_status": {},
        "user_data": "rt-lidar simulated sensor",
    }


PROFILES = {"LEGACY": "LEGACY", "RNG19": "RNG19_RFL8_SIG16_NIR16"}
"""``profile=`` option value -> Ouster's ``udp_profile_lidar`` name."""
INIT_ID = 1
PROD_SN = 992000000001


class OusterPacketizer:
    """Scans -> lidar packets, one whole rotation (``columns / 16`` packets) a scan.

    LEGACY (firmware < 2.0 layout, see the module docstring) or RNG19 (``RNG19_RFL8_SIG16_NIR16``, the
    single-return profile of firmware 2.x): a 32-byte packet header (packet type 1, frame id u16,
    initialization id u24, serial number u40), 16 columns of [timestamp u64 ns, measurement id u16,
    status u16 (bit 0 valid)] + 12 bytes a pixel [range u32 mm (19 bits), reflectivity u8, -, signal
    u16, near-IR u16, -], and a 32-byte footer ending in the packet's CRC-64/XZ.
    """

    def __init__(
        self, preset: SensorPreset, epoch_ns: int = DEFAULT_EPOCH_NS, profile: str = "LEGACY"
    ) -> None:
        if preset.packet_format != "ouster-legacy":
            raise ConfigError(f"preset {preset.name}: packet format {preset.packet_format} is not ouster")
        if profile not in PROFILES:
            raise ConfigError(f"ouster profile '{profile}': expected one of {', '.join(PROFILES)}")
        self.profile = profile
        self.preset, self.epoch_ns = preset, int(epoch_ns)
        self.ports = {"data": 7502, "imu": 7503}
        self.h = preset.n_rings
        self.cols = slots_per_scan(preset)
        self.period_ns = scan_period_ns(preset)
        if self.cols % COLUMNS_PER_PACKET:
            raise ConfigError(f"{self.cols} columns a turn is not a multiple of {COLUMNS_PER_PACKET}")
        ch = np.dtype([("range", "<u4"), ("reflectivity", "<u2"), ("signal", "<u2"), ("nir", "<u2"),
                       ("unused", "<u2")])  # fmt: skip
        self.column_dtype = np.dtype([("ts", "<u8"), ("mid", "<u2"), ("fid", "<u2"), ("enc", "<u4"),
                                      ("px", ch, (self.h,)), ("status", "<u4")])  # fmt: skip
        px19 = np.dtype([("range", "<u4"), ("reflectivity", "u1"), ("r0", "u1"), ("signal", "<u2"),
                         ("nir", "<u2"), ("r1", "<u2")])  # fmt: skip
        col19 = np.dtype([("ts", "<u8"), ("mid", "<u2"), ("status", "<u2"), ("px", px19, (self.h,))])
        header = [
            ("type", "<u2"),
            ("fid", "<u2"),
            ("init", "u1", (3,)),
            ("sn", "u1", (5,)),
            ("hrest", "u1", (20,)),
        ]
        self.rng19_packet_dtype = np.dtype(
            [*header, ("cols", col19, (COLUMNS_PER_PACKET,)), ("footer", "u1", (32,))]
        )

    def packetize(self, scan: Scan) -> list[PacketBatch]:
        """All packets of the scan's rotation (firings without a return have range 0)."""
        pts = scan.points
        k = point_columns(self.preset, scan)
        k0 = scan.index * self.cols
        m = k - k0
        ok = (m >= 0) & (m < self.cols)
        colarr = np.zeros(self.cols, self.column_dtype)
        kk = k0 + np.arange(self.cols, dtype=np.int64)
        t_col = kk * self.period_ns // self.cols
        colarr["ts"] = (t_col + self.epoch_ns).astype(np.uint64)
        colarr["mid"] = np.arange(self.cols)
        colarr["fid"] = scan.index & 0xFFFF
        colarr["enc"] = np.arange(self.cols) * (ENCODER_TICKS // self.cols)
        colarr["status"] = 0xFFFFFFFF
        rng = np.sqrt(pts["x"] ** 2 + pts["y"] ** 2 + pts["z"] ** 2)[ok]
        mm = np.minimum(np.round(rng * 1000.0), (1 << 20) - 1).astype(np.uint32)
        ring = pts["ring"][ok].astype(np.intp)
        first = pts["return_id"][ok] == 0
        px = colarr["px"]
        sel_m, sel_r = m[ok][first], ring[first]
        px["range"][sel_m, sel_r] = mm[first]
        refl = np.clip(np.round(pts["reflectivity"][ok][first] * 100.0), 0, 65535)
        px["reflectivity"][sel_m, sel_r] = refl.astype(np.uint16)
        sig = np.clip(np.round(pts["intensity"][ok][first]), 0, 65535)
        px["signal"][sel_m, sel_r] = sig.astype(np.uint16)
        send = t_col[COLUMNS_PER_PACKET - 1 :: COLUMNS_PER_PACKET] + self.period_ns // self.cols
        if self.profile == "RNG19":
            return [PacketBatch("data", self._rng19(colarr, scan.index), send)]
        raw = colarr.view(np.uint8).reshape(self.cols // COLUMNS_PER_PACKET, -1)
        return [PacketBatch("data", raw, send)]

    def _rng19(self, colarr: np.ndarray, frame: int) -> np.ndarray:
        """The same columns in the RNG19_RFL8_SIG16_NIR16 packet layout, one row of bytes a packet."""
        n_pk = self.cols // COLUMNS_PER_PACKET
        pk = np.zeros(n_pk, self.rng19_packet_dtype)
        pk["type"] = 1
        pk["fid"] = frame & 0xFFFF
        pk["init"] = np.frombuffer(INIT_ID.to_bytes(3, "little"), np.uint8)
        pk["sn"] = np.frombuffer(PROD_SN.to_bytes(5, "little"), np.uint8)
        # (packets, 16) views into the packet bytes; a reshape to 1-D would copy (headers between them)
        cols = pk["cols"]
        src = colarr.reshape(n_pk, COLUMNS_PER_PACKET)
        cols["ts"], cols["mid"], cols["status"] = src["ts"], src["mid"], 1
        sp, dp = src["px"], cols["px"]
        dp["range"] = np.minimum(sp["range"], (1 << 19) - 1)
        dp["reflectivity"] = np.minimum(sp["reflectivity"], 255)
        dp["signal"], dp["nir"] = sp["signal"], sp["nir"]
        raw = pk.view(np.uint8).reshape(n_pk, -1)
        # the footer ends with a CRC-64/XZ of every byte before it (ouster-sdk drops packets without it)
        for row in raw:
            crc = fastcrc.crc64.xz(row[:-8].tobytes())
            row[-8:] = np.frombuffer(crc.to_bytes(8, "little"), np.uint8)
        return raw

    def finish(self) -> list[PacketBatch]:
        """Nothing is held back (packets never span rotations)."""
        return []


def _factory(opts: SinkOptions, meta_out: Path | None) -> Callable[[SinkContext], OusterPacketizer]:
    meta_in = opts.path("metadata")
    given = json.loads(meta_in.read_text()) if meta_in is not None else None
    epoch = opts.integer("epoch_ns", DEFAULT_EPOCH_NS, 0, 2**63 - 1)
    profile = opts.choice("profile", "LEGACY", (*PROFILES, *(p.lower() for p in PROFILES))).upper()

    def make(context: SinkContext) -> OusterPacketizer:
        meta = metadata_for(context.preset, given, profile=PROFILES[profile])
        if meta_out is not None:
            meta_out.write_text(json.dumps(meta, indent=2))
        return OusterPacketizer(context.preset, epoch_ns=epoch, profile=profile)

    return make


@register_sink("ouster-pcap")
def ouster_pcap_sink(target: str, options: dict[str, str]) -> PacketPcapSink:
    """``--sink ouster-pcap:out.pcap[,metadata=real.json][,profile=LEGACY|RNG19]``: packets, and ``out.json``
    beside them."""
    opts = SinkOptions("ouster-pcap", options, {"metadata", "epoch_ns", "profile"})
    path = Path(target)
    return PacketPcapSink(path, _factory(opts, path.with_suffix(".json")), "169.254.0.2", "169.254.0.1")


@register_sink("ouster-udp")
def ouster_udp_sink(target: str, options: dict[str, str]) -> UdpPacketSink:
    """``--sink ouster-udp:HOST:PORT[,metadata=real.json][,metadata_out=out.json][,latency_ms=50]``."""
    allowed = {"metadata", "epoch_ns", "metadata_out", "profile"} | PACER_OPTIONS
    opts = SinkOptions("ouster-udp", options, allowed)
    meta_out = opts.path("metadata_out")
    pacer = {k: v for k, v in options.items() if k in PACER_OPTIONS}
    return UdpPacketSink(target or "127.0.0.1:7502", _factory(opts, meta_out), pacer, kind="ouster-udp")
