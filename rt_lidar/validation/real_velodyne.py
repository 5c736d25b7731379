"""Real Velodyne recordings for the realism statistics: a pcap of 1206-byte data packets decoded here
(VLP-16, VLP-32C, HDL-32E, HDL-64E, VLS-128) and one rotation put on its firing grid, a firing a column
and a laser a row, so that every ray without a return is a cell with range 0.

The packet layout is the one :mod:`rt_lidar.sinks.velodyne` writes (12 blocks of a bank flag, an
azimuth in 0.01 deg clockwise and 32 x (distance, intensity), then the timestamp, the return mode and
the product id). Blocks of consecutive bank flags with one azimuth are one firing of the sensor's lasers
(laser = bank * 32 + channel; a VLP-16 block holds two firings of 16 lasers). In dual-return mode a
laser's two returns of a firing are reduced to the stronger one. The laser table (elevation, azimuth
offset, distance correction) is the preset's (``laser_id`` as the packet numbers lasers), so a unit whose
own calibration differs decodes with the model's published angles; intra-firing timing is not applied
(the firing's azimuth is the packet's), which moves points by at most one firing's rotation (~0.2 deg)
and leaves ranges and intensities exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rt_lidar.errors import RecordingError
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sinks.pcap import read_pcap_udp
from rt_lidar.sinks.velodyne import DATA_PACKET
from rt_lidar.validation.realism_grid import ScanGrid

__all__ = ["PRESET_OF_PRODUCT", "VelodyneReturns", "decode_velodyne_payloads", "read_velodyne_pcap"]

PRESET_OF_PRODUCT = {0x22: "VLP-16", 0x28: "VLP-32C", 0x21: "HDL-32E", 0xA1: "VLS-128"}
"""The product id byte of a data packet -> the shipped preset of that model (HDL-64E packets have none)."""
_DISTANCE_M = {"VLP-16": 0.002, "HDL-32E": 0.002, "HDL-64E": 0.002, "VLP-32C": 0.004, "VLS-128": 0.004}
_BANK_OF_FLAG = {0xEEFF: 0, 0xDDFF: 1, 0xCCFF: 2, 0xBBFF: 3}
_DUAL = 0x39
_STRONGEST = 0x37
MIN_SWEEP_DEG = 30.0
"""A sweep shorter than this (a capture cut after a few packets) is refused, not measured."""


@dataclass
class VelodyneReturns:
    """Every laser slot of a run of data packets, one row per (firing, laser), returns or not."""

    firing: np.ndarray
    """(N,) int64 index of the firing, counted along the run of packets."""
    laser: np.ndarray
    """(N,) int64 laser id as the packet numbers it."""
    azimuth_deg: np.ndarray
    """(N,) float64 the firing's azimuth as the packet gives it (clockwise from forward)."""
    distance: np.ndarray
    """(N,) int64 raw distance in the model's resolution (0: no return)."""
    intensity: np.ndarray
    """(N,) int64 reported intensity (0..255)."""
    return_mode: int
    product_id: int


def decode_velodyne_payloads(payloads: list[bytes], lasers: int) -> VelodyneReturns:
    """Decode 1206-byte data packets of a model with ``lasers`` lasers into per-slot returns."""
    if not payloads:
        raise RecordingError("no Velodyne data packets (1206-byte UDP payloads)")
    pk = np.frombuffer(b"".join(payloads), DATA_PACKET)
    # an HDL-64E's last two bytes are a cycling status (type, value), not a return mode and product
    modes = np.unique(pk["mode"]) if lasers != 64 else np.array([_STRONGEST])
    if modes.size > 1:
        raise RecordingError(
            f"data packets in {modes.size} return modes ({', '.join(f'0x{m:02x}' for m in modes)}): "
            "cut the capture to one mode"
        )
    mode = int(modes[0])
    blocks = pk["blocks"].reshape(-1)
    flag = blocks["flag"].astype(np.int64)
    az = blocks["azimuth"].astype(np.int64)
    slot = np.arange(flag.size)  # the block's place in the run: packet * 12 + block
    valid = np.isin(flag, list(_BANK_OF_FLAG)) & (az < 36000)
    blocks, flag, az, slot = blocks[valid], flag[valid], az[valid], slot[valid]
    bank = np.vectorize(_BANK_OF_FLAG.get, otypes=[np.int64])(flag) if flag.size else flag
    dist = blocks["channels"]["distance"].astype(np.int64)
    inten = blocks["channels"]["intensity"].astype(np.int64)
    # the blocks of one firing: one per bank (upper and lower, or four on a VLS-128), twice that in
    # dual-return mode (the last and the strongest returns of the same firing)
    per_firing = max(1, np.unique(bank).size) * (2 if mode == _DUAL else 1)
    group = np.unique(slot // per_firing, return_inverse=True)[1].reshape(-1)
    if lasers == 16:  # two firings of 16 lasers a block; the second at the half-way azimuth
        g_az = np.zeros(int(group.max()) + 1, np.int64)
        g_az[group] = az
        nxt = np.r_[g_az[1:], g_az[-1:] + 40][group]
        gap = np.mod(nxt - az, 36000)
        half = np.mod(az + np.where(gap < 100, gap, 20) // 2, 36000)
        second = np.tile(np.repeat([0, 1], 16), az.size)
        firing = np.repeat(group * 2, 32) + second
        laser = np.tile(np.r_[np.arange(16), np.arange(16)], az.size)
        azimuth = np.where(second == 0, np.repeat(az, 32), np.repeat(half, 32))
    else:
        firing = np.repeat(group, 32)
        laser = np.repeat(bank * 32, 32) + np.tile(np.arange(32), az.size)
        azimuth = np.repeat(az, 32)
    distance, intensity = dist.reshape(-1), inten.reshape(-1)
    if mode == _DUAL:  # keep each laser's stronger return of the firing (the strongest-return mode)
        key = firing * lasers + laser
        order = np.lexsort((-intensity, (distance == 0).astype(np.int64), key))  # a return beats none
        first = np.r_[True, key[order][1:] != key[order][:-1]]
        keep = order[first]  # one row a (firing, laser), in that order
        firing, laser, azimuth = firing[keep], laser[keep], azimuth[keep]
        distance, intensity = distance[keep], intensity[keep]
    ok = laser < lasers
    return VelodyneReturns(
        firing[ok].astype(np.int64),
        laser[ok].astype(np.int64),
        azimuth[ok] / 100.0,
        distance[ok],
        intensity[ok],
        mode,
        int(pk["product"][0]),
    )


def _data_payloads(path: Path) -> tuple[list[bytes], str]:
    """The data packets of the first sensor (source address and port) in the pcap, and a note naming
    the others where several sensors were captured together."""
    by_source: dict[tuple[str, int], list[bytes]] = {}
    for rec in read_pcap_udp(path):
        if len(rec.payload) == DATA_PACKET.itemsize:
            by_source.setdefault((rec.src, rec.src_port), []).append(rec.payload)
    if not by_source:
        return [], ""
    (ip, port), first = next(iter(by_source.items()))
    note = ""
    if len(by_source) > 1:
        others = ", ".join(f"{a}:{b}" for a, b in list(by_source)[1:4])
        note = f"; the first of {len(by_source)} sensors in the file ({ip}:{port}; also {others})"
    return first, note


def _rotations(firing_az: np.ndarray) -> list[np.ndarray]:
    """Runs of firings that sweep on without a gap (a step of more than 5 deg: the end of a limited
    field of view) and without coming round again (a run ends before it passes 360 deg)."""
    step = np.mod(np.diff(firing_az), 360.0)
    runs: list[np.ndarray] = []
    start, swept = 0, 0.0
    for i, s in enumerate(step, start=1):
        if s > 5.0 or swept + s >= 360.0 - 1e-9:
            runs.append(np.arange(start, i))
            start, swept = i, 0.0
        else:
            swept += s
    runs.append(np.arange(start, firing_az.size))
    return runs


def read_velodyne_pcap(path: str | Path, preset: str | SensorPreset | None = None) -> ScanGrid:
    """The most complete rotation of a Velodyne pcap on its firing grid (intensity step 1). The model
    comes from the packets' product id unless ``preset`` names it (an HDL-64E's packets carry none)."""
    path = Path(path)
    payloads, sources = _data_payloads(path)
    if not payloads:
        raise RecordingError(f"{path}: no Velodyne data packets (1206-byte UDP payloads)")
    return velodyne_scan(path, payloads, preset, sources)


def velodyne_scan(
    path: Path, payloads: list[bytes], preset: str | SensorPreset | None, sources: str = ""
) -> ScanGrid:
    """The most complete rotation of one sensor's data packets (``payloads``, in order; read from
    ``path``) on its firing grid, as :func:`read_velodyne_pcap` reads a pcap's; ``sources`` is added to
    the grid's note."""
    product = payloads[0][-1]
    if preset is None:
        if product not in PRESET_OF_PRODUCT:
            raise RecordingError(
                f"{path}: product id 0x{product:02x} names no known Velodyne model "
                f"({', '.join(f'0x{k:02x} {v}' for k, v in PRESET_OF_PRODUCT.items())}); name the preset"
            )
        preset = PRESET_OF_PRODUCT[product]
    p = load_preset(preset) if isinstance(preset, str) else preset
    lasers = 64 if p.name.upper().startswith("HDL-64") else p.n_rings
    try:
        ret = decode_velodyne_payloads(payloads, lasers)
    except RecordingError as exc:
        raise RecordingError(f"{path}: {exc}") from None
    laser_ids = np.array([b.laser_id if b.laser_id is not None else b.ring for b in p.beams])
    ring_of_laser = np.full(max(lasers, int(laser_ids.max()) + 1), -1)
    ring_of_laser[laser_ids] = [b.ring for b in p.beams]
    res = _DISTANCE_M.get(p.name, 0.002)
    n_fire = int(ret.firing.max()) + 1
    fire_az = np.zeros(n_fire)
    fire_az[ret.firing] = ret.azimuth_deg
    runs = _rotations(fire_az)
    best = max(range(len(runs)), key=lambda k: len(runs[k]))  # the most complete; of equals, the first
    rot = runs[best]
    swept = float(np.sum(np.mod(np.diff(fire_az[rot]), 360.0))) if rot.size > 1 else 0.0
    if swept < MIN_SWEEP_DEG:
        raise RecordingError(
            f"{path}: its longest sweep covers {swept:.0f} deg of azimuth ({rot.size} firings): too little "
            f"of a turn to measure (at least {MIN_SWEEP_DEG:.0f} deg); record a whole rotation"
        )
    col_of_firing = np.full(n_fire, -1)
    col_of_firing[rot] = np.arange(rot.size)
    sel = (col_of_firing[ret.firing] >= 0) & (ring_of_laser[ret.laser] >= 0)
    ring = ring_of_laser[ret.laser[sel]]
    col = col_of_firing[ret.firing[sel]]
    rows, cols = p.n_rings, rot.size
    dist_corr = np.array([b.dist_correction_m or 0.0 for b in sorted(p.beams, key=lambda b: b.ring)])
    rng = np.where(ret.distance[sel] > 0, ret.distance[sel] * res + dist_corr[ring], 0.0)
    range_m = np.zeros((rows, cols))
    intensity = np.zeros((rows, cols))
    in_view = np.zeros((rows, cols), bool)
    range_m[ring, col] = rng
    intensity[ring, col] = np.where(rng > 0, ret.intensity[sel], 0)
    in_view[ring, col] = True
    yaw = np.radians(-fire_az[rot][None, :] + p.azimuth_offsets_deg[:, None])
    el = np.radians(p.elevations_deg)[:, None]
    direction = np.stack(
        [np.cos(el) * np.cos(yaw), np.cos(el) * np.sin(yaw), np.broadcast_to(np.sin(el), yaw.shape)], -1
    )
    xyz = np.where((range_m > 0)[..., None], direction * range_m[..., None], np.nan)
    units = f"Velodyne {p.name} intensity 0..255"
    note = (
        f"sweep {best + 1} of {len(runs)} in the file ({rot.size} firings over {swept:.0f} deg, the longest)"
        + sources
    )
    if ret.return_mode == _DUAL:
        note += "; dual returns: each laser's stronger return kept"
    return ScanGrid(path.name, xyz, range_m, intensity, direction, in_view, 1.0, units, note=note)
