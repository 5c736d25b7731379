"""The OT128's firetime file (a table of operational state x azimuth state columns, '-' where a channel
does not fire) as a preset's firing schedule: column k of the rotation fires, in azimuth state k mod
the states' count, each channel at its offset in that state and not at all where the file says '-'.
Checked against the file's numbers read here with the csv module, not through the importer."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.errors import PresetError
from rt_lidar.sensor.presets import SensorPreset, preset_from_dict, preset_to_dict
from rt_lidar.sensor.scan_pattern import firings_between, scan_period_ns
from rt_lidar.sensor.vendor import preset_from_vendor_file
from rt_lidar.sinks.pcap import point_columns, slots_per_scan

HESAI = Path(__file__).resolve().parents[1] / "data" / "vendor" / "hesai"
ANGLES = HESAI / "OT128_Angle Correction File.csv"
FIRETIME = HESAI / "OT128_Firetime Correction File.csv"


def _file_table(op_state: int) -> np.ndarray:
    """(azimuth states, 128) offsets in us of operational state ``op_state``, NaN where '-'."""
    with FIRETIME.open(newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.reader(fh))
    cols = [i for i in range(1, len(rows[0])) if int(rows[0][i]) == op_state]
    cols.sort(key=lambda i: int(rows[1][i]))
    body = sorted(rows[2:], key=lambda r: int(r[0]))
    return np.array([[np.nan if r[i] == "-" else float(r[i]) for r in body] for i in cols])


def _preset() -> SensorPreset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return preset_from_vendor_file(f"{ANGLES}#model=OT128", firetime=str(FIRETIME))


def _high_res(p: SensorPreset) -> SensorPreset:
    """The same unit in its high-resolution mode (3600 columns a turn, operational state 0's table)."""
    d = preset_to_dict(p)
    d["scan"]["firing_cycle_us"] = 27.778
    table = _file_table(0)
    for b in d["beams"]:
        col = table[:, b["ring"]]
        b["firing_state_offsets_us"] = [-1.0 if np.isnan(v) else float(v) for v in col]
        b["firing_offset_us"] = float(np.nanmin(col))
    return preset_from_dict(d, "high-res OT128")


def _check_schedule(p: SensorPreset, table: np.ndarray) -> None:
    period, slots = scan_period_ns(p), slots_per_scan(p)
    f = firings_between(p, 2 * period, 4 * period)  # two rotations: each starts in state 0
    n_states = table.shape[0]
    cols = np.unique(f.column)
    assert len(cols) >= 2 * slots - 1
    for k in cols[1:-1]:  # whole columns (the edges may cut a column's later firings)
        sel = f.column == k
        state = int(k) % slots % n_states
        want = np.flatnonzero(~np.isnan(table[state]))
        assert sorted(f.ring[sel].tolist()) == want.tolist(), f"column {k} (state {state})"
        slot_ns = int(k) * period // slots
        got_us = (f.t_ns[sel] - slot_ns) / 1000.0
        np.testing.assert_allclose(got_us, table[state][f.ring[sel]], atol=5e-4)
    # each firing points where the head is at its own time, plus its channel's azimuth offset
    head = p.scan.scan_start_azimuth_deg - 360.0 * (np.mod(f.t_ns, period) / period)
    want_az = np.mod(head + p.azimuth_offsets_deg[f.ring] + 180.0, 360.0) - 180.0
    assert np.max(np.abs((f.azimuth_deg - want_az + 180.0) % 360.0 - 180.0)) < 1e-9


def test_standard_mode_fires_each_channel_at_its_state_offset():
    p = _preset()
    assert p.firing_state_offsets_us is not None and p.firing_state_offsets_us.shape == (2, 128)
    prov = p.provenance or {}
    assert prov["beams.firing_state_offsets_us"].startswith("file: firetime")
    assert "operational state 2" in prov["beams.firing_state_offsets_us"]
    table = _file_table(2)
    assert not np.isnan(table).any()  # the standard mode fires every channel in both states
    assert np.any(table[0] != table[1])  # ... not all at the same offsets
    _check_schedule(p, table)


def test_high_resolution_mode_skips_the_channels_marked_dash():
    p = _high_res(_preset())
    table = _file_table(0)
    assert table.shape == (4, 128)
    per_state = (~np.isnan(table)).sum(axis=1)
    assert per_state.min() < 128  # some channels rest in some states
    _check_schedule(p, table)
    f = firings_between(p, 0, scan_period_ns(p))
    assert len(f) == int(per_state.sum()) * slots_per_scan(p) // 4


def _at_13_hz(p: SensorPreset) -> SensorPreset:
    """An odd number of columns a turn (1385): the states restart with each rotation."""
    d = preset_to_dict(p)
    d["scan"]["rotation_hz"] = 13.0
    return preset_from_dict(d, "OT128 at 13 Hz")


def test_states_restart_with_each_rotation_of_an_odd_column_count():
    p = _at_13_hz(_preset())
    assert slots_per_scan(p) % 2 == 1
    _check_schedule(p, _file_table(2))


@pytest.mark.parametrize("mode", ["standard", "high", "13hz"])
def test_point_columns_invert_the_state_schedule(mode):
    """A packet writer finds each firing's column from its time and ring alone."""
    p = {"standard": _preset, "high": lambda: _high_res(_preset()), "13hz": lambda: _at_13_hz(_preset())}[
        mode
    ]()
    period = scan_period_ns(p)
    f = firings_between(p, 2 * period, 3 * period)
    pts = np.zeros(len(f), dtype=[("t", np.uint32), ("ring", np.uint16)])
    pts["t"], pts["ring"] = f.t_ns - 2 * period, f.ring

    class _Scan:
        start_ns = 2 * period
        points = pts

    assert np.array_equal(point_columns(p, _Scan()), f.column)  # type: ignore[arg-type]


def test_inconsistent_state_tables_are_refused():
    d = preset_to_dict(_preset())
    d["beams"][5]["firing_state_offsets_us"] = [1.0]
    with pytest.raises(PresetError, match="firing_state_offsets_us"):
        preset_from_dict(d, "bad")
    d = preset_to_dict(_preset())
    for b in d["beams"]:
        b["firing_state_offsets_us"] = [-1.0, b["firing_state_offsets_us"][1]]
    with pytest.raises(PresetError, match="every state must fire"):
        preset_from_dict(d, "bad")


def test_a_state_table_of_another_channel_count_is_refused():
    with pytest.raises(PresetError, match=r"channels 1\.\.128 \(128\); the angle file 64"):
        preset_from_vendor_file(
            str(HESAI / "Pandar64_Angle Correction File.csv"), model="Pandar64", firetime=str(FIRETIME)
        )
