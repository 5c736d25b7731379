"""AT128 packets (``hesai-pcap``, protocol 4.3) of a preset made from a real AT128 ``.dat``: read back
at the SDK 2.0 structs' offsets and placed by Hesai's AT128 formula with the same file (mirror field
found as nebula's ``findField`` finds it, adjust tables as ``getAzimuthAdjustV3`` interpolates them),
every point of three scans (the three mirror fields) comes back within 2 mm and 0.01 deg."""

from __future__ import annotations

import struct
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from test_at128_adjust import DAT, UNIT, HesaiAT128

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.hesai import hesai_packetizer, hesai_pcap_sink
from rt_lidar.sinks.pcap import read_pcap_udp


def _field(starts: list[int], a: int) -> int:
    """nebula's findField: the last field whose start is at or below ``a`` (the last one below all)."""
    field = len(starts) - 1
    for i, s in enumerate(starts):
        if a < s:
            return field
        field = i
    return field


def _decode(pcap: Path, hesai: HesaiAT128) -> np.ndarray:
    """(N, 5) x, y, z (our frame: the decoder's azimuth 90 deg is forward), reflectivity, channel."""
    rows = []
    for rec in read_pcap_udp(pcap):
        p = rec.payload
        assert len(p) == 1086 and p[:4] == b"\xee\xff\x04\x03"
        assert tuple(p[6:12]) == (128, 2, 0, 4, 1, 0x11)
        assert struct.unpack_from("<h", p, 1046 + 18)[0] == 200  # the mirror motor: 3 fields at 10 Hz
        for b in range(2):
            o = 12 + b * 515
            a = struct.unpack_from("<H", p, o)[0] * 256 + p[o + 2]
            f = _field(hesai.start, a)
            for ch in range(128):
                dist, refl = struct.unpack_from("<HB", p, o + 3 + 4 * ch)
                if dist == 0:
                    continue
                az, el = (np.radians(v) for v in hesai.angles(f, a, ch))
                r = dist * 0.004
                rows.append(
                    (r * np.cos(el) * np.sin(az), r * np.cos(el) * np.cos(az), r * np.sin(el), refl, ch)
                )
    return np.array(rows, np.float64)


def test_hesais_at128_formula_reads_our_packets_with_the_same_file(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        preset = load_preset(str(DAT))
    scans = list(build_pipeline(preset, "street", seed=0).pipeline.scans(3))
    pcap = tmp_path / "at128.pcap"
    sink = hesai_pcap_sink(str(pcap), {"mode": "strongest"})
    sink.open(SinkContext(preset))
    for s in scans:
        sink.write(s)
    sink.close()
    dec = _decode(pcap, HesaiAT128(DAT.read_bytes()))
    ours = np.concatenate([s.points for s in scans])
    assert len(dec) == len(ours) > 100_000
    xyz = np.column_stack([ours["x"], ours["y"], ours["z"]]).astype(np.float64)
    rng32 = np.sqrt(ours["x"] ** 2 + ours["y"] ** 2 + ours["z"] ** 2).astype(np.float32)  # as the writer
    rng = np.linalg.norm(xyz, axis=1)  # float64: an arccos near 1 needs it
    units = np.round(rng32 / np.float32(0.004)).astype(int)
    by_key: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, key in enumerate(zip(ours["ring"].tolist(), units.tolist(), strict=True)):
        by_key[key].append(i)
    d_rng = np.linalg.norm(dec[:, :3], axis=1)
    worst_deg, worst_r = 0.0, 0.0
    for k in range(len(dec)):
        cand = by_key[(int(dec[k, 4]), round(d_rng[k] / 0.004))]
        assert cand, f"decoded point {k} has no point of ours on its channel at its range"
        cos = (xyz[cand] @ dec[k, :3]) / (rng[cand] * d_rng[k])
        j = int(np.argmax(cos))
        worst_deg = max(worst_deg, float(np.degrees(np.arccos(min(1.0, cos[j])))))
        worst_r = max(worst_r, abs(d_rng[k] - float(rng32[cand[j]])))
    assert worst_r < 0.0021 and worst_deg < 0.0101, (worst_r, worst_deg)


def test_the_shipped_at128_preset_is_refused_with_the_reason():
    with pytest.raises(ConfigError, match=r"only a preset made from the sensor's \.dat"):
        hesai_packetizer(load_preset("AT128"))
    assert UNIT == 25600
