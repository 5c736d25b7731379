"""The echo model's path factor and each laser's focus ratio from the compiled step
(``rt_lidar.physics._path_factor``) are the NumPy code's bytes for every preset (ranges across the
receiver's focus, misses at +inf, NaN, zero and negative ranges), on either side of clear air's
extinction; a ring past the focus table falls back (np.take raises there); and EchoModel takes the
compiled step on the compiled backend only."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from rt_lidar.backend.physics_ops import backend_named
from rt_lidar.kernels import two_way_transmission
from rt_lidar.physics import path_factor_fused
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.laser_gain import ring_gains
from rt_lidar.physics.receiver_focus import (
    TABLE_POINTS,
    beam_focus_ratio,
    beam_focus_table,
    beam_inverse_focus,
)
from rt_lidar.physics.receiver_range import receiver_range_gain
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import SensorPreset, list_presets, load_preset

needs_compiled = pytest.mark.skipif(not path_factor_fused.available(), reason="_path_factor was not built")


def _ranges(seed: int, n: int = 20_000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-4, 1e-3, -5.0, 1e30, 10.5, 11.0, 15.0, 24.0]
    return np.concatenate([rng.uniform(0, 30, n), rng.uniform(0, 250, n), edges]).astype(np.float32)


def _numpy_path_factor(preset_name: str, range_m: np.ndarray, extinction: float) -> np.ndarray:
    p = load_preset(preset_name)
    with np.errstate(all="ignore"):
        trans = two_way_transmission(range_m, extinction)
        gain = receiver_range_gain(p, range_m)
    return trans if gain is None else trans * gain


@needs_compiled
@pytest.mark.parametrize("preset", list_presets())
@pytest.mark.parametrize("extinction", [1e-4, 0.0, 0.013])
def test_path_factor_is_numpy_s(preset: str, extinction: float) -> None:
    r = _ranges(len(preset))
    got = path_factor_fused.path_factor(load_preset(preset), r, extinction)
    want = _numpy_path_factor(preset, r, extinction)
    assert got is not None and got.dtype == want.dtype == np.float32
    assert got.tobytes() == want.tobytes()


def _focused_presets() -> list[SensorPreset]:
    p = load_preset("HDL-64E")
    assert beam_inverse_focus(p) is not None  # the S2 calibration's per-laser focal distances
    no_preset_focus = dataclasses.replace(p, optics=dataclasses.replace(p.optics, receiver_focus_m=None))
    return [p, no_preset_focus]


@needs_compiled
@pytest.mark.parametrize("which", [0, 1])
def test_beam_focus_is_numpy_s(which: int) -> None:
    p = _focused_presets()[which]
    inv = path_factor_fused.inverse_focus(p)
    assert inv is not None and not inv.flags.writeable
    r = _ranges(7 + which)
    ring = np.random.default_rng(3).integers(0, inv.size // TABLE_POINTS, r.size).astype(np.uint16)
    got = path_factor_fused.beam_focus(p, inv, ring, r)
    with np.errstate(all="ignore"):
        want = np.asarray(beam_focus_ratio(np, p, inv, ring, r), np.float32)
    assert got is not None
    assert got.tobytes() == want.tobytes()
    assert np.any(np.abs(want[np.isfinite(want)] - 1) > 0.1)  # a laser's own focus does change echoes


@needs_compiled
def test_beam_focus_past_the_table_falls_back() -> None:
    p = load_preset("HDL-64E")
    inv = path_factor_fused.inverse_focus(p)
    assert inv is not None
    ring = np.array([0, inv.size // TABLE_POINTS], np.uint16)
    assert path_factor_fused.beam_focus(p, inv, ring, np.array([5.0, 5.0], np.float32)) is None
    assert path_factor_fused.beam_focus(p, inv, ring[:1], np.array([5.0], np.float32)) is not None


@needs_compiled
@pytest.mark.parametrize("backend", ["numpy", "compiled"])
def test_echo_model_same_bytes_on_either_backend(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    p = load_preset("HDL-64E")
    model = EchoModel(
        p,
        load_material_table().arrays(["building_plaster"], p.optics.wavelength_nm),
        backend=backend_named(backend),
    )
    calls: list[int] = []
    real = path_factor_fused.path_factor

    def spy(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(path_factor_fused, "path_factor", spy)
    r = _ranges(11)
    with np.errstate(all="ignore"):
        got = model.path_factor(r)
    assert got.tobytes() == _numpy_path_factor("HDL-64E", r, model.extinction_per_m).tobytes()
    assert bool(calls) == (backend == "compiled")
    ring = np.zeros(r.size, np.uint16)
    with np.errstate(all="ignore"):
        focus = model.beam_focus(ring, r)
        table = beam_focus_table(p)
        assert table is not None
        want = beam_focus_ratio(np, p, table.table, ring, r)
    gain = ring_gains(p)  # each laser's own gain (change 42) times its focus ratio, in float32
    assert gain is not None
    want32 = np.asarray(want, np.float32) * gain[ring]
    assert focus is not None and focus.tobytes() == want32.tobytes()
