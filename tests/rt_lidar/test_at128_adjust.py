"""The AT128's per-azimuth adjust tables and mirror fields, applied to the beam geometry: every firing
of a preset made from a real AT128 ``.dat`` points where Hesai's decoder formula (its SDK's and
nebula's ``getAzimuthAdjustV3`` / ``getElevationAdjustV3``, computed here from the file's bytes in
its own integer units) puts that channel at that encoder angle."""

from __future__ import annotations

import math
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between, scan_period_ns

DAT = Path(__file__).resolve().parents[1] / "data" / "vendor" / "hesai" / "AT128E2X_Angle Correction File.dat"
UNIT = 25600  # the decoder's angle unit: 1/25600 deg
FULL = 360 * UNIT


class HesaiAT128:
    """Hesai's AT128 angle formula, from the file's bytes (v1.5: 32-bit angles times the resolution
    byte; int8 adjust tables, times the resolution, in 0.01 deg, one entry every 2 deg of encoder)."""

    def __init__(self, data: bytes) -> None:
        ch, mirrors, res = data[4], data[5], data[15]
        o = 16
        self.start = [v * res for v in struct.unpack_from(f"<{mirrors}I", data, o)]
        o += 8 * mirrors
        self.az = [v * res for v in struct.unpack_from(f"<{ch}i", data, o)]
        self.el = [v * res for v in struct.unpack_from(f"<{ch}i", data, o + 4 * ch)]
        o += 8 * ch
        self.adj_az = [v * res for v in struct.unpack_from(f"<{ch * 180}b", data, o)]
        self.adj_el = [v * res for v in struct.unpack_from(f"<{ch * 180}b", data, o + ch * 180)]

    @staticmethod
    def _adjust(table: list[int], ch: int, a: int) -> int:
        step = 200 * 256
        i = a // step
        k = (a - i * step) / step
        v = (1 - k) * table[ch * 180 + i] + k * table[ch * 180 + i + 1]
        return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)  # C round(): half away from zero

    def angles(self, field: int, a: int, ch: int) -> tuple[float, float]:
        """(azimuth clockwise, elevation) in deg of channel ``ch`` at encoder ``a`` (1/25600 deg)."""
        az = (a + FULL - self.start[field]) * 2 - self.az[ch] + self._adjust(self.adj_az, ch, a) * 256
        el = self.el[ch] + self._adjust(self.adj_el, ch, a) * 256
        return (az % FULL) / UNIT, el / UNIT


def _preset():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_preset(str(DAT))


def test_every_firing_points_where_hesais_formula_puts_it():
    preset = _preset()
    hesai = HesaiAT128(DAT.read_bytes())
    period, slots = scan_period_ns(preset), preset.scan.columns_per_frame
    assert slots is not None
    az_off = preset.azimuth_offsets_deg
    lo, hi = -60.0 - az_off.min(), 60.0 - az_off.max()  # the mirror pattern's column sweep, right to left
    worst = {"az": 0.0, "el": 0.0}
    moved, off = 0.0, 0
    rng = np.random.default_rng(0)
    for scan in range(4):
        f = firings_between(preset, scan * period, (scan + 1) * period)
        pick = rng.choice(len(f), 3000, replace=False)
        for i in pick:
            col = int(f.column[i]) - scan * slots
            base = hi - (hi - lo) * col / (slots - 1)  # our forward is the decoder's 90 deg
            a = round((hesai.start[scan % 3] / UNIT + (90.0 - base) / 2.0) * UNIT) % FULL
            az_cw, el = hesai.angles(scan % 3, a, int(f.ring[i]))
            ours_cw = (90.0 - f.azimuth_deg[i]) % 360.0
            d_az = abs((ours_cw - az_cw + 180.0) % 360.0 - 180.0)
            worst["az"] = max(worst["az"], d_az)
            off += d_az > 1e-3
            worst["el"] = max(worst["el"], abs(f.elevation_deg[i] - el))
            plain = base + az_off[f.ring[i]]  # without the tables
            moved = max(
                moved,
                abs(f.azimuth_deg[i] - plain),
                abs(f.elevation_deg[i] - preset.elevations_deg[f.ring[i]]),
            )
    # a firing whose encoder angle we hold to the ns, Hesai's to 1/25600 deg, may round its adjustment
    # to the other whole 0.01 deg where the interpolation lands on a half
    assert worst["az"] < 0.0101 and worst["el"] < 1e-3 and off < 12, (worst, off)
    assert moved > 0.5  # the tables move beams by up to ~0.9 deg: the check above is not vacuous


def test_scans_cycle_through_the_mirror_fields():
    preset = _preset()
    assert preset.scan.mirror_fields_deg == pytest.approx((23.074687, 143.440469, 263.133203))
    period = scan_period_ns(preset)
    scans = [firings_between(preset, n * period, (n + 1) * period) for n in range(4)]
    assert not np.array_equal(scans[0].azimuth_deg, scans[1].azimuth_deg)
    assert not np.array_equal(scans[1].elevation_deg, scans[2].elevation_deg)
    np.testing.assert_array_equal(scans[3].azimuth_deg, scans[0].azimuth_deg)
    np.testing.assert_array_equal(scans[3].unit, scans[0].unit)
    # any split of time gives the same firings (the tables are sliced per scan)
    half = firings_between(preset, period // 2, period + period // 2)
    a = firings_between(preset, period // 2, period)
    b = firings_between(preset, period, period + period // 2)
    np.testing.assert_array_equal(half.azimuth_deg, np.concatenate([a.azimuth_deg, b.azimuth_deg]))
    np.testing.assert_array_equal(half.elevation_deg, np.concatenate([a.elevation_deg, b.elevation_deg]))


def test_the_shipped_at128_preset_has_no_tables():
    p = load_preset("AT128")
    assert p.scan.mirror_fields_deg is None and p.beams[0].azimuth_adjust_deg is None
