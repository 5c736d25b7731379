"""Pandar40P, Pandar64, PandarQT64, PandarQT128 and PandarXT-16 packets (``hesai-pcap``) of presets made
from Hesai's own angle files (and of the shipped Pandar64 preset). No decoder of these layouts installs
here (hydra4 reads the XT32 and OT128 only), so a reader written in this file from the layouts as
Hesai's SDK 2.0 declares them (its ``udp_protocol_p40.h``, ``_p64.h``, ``_v3_1.h``, ``_v3_2.h`` and
``_v6_1.h`` structs: field by field, little-endian) reads the packets back, and places each point as
Hesai's decoders do (block azimuth + the file's azimuth, the file's elevation; with a firetime file,
the rotation over the channel's firing offset). Every point comes back within 4 mm and 0.01 deg, with
its firing time."""

from __future__ import annotations

import csv
import datetime as dt
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import pcap_of
from hesai_compare import compare_points, pick_returns

from rt_lidar.errors import ConfigError
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sinks.hesai import hesai_packetizer, hesai_pcap_sink
from rt_lidar.sinks.pcap import read_pcap_udp

HESAI = Path(__file__).resolve().parents[2] / "data" / "vendor" / "hesai"


@dataclass(frozen=True)
class Layout:
    """Where a packet keeps what (byte offsets), as the SDK's structs declare it."""

    file: str
    model: str
    size: int
    channels: int
    blocks: int
    body: int  # first block
    flag: int  # bytes before a block's azimuth
    unit: int  # bytes a channel
    tail: int
    rpm: int | None  # offsets in the tail
    us: int
    mode: int | None
    utc: int
    year_base: int
    seq: int | None
    pre_header: bytes
    seq_format: str = "<I"
    single_only: bool = False
    header: int | None = 6  # where channels, blocks, first block's return, unit, returns are
    first_block_flag: bool = True  # the header says which return the first block of a pair holds
    stamp_first: bool = False  # the tail's time is the first block's (else the last's)
    preset: str | None = None  # a shipped preset (angles and firing offsets its own) instead of the file


LAYOUTS = {
    "Pandar40P": Layout(
        "Pandar40P_Angle Correction File.csv", "Pandar40P", 1262, 40, 10, 0, 2, 3, 1240,
        8, 10, 14, 16, 2000, None, b"\xff\xee", header=None,
    ),
    "PandarQT64": Layout(
        "PandarQT_Angle Correction File.csv", "PandarQT64", 1072, 64, 4, 12, 0, 4, 1044,
        10, 12, 16, 18, 1900, 24, b"\xee\xff\x03\x01",
    ),
    "PandarXT-16": Layout(
        "PandarXT-16_Angle Correction File.csv", "PandarXT-16", 568, 16, 8, 12, 0, 4, 540,
        11, 19, 10, 13, 1900, 24, b"\xee\xff\x06\x01", first_block_flag=False, stamp_first=True,
    ),
    "Pandar64": Layout(
        "Pandar64_Angle Correction File.csv", "Pandar64", 1194, 64, 6, 8, 0, 3, 1172,
        8, 10, 14, 16, 2000, None, b"\xee\xff", header=2,
    ),
    "Pandar64 (shipped preset)": Layout(
        "", "Pandar64", 1194, 64, 6, 8, 0, 3, 1172,
        8, 10, 14, 16, 2000, None, b"\xee\xff", header=2, preset="Pandar64",
    ),
    "JT16": Layout(
        "JT16_Angle Correction File.csv", "JT16", 80, 16, 1, 16, 0, 3, 6,
        None, 6, None, 0, 1900, 68, b"\xee\xff\x01\x08\x00\x00", seq_format="<H", single_only=True,
        header=None, stamp_first=True,
    ),
    "PandarQT128": Layout(
        "QT128C2X_Angle Correction File.csv", "PandarQT128", 1095, 128, 2, 12, 0, 4, 1061,
        13, 21, 12, 15, 1900, 26, b"\xee\xff\x03\x02",
    ),
}  # fmt: skip


def _angles(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Elevation and azimuth (deg, as written) by channel - 1."""
    with path.open(newline="", encoding="utf-8-sig") as fh:
        rows = [r for r in csv.reader(fh) if len(r) >= 3 and r[0].strip().isdigit()]
    rows.sort(key=lambda r: int(r[0]))
    return np.array([float(r[1]) for r in rows]), np.array([float(r[2]) for r in rows])


def _preset(lay: Layout) -> SensorPreset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_preset(lay.preset or f"{HESAI / lay.file}#model={lay.model}")


def _read(
    lay: Layout, pcap: Path, column_us: float, preset: SensorPreset
) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """(N, 6) x, y, z, reflectivity, ring, firing time (s) in our frame; (N,) the block of each point
    within its firing (0, or 1 for a dual packet's second block); the tails' fields. A shipped preset
    is read with its own angles and, as Hesai's SDK reads with a firetime file, each channel turned by
    the rotation over its firing offset (and that offset added to its time)."""
    if lay.preset:
        el_deg, az_deg = preset.elevations_deg, -preset.azimuth_offsets_deg
        fire_us = preset.firing_offsets_us
    else:
        el_deg, az_deg = _angles(HESAI / lay.file)
        fire_us = np.zeros(lay.channels)
    el = np.radians(el_deg)
    rows, place, tails = [], [], []
    for rec in read_pcap_udp(pcap):
        p = rec.payload
        assert len(p) == lay.size and p[: len(lay.pre_header)] == lay.pre_header
        t = lay.tail
        rpm = struct.unpack_from("<H", p, t + lay.rpm)[0] if lay.rpm is not None else None
        us = struct.unpack_from("<I", p, t + lay.us)[0]
        y, mo, d, h, mi, s = p[t + lay.utc : t + lay.utc + 6]
        stamp = dt.datetime(y + lay.year_base, mo, d, h, mi, s, tzinfo=dt.UTC).timestamp() + us * 1e-6
        mode = p[t + lay.mode] if lay.mode is not None else 0x37
        tails.append(
            {
                "rpm": rpm,
                "mode": mode,
                "seq": None if lay.seq is None else struct.unpack_from(lay.seq_format, p, t + lay.seq)[0],
            }
        )
        dual = mode == 0x39
        first = 1 if dual and lay.first_block_flag else 0
        if lay.header == 6:  # the header: channels, blocks, first block's return, distance unit, returns
            assert tuple(p[6:11]) == (lay.channels, lay.blocks, first, 4, 2 if dual else 1)
        elif lay.header == 2:  # Pandar64: channels, blocks, return type, distance unit
            assert tuple(p[2:6]) == (lay.channels, lay.blocks, first, 4)
        step = lay.flag + 2 + lay.unit * lay.channels
        for b in range(lay.blocks):
            o = lay.body + b * step
            if lay.flag:
                assert p[o : o + 2] == b"\xff\xee"
            az = struct.unpack_from("<H", p, o + lay.flag)[0] * 0.01
            nr = 2 if dual else 1
            col = b // nr if lay.stamp_first else b // nr - (lay.blocks - 1) // nr
            t_fire = stamp + col * column_us * 1e-6
            for ch in range(lay.channels):
                u = o + lay.flag + 2 + ch * lay.unit
                dist, refl = struct.unpack_from("<HB", p, u)
                if dist == 0:
                    continue
                r = dist * 0.004
                a = np.radians(az + az_deg[ch] + fire_us[ch] * (rpm or 0) * 6e-6)
                xh, yh = r * np.cos(el[ch]) * np.sin(a), r * np.cos(el[ch]) * np.cos(a)
                rows.append((yh, -xh, r * np.sin(el[ch]), refl, ch, t_fire + fire_us[ch] * 1e-6))
                place.append(b % 2 if dual else 0)
    return np.array(rows, np.float64), np.array(place), tails


@pytest.mark.parametrize("mode", ["strongest", "dual"])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_our_packets_read_back_by_the_documented_layout(tmp_path, pipeline_scans, name, mode):
    lay = LAYOUTS[name]
    preset = _preset(lay)
    assert preset.model == lay.model and preset.n_rings == lay.channels
    if mode == "dual" and lay.single_only:
        with pytest.raises(ConfigError, match="holds one return"):
            hesai_packetizer(preset, mode="dual")
        return
    pcap = tmp_path / "hesai.pcap"
    scans = pcap_of(hesai_pcap_sink, pcap, preset, list(pipeline_scans(preset, 2)), mode)
    pz = hesai_packetizer(preset)
    column_us = pz.period_ns / pz.slots / 1000.0
    dec, place, tails = _read(lay, pcap, column_us, preset)
    if lay.rpm is not None:
        assert {t["rpm"] for t in tails} == {600}
    assert {t["mode"] for t in tails} == {0x37 if mode == "strongest" else 0x39}
    if lay.seq is not None:
        assert np.all(np.diff([t["seq"] for t in tails]) == 1)
    parts = [False] if mode == "strongest" else [True, False]
    for b, last in enumerate(parts):
        picked = [s.points[pick_returns(s.points, last)] for s in scans]
        ours = np.concatenate(picked)
        starts = np.concatenate(
            [np.full(len(p), s.start_ns, np.int64) for s, p in zip(scans, picked, strict=True)]
        )
        mine = dec[place == b]
        assert len(mine) == len(ours) > 5_000
        worst = compare_points(mine, ours, starts, np.zeros(lay.channels))  # times: the firings
        assert worst["r"] < 0.0021 and worst["az"] < 0.01 and worst["el"] < 0.01, worst
        assert worst["t_us"] < 1.5, worst


def test_a_preset_of_another_layout_is_refused():
    with pytest.raises(ConfigError, match="has no Hesai packet writer; the Hesai sinks write PandarXT-32"):
        hesai_packetizer(load_preset("VLP-16"))
