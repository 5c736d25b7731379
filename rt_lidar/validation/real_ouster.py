"""Real Ouster recordings for the realism statistics: a pcap of lidar packets in any profile the sensor
metadata names (LEGACY, RNG19_RFL8_SIG16_NIR16, RNG15_RFL8_NIR8, their dual forms, FUSA), its most
complete frame put on the sensor's grid (a measurement id a column, a beam a row).

The byte layouts are those :mod:`rt_lidar.sinks.ouster` writes (its docstring lists them). The intensity
is the strongest return's ``signal`` (photon counts) where the profile carries one, else its
``reflectivity`` (RNG15 profiles); the range of RNG15 profiles counts 8 mm units. Metadata in the flat
layout of firmware 2.x (``data_format``) and the nested one of ouster-sdk (``lidar_data_format``,
``beam_intrinsics``, ``config_params``) are both read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import RecordingError
from rt_lidar.sinks.ouster import pixel_dtype
from rt_lidar.sinks.ouster_meta import FUSA_HEADER, PIXEL_BYTES
from rt_lidar.sinks.pcap_read import read_pcap_udp
from rt_lidar.validation.realism_grid import ScanGrid

__all__ = ["OusterLayout", "ouster_layout", "ouster_scan", "read_ouster_pcap"]


class OusterLayout:
    """What a metadata file says about the packets: profile, grid and beam angles."""

    def __init__(self, meta: dict[str, Any], source: str) -> None:
        fmt = meta.get("lidar_data_format") or meta.get("data_format") or {}
        intr = meta.get("beam_intrinsics") or meta
        cfg = meta.get("config_params") or meta
        try:
            self.altitude = np.asarray(intr["beam_altitude_angles"], np.float64)
            self.azimuth = np.asarray(intr["beam_azimuth_angles"], np.float64)
        except KeyError as exc:
            raise RecordingError(f"{source}: Ouster metadata without {exc.args[0]}") from None
        self.profile = str(fmt.get("udp_profile_lidar") or cfg.get("udp_profile_lidar") or "LEGACY")
        if self.profile not in PIXEL_BYTES:
            raise RecordingError(
                f"{source}: lidar profile {self.profile!r} is not one of {', '.join(PIXEL_BYTES)}"
            )
        mode = str(cfg.get("lidar_mode") or meta.get("lidar_mode") or "1024x10")
        self.columns_per_frame = int(fmt.get("columns_per_frame") or mode.split("x")[0])
        self.columns_per_packet = int(fmt.get("columns_per_packet") or 16)
        self.pixels_per_column = int(fmt.get("pixels_per_column") or self.altitude.size)
        window = fmt.get("column_window") or [0, self.columns_per_frame - 1]
        self.columns_in_window = (int(window[1]) - int(window[0])) % self.columns_per_frame + 1
        """Columns the sensor sends a frame (its azimuth window; every column where none is set)."""

    def packet_dtype(self) -> np.dtype:
        """One lidar packet of this layout."""
        px = np.dtype((pixel_dtype(self.profile), (self.pixels_per_column,)))
        n = self.columns_per_packet
        if self.profile == "LEGACY":
            col = np.dtype(
                {
                    "names": ["mid", "fid", "px", "status"],
                    "formats": ["<u2", "<u2", px, "<u4"],
                    "offsets": [8, 10, 16, 16 + px.itemsize],
                    "itemsize": 20 + px.itemsize,
                }
            )
            return np.dtype({"names": ["cols"], "formats": [(col, (n,))], "offsets": [0]})
        col = np.dtype(
            {"names": ["mid", "status", "px"], "formats": ["<u2", "<u2", px], "offsets": [8, 10, 12]}
        )
        fid = ("<u4", 4) if self.profile in FUSA_HEADER else ("<u2", 2)
        return np.dtype(
            {
                "names": ["fid", "cols"],
                "formats": [fid[0], (col, (n,))],
                "offsets": [fid[1], 32],
                "itemsize": 64 + n * col.itemsize,
            }
        )


def ouster_layout(metadata: str | Path, text: str | None = None) -> OusterLayout:
    """The layout of an Ouster metadata JSON file (flat or nested), or of its ``text`` (as a ROS bag's
    metadata topic holds it) where given, ``metadata`` then naming where it came from."""
    try:
        meta = json.loads(Path(metadata).read_text() if text is None else text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordingError(f"{metadata}: not a readable Ouster metadata JSON file: {exc}") from None
    if not isinstance(meta, dict):
        raise RecordingError(f"{metadata}: not an Ouster metadata JSON object")
    return OusterLayout(meta, str(metadata))


def read_ouster_pcap(pcap: str | Path, metadata: str | Path) -> ScanGrid:
    """The most complete frame of an Ouster pcap with its metadata on the sensor's grid: range (m) and
    the strongest return's signal (or reflectivity where the profile has no signal) per pixel."""
    return ouster_scan(Path(pcap), (rec.payload for rec in read_pcap_udp(pcap)), ouster_layout(metadata))


def ouster_scan(path: Path, payloads: Iterable[bytes], lay: OusterLayout) -> ScanGrid:
    """The most complete frame of one sensor's lidar packets (``payloads`` in order, read from
    ``path``; packets of other sizes are passed over) on its grid, as :func:`read_ouster_pcap` reads a
    pcap's."""
    pcap = path
    dt = lay.packet_dtype()
    frames: dict[int, dict[int, np.ndarray]] = {}
    for payload in payloads:
        if len(payload) != dt.itemsize:
            continue  # IMU packets, other sensors
        pk = np.frombuffer(payload, dt)[0]
        cols = pk["cols"]
        for c in cols:
            ok = c["status"] == 0xFFFFFFFF if lay.profile == "LEGACY" else bool(c["status"] & 1)
            fid = int(c["fid"]) if lay.profile == "LEGACY" else int(pk["fid"])
            if ok and c["mid"] < lay.columns_per_frame:
                frames.setdefault(fid, {})[int(c["mid"])] = c["px"]
    if not frames:
        raise RecordingError(
            f"{pcap}: no {lay.profile} lidar packets of {dt.itemsize} bytes ({lay.pixels_per_column} beams)"
        )
    best = max(frames, key=lambda f: len(frames[f]))  # the most complete; of equals, the first
    got = frames[best]
    if 2 * len(got) < lay.columns_in_window:
        raise RecordingError(
            f"{pcap}: its most complete frame ({best}) holds {len(got)} of the {lay.columns_in_window} "
            f"columns the sensor sends a frame: too little of a turn to measure; record a whole frame"
        )
    note = f"frame {best}, {len(got)} of {lay.columns_in_window} columns" + (
        f" (the most complete of {len(frames)} frames in the file)" if len(frames) > 1 else ""
    )
    rows, width = lay.pixels_per_column, lay.columns_per_frame
    rng = np.zeros((rows, width))
    inten = np.zeros((rows, width))
    in_view = np.zeros((rows, width), bool)
    rng15 = lay.profile.startswith(("RNG15", "FUSA_RNG15"))
    bits = 0xFFFFF if lay.profile == "LEGACY" else (0x7FFF if rng15 else 0x7FFFF)
    field = "signal" if "signal" in (pixel_dtype(lay.profile).names or ()) else "reflectivity"
    for m, px in got.items():
        raw = px["range"].astype(np.int64) & bits
        rng[:, m] = raw * (8.0 if rng15 else 1.0) / 1000.0
        inten[:, m] = px[field]
        in_view[:, m] = True
    theta = 2 * np.pi * (1 - np.arange(width) / width)[None, :] - np.radians(lay.azimuth)[:, None]
    phi = np.radians(lay.altitude)[:, None]
    direction = np.stack(
        [np.cos(phi) * np.cos(theta), np.cos(phi) * np.sin(theta), np.broadcast_to(np.sin(phi), theta.shape)],
        -1,
    )
    xyz = np.where((rng > 0)[..., None], direction * rng[..., None], np.nan)
    inten = np.where(rng > 0, inten, 0.0)
    units = "Ouster signal (photons)" if field == "signal" else "Ouster reflectivity (0..255)"
    return ScanGrid(Path(pcap).name, xyz, rng, inten, direction, in_view, 1.0, units, note=note)
