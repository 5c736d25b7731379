"""Ouster OS lidar packets in the profile the sensor metadata names, and that metadata beside them;
IMU packets at 100 Hz from the sensor's motion (:mod:`rt_lidar.sinks.ouster_imu`) to the IMU port.

Packet layouts (ouster-sdk's ``PacketFormat``; all little-endian):
- LEGACY (firmware < 2 and the default of 2.x): no packet header; each column is a 16-byte header
  (timestamp u64 ns, measurement id u16, frame id u16, encoder count u32 of 90112 a turn), 12 bytes a
  pixel (range u32 mm in 20 bits, reflectivity at byte 4, signal u16 at 6, near-IR u16 at 8) and a
  status u32 (0xFFFFFFFF valid).
- the others: a 32-byte packet header (packet type u16 = 1, frame id u16, initialization id u24 at
  byte 4, serial number u40 at byte 7), columns of a 12-byte header (timestamp u64, measurement id
  u16, status u16, bit 0 valid) and their pixels, a 32-byte footer ending in a CRC-64/XZ of the packet.
  RNG19_RFL8_SIG16_NIR16, 12 bytes a pixel: range in 19 bits, reflectivity u8 at byte 4, signal u16
  at 6, near-IR u16 at 8. RNG15_RFL8_NIR8, 4 bytes: range in 15 bits of 8 mm, reflectivity u8 at 2,
  near-IR u8 at 3 (in 16s). RNG19_RFL8_SIG16_NIR16_DUAL, 16 bytes: range in 19 bits with the
  reflectivity in byte 3, the second return's at bytes 4-7 likewise, signal u16 at 8, second
  signal at 10, near-IR at 12: the strongest return of the pixel, then the second strongest.
  RNG15_RFL8_NIR8_DUAL and FUSA_RNG15_RFL8_NIR8_DUAL, 8 bytes: range in 15 bits of 8 mm,
  reflectivity u8 at 2, near-IR u8 at 3 (in 16s), the second return's range and reflectivity at 4
  and 6, a window byte at 7 (0). FUSA packets have their own header: packet type u8 at byte 0,
  initialization id u24 at 1, frame id u32 at 4, serial number u40 at 11 (ouster-sdk's
  ``HeaderType::FUSA``).

Near-IR is the ambient (sunlight) power on the detector during the pixel's strongest return's pulse
(``Scan.extras['ambient_w']``, :func:`rt_lidar.physics.ambient.pulse_background_w`) in counts of
:data:`NIR_COUNTS_PER_W`; 0 at night and where a pixel has no return (docs/ouster-metadata.md).

Measurement id m is our firing slot within the rotation (Ouster's m = 0 looks backwards and the head
turns clockwise, as our scan starts at 180 deg), moved per beam by the difference between the
metadata's ``beam_azimuth_angles`` and the preset's, so ouster-sdk's XYZ table puts each point where
we cast it. Only the packets of ``column_window`` are sent; its outer columns carry status 0.
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
from rt_lidar.sensor.beam_origins import ranges_along_beams
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink
from rt_lidar.sinks.ouster_imu import SensorMotion, imu_packets
from rt_lidar.sinks.ouster_meta import (
    DUAL_PROFILES,
    FUSA_HEADER,
    NIR_COUNTS_PER_W,
    PIXEL_BYTES,
    PROFILES,
    OusterFormat,
    complete_metadata,
    nir_counts,
    ouster_format,
    read_metadata,
)
from rt_lidar.sinks.pcap import DEFAULT_EPOCH_NS, PacketBatch, PacketPcapSink, point_columns
from rt_lidar.sinks.udp import PACER_OPTIONS, UdpPacketSink

__all__ = [
    "NIR_COUNTS_PER_W",
    "PROFILES",
    "OusterPacketizer",
    "legacy_reflectivity_is_signal_r2",
    "metadata_for",
    "ouster_pcap_sink",
    "ouster_udp_sink",
    "pixel_dtype",
]

ENCODER_TICKS = 90112
RNG15 = frozenset({"RNG15_RFL8_NIR8", "RNG15_RFL8_NIR8_DUAL", "FUSA_RNG15_RFL8_NIR8_DUAL"})
"""Low-bandwidth profiles: range in 15 bits of 8 mm, near-IR in one byte of 16 counts."""
RANGE_MASK = {"LEGACY": (1 << 20) - 1, **{p: (1 << 15) - 1 for p in RNG15}}
"""Largest range field of a profile (19 bits where not listed); RNG15 counts 8 mm units."""


def metadata_for(
    preset: SensorPreset, given: dict[str, Any] | None = None, profile: str | None = None
) -> dict[str, Any]:
    """Complete metadata for ``preset`` (see :func:`rt_lidar.sinks.ouster_meta.complete_metadata`)."""
    return complete_metadata(preset, given, profile)


def legacy_reflectivity_is_signal_r2(meta: dict[str, Any]) -> bool:
    """Whether LEGACY packets of ``meta``'s firmware (``sensor_info.build_rev``, v2.0.0 when absent) carry
    reflectivity as the range-normalised signal, ``signal * range_m^2`` in 16 bits, as firmware before 2.1
    does (the real OS1-64 frame of ``../shared/reference/real``, firmware 2.0: the ratio is 1.00 at
    0.5-20 m); 2.1 and later carry calibrated reflectivity."""
    rev = str(meta.get("sensor_info", {}).get("build_rev", "v2.0.0")).lstrip("v")
    try:
        major, minor = (int(x) for x in rev.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < (2, 1)


def pixel_dtype(profile: str) -> np.dtype:
    """One pixel of ``profile``'s packets (range fields hold the range bits only)."""
    if profile == "RNG15_RFL8_NIR8":
        fields = {"range": ("<u2", 0), "reflectivity": ("u1", 2), "nir": ("u1", 3)}
    elif profile in ("RNG15_RFL8_NIR8_DUAL", "FUSA_RNG15_RFL8_NIR8_DUAL"):
        fields = {
            "range": ("<u2", 0),
            "reflectivity": ("u1", 2),
            "nir": ("u1", 3),
            "range2": ("<u2", 4),
            "reflectivity2": ("u1", 6),
            "window": ("u1", 7),
        }
    elif profile == "RNG19_RFL8_SIG16_NIR16_DUAL":
        fields = {
            "range": ("<u4", 0),
            "range2": ("<u4", 4),
            "signal": ("<u2", 8),
            "signal2": ("<u2", 10),
            "nir": ("<u2", 12),
        }
    else:  # LEGACY and RNG19 share the byte places (LEGACY's reflectivity was 16 bits wide)
        refl = "<u2" if profile == "LEGACY" else "u1"
        fields = {"range": ("<u4", 0), "reflectivity": (refl, 4), "signal": ("<u2", 6), "nir": ("<u2", 8)}
    return np.dtype(
        {
            "names": list(fields),
            "formats": [f for f, _ in fields.values()],
            "offsets": [o for _, o in fields.values()],
            "itemsize": PIXEL_BYTES[profile],
        }
    )


def _packet_dtype(fmt: OusterFormat) -> np.dtype:
    px = np.dtype((pixel_dtype(fmt.profile), (fmt.pixels_per_column,)))
    if fmt.profile == "LEGACY":
        col = np.dtype(
            {
                "names": ["ts", "mid", "fid", "enc", "px", "status"],
                "formats": ["<u8", "<u2", "<u2", "<u4", px, "<u4"],
                "offsets": [0, 8, 10, 12, 16, 16 + px.itemsize],
            }
        )
        return np.dtype({"names": ["cols"], "formats": [(col, (fmt.columns_per_packet,))], "offsets": [0]})
    col = np.dtype(
        {
            "names": ["ts", "mid", "status", "px"],
            "formats": ["<u8", "<u2", "<u2", px],
            "offsets": [0, 8, 10, 12],
        }
    )
    body = 32 + fmt.columns_per_packet * col.itemsize
    if fmt.profile in FUSA_HEADER:
        return np.dtype(
            {
                "names": ["type", "init", "fid", "sn", "cols", "footer"],
                "formats": [
                    "u1",
                    ("u1", (3,)),
                    "<u4",
                    ("u1", (5,)),
                    (col, (fmt.columns_per_packet,)),
                    ("u1", (32,)),
                ],
                "offsets": [0, 1, 4, 11, 32, body],
            }
        )
    return np.dtype(
        {
            "names": ["type", "fid", "init", "sn", "cols", "footer"],
            "formats": [
                "<u2",
                "<u2",
                ("u1", (3,)),
                ("u1", (5,)),
                (col, (fmt.columns_per_packet,)),
                ("u1", (32,)),
            ],
            "offsets": [0, 2, 4, 7, 32, body],
        }
    )


class OusterPacketizer:
    """Scans -> lidar packets of one rotation a scan, in the layout of complete metadata ``meta``."""

    def __init__(
        self, preset: SensorPreset, meta: dict[str, Any], epoch_ns: int = DEFAULT_EPOCH_NS, imu: bool = True
    ) -> None:
        if preset.packet_format != "ouster-legacy":
            raise ConfigError(f"preset {preset.name}: packet format {preset.packet_format} is not ouster")
        self.preset, self.epoch_ns = preset, int(epoch_ns)
        self.meta = meta
        self.format = fmt = ouster_format(meta)
        self.signal_r2 = fmt.profile == "LEGACY" and legacy_reflectivity_is_signal_r2(meta)
        self.ports = {
            "data": int(meta["config_params"]["udp_port_lidar"]),
            "imu": int(meta["config_params"]["udp_port_imu"]),
        }
        self.h, self.cols = fmt.pixels_per_column, fmt.columns_per_frame
        self.period_ns = scan_period_ns(preset)
        self.packet_dtype = _packet_dtype(fmt)
        assert self.packet_dtype.itemsize == fmt.packet_bytes, (self.packet_dtype.itemsize, fmt.packet_bytes)
        # per beam: columns between our firing slot and where the metadata's beam azimuth points
        ours = -np.asarray(preset.azimuth_offsets_deg, np.float64)
        self.column_shift = -np.round((np.asarray(fmt.beam_azimuth_deg) - ours) * self.cols / 360.0).astype(
            np.int64
        )
        in_window = np.zeros(self.cols, bool)
        in_window[fmt.window_columns()] = True
        self.in_window = in_window
        cpp = fmt.columns_per_packet
        self.packets = np.flatnonzero(in_window.reshape(-1, cpp).any(axis=1))
        """Packet indices within a rotation that the sensor sends (those of ``column_window``)."""
        self.imu = imu
        self.motion = SensorMotion()
        self.frame_base = 0
        """The scan index of frame id 0 (a sensor's frame ids count from its boot)."""

    def image(self, scan: Scan) -> dict[str, np.ndarray]:
        """(h, w) images of the scan's returns: ``range`` (mm), ``reflectivity``, ``signal``, ``nir``
        (counts of the ambient power, :data:`NIR_COUNTS_PER_W`) of the strongest return of each
        pixel, ``range2``... of the second strongest; 0 where none."""
        m = point_columns(self.preset, scan) - scan.index * self.cols
        this = (m >= 0) & (m < self.cols)  # firings of this rotation only
        pts, m = scan.points[this], m[this]
        amb = scan.extras.get("ambient_w")
        amb_w = np.zeros(pts.size) if amb is None else np.asarray(amb, np.float64)[this]
        nir = nir_counts(amb_w)
        ring = pts["ring"].astype(np.int64)
        m = np.mod(m + self.column_shift[ring], self.cols)
        if self.preset.beam_origins_m is None:
            rng = np.sqrt(pts["x"].astype(np.float64) ** 2 + pts["y"] ** 2 + pts["z"] ** 2)
        else:  # ouster-sdk puts a pixel at origin + (RANGE - |origin|) * direction
            o = self.preset.beam_origins_m
            rng = ranges_along_beams(self.preset, pts) + np.sqrt(np.einsum("ij,ij->i", o, o))[ring]
        mm = np.round(rng * 1000.0).astype(np.int64)
        sig = np.clip(np.round(pts["intensity"].astype(np.float64)), 0, 65535).astype(np.int64)
        if self.signal_r2:  # firmware 2.0's LEGACY reflectivity: the signal times the range (m) squared
            refl = np.clip(np.round(sig * rng * rng), 0, 65535).astype(np.int64)
        else:
            refl = np.clip(np.round(pts["reflectivity"].astype(np.float64) * 100.0), 0, 255).astype(np.int64)
        key = ring * self.cols + m
        order = np.lexsort((-sig, key))  # per pixel, strongest first
        key_s = key[order]
        first = np.ones(key_s.size, bool)
        first[1:] = key_s[1:] != key_s[:-1]
        second = np.zeros(key_s.size, bool)
        second[1:] = ~first[1:] & first[:-1]  # the element right after a pixel's first
        out: dict[str, np.ndarray] = {}
        for suffix, sel in (("", first), ("2", second)):
            idx = order[sel]
            for name, v in (("range", mm), ("reflectivity", refl), ("signal", sig), ("nir", nir)):
                img = np.zeros(self.h * self.cols, np.int64)
                img[key[idx]] = v[idx]
                out[name + suffix] = img.reshape(self.h, self.cols)
        return out

    def packetize(self, scan: Scan) -> list[PacketBatch]:
        """The packets of the scan's rotation (pixels without a return have range 0)."""
        fmt, cpp = self.format, self.format.columns_per_packet
        img = {k: v.T for k, v in self.image(scan).items()}  # (w, h)
        rng_max = RANGE_MASK.get(fmt.profile, (1 << 19) - 1)
        pk = np.zeros(len(self.packets), self.packet_dtype)
        cols = pk["cols"]  # (packets, cpp) view into the packet bytes
        mids = self.packets[:, None] * cpp + np.arange(cpp)[None, :]
        kk = scan.index * self.cols + mids
        t_col = kk * self.period_ns // self.cols
        cols["ts"] = (t_col + self.epoch_ns).astype(np.uint64)
        cols["mid"] = mids
        valid = self.in_window[mids]
        px = cols["px"]

        def put(name: str, value: np.ndarray) -> None:
            px[name] = np.where(valid[..., None], value[mids], 0)

        if fmt.profile in RNG15:
            put("range", np.minimum((img["range"] + 4) >> 3, rng_max))
            put("nir", np.minimum((img["nir"] + 8) >> 4, 255))  # in 16s
            if fmt.profile in DUAL_PROFILES:
                put("range2", np.minimum((img["range2"] + 4) >> 3, rng_max))
                put("reflectivity2", img["reflectivity2"])
        elif fmt.profile == "RNG19_RFL8_SIG16_NIR16_DUAL":
            for s in ("", "2"):  # reflectivity rides in the top byte of the range word
                put("range" + s, np.minimum(img["range" + s], rng_max) | img["reflectivity" + s] << 24)
                put("signal" + s, img["signal" + s])
            put("nir", img["nir"])
        else:
            put("range", np.minimum(img["range"], rng_max))
            put("signal", img["signal"])
            put("nir", img["nir"])
        if fmt.profile != "RNG19_RFL8_SIG16_NIR16_DUAL":
            put("reflectivity", img["reflectivity"])
        if fmt.profile == "LEGACY":
            cols["fid"] = (scan.index - self.frame_base) & 0xFFFF
            cols["enc"] = mids * (ENCODER_TICKS // self.cols)
            cols["status"] = np.where(valid, 0xFFFFFFFF, 0)
        else:
            cols["status"] = valid
            pk["type"] = 1
            fid_mask = 0xFFFFFFFF if fmt.profile in FUSA_HEADER else 0xFFFF
            pk["fid"] = (scan.index - self.frame_base) & fid_mask
            pk["init"] = np.frombuffer(fmt.init_id.to_bytes(3, "little"), np.uint8)
            pk["sn"] = np.frombuffer(fmt.prod_sn.to_bytes(5, "little"), np.uint8)
        raw = pk.view(np.uint8).reshape(len(pk), -1)
        if fmt.profile != "LEGACY":  # the footer ends with a CRC-64/XZ of every byte before it
            for row in raw:
                row[-8:] = np.frombuffer(fastcrc.crc64.xz(row[:-8].tobytes()).to_bytes(8, "little"), np.uint8)
        send = t_col[:, -1] + self.period_ns // self.cols
        out = [PacketBatch("data", raw, send)]
        if self.imu:
            accel, rate, q = self.motion.add(scan)
            t0 = scan.index * self.period_ns
            pk_imu, t_imu = imu_packets(t0, t0 + self.period_ns, self.epoch_ns, accel, rate, q)
            out.append(PacketBatch("imu", pk_imu, t_imu))
        return out

    def finish(self) -> list[PacketBatch]:
        """Nothing is held back (packets never span rotations)."""
        return []


def _factory(opts: SinkOptions, meta_out: Path | None) -> Callable[[SinkContext], OusterPacketizer]:
    source_path = opts.path("metadata")
    source = str(source_path) if source_path is not None else None
    given = read_metadata(source) if source else None
    epoch = opts.integer("epoch_ns", DEFAULT_EPOCH_NS, 0, 2**63 - 1)
    profile = opts.text("profile", "") or None
    if profile is not None and profile.upper() not in PROFILES and profile.upper() not in PIXEL_BYTES:
        raise ConfigError(
            f"sink {opts.kind}: option profile={profile!r}: expected one of {', '.join(PROFILES)}"
        )

    def make(context: SinkContext) -> OusterPacketizer:
        meta = complete_metadata(context.preset, given, profile, source=source or "metadata")
        if meta_out is not None:
            meta_out.write_text(json.dumps(meta, indent=2))
        return OusterPacketizer(context.preset, meta, epoch_ns=epoch)

    return make


@register_sink("ouster-pcap")
def ouster_pcap_sink(target: str, options: dict[str, str]) -> PacketPcapSink:
    """``--sink ouster-pcap:out.pcap[,metadata=real.json][,profile=LEGACY|RNG19|RNG15|DUAL|RNG15_DUAL|FUSA]``:
    packets,
    and ``out.json`` beside them."""
    opts = SinkOptions("ouster-pcap", options, {"metadata", "epoch_ns", "profile"})
    path = Path(target)
    return PacketPcapSink(path, _factory(opts, path.with_suffix(".json")), "169.254.0.2", "169.254.0.1")


@register_sink("ouster-udp")
def ouster_udp_sink(target: str, options: dict[str, str]) -> UdpPacketSink:
    """``--sink ouster-udp:HOST:PORT[,metadata=real.json][,metadata_out=out.json][,profile=...]``
    ``[,imu_port=7503][,latency_ms=50]``."""
    allowed = {"metadata", "epoch_ns", "metadata_out", "profile", "imu_port"} | PACER_OPTIONS
    opts = SinkOptions("ouster-udp", options, allowed)
    meta_out = opts.path("metadata_out")
    pacer = {k: v for k, v in options.items() if k in PACER_OPTIONS}
    ports = {"imu": opts.integer("imu_port", 7503, 1, 65535)} if "imu_port" in options else {}
    return UdpPacketSink(
        target or "127.0.0.1:7502", _factory(opts, meta_out), pacer, ports, kind="ouster-udp"
    )
