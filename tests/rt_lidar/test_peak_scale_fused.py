"""The footprint's peak factor times the echo's power from the compiled step (``_fused.peak_scale``) is
the NumPy code's bytes (every preset; cosines across [-1, 1], grazing, NaN; ranges to +inf, zero and
NaN), in place; arrays it does not take are left to the NumPy code."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.physics import fused
from rt_lidar.physics.pulse_spread import peak_factor
from rt_lidar.sensor.presets import list_presets, load_preset

needs_compiled = pytest.mark.skipif(not fused.available(), reason="_fused was not built")


def _echoes(seed: int, n: int = 20_000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    cos_edges = [0.0, -0.0, 1.0, -1.0, 1e-5, 1e-4, 2e-4, np.nan, 0.5, 1.5]
    range_edges = [0.0, np.inf, np.nan, 1e-3, 300.0, 50.0, 50.0, 50.0, -1.0, 80.0]
    cos_i = np.concatenate([rng.uniform(-1, 1, n), cos_edges]).astype(np.float32)
    range_m = np.concatenate([rng.uniform(0, 150, n), range_edges]).astype(np.float32)
    power = rng.uniform(0, 1e-6, cos_i.size).astype(np.float32)
    return range_m, cos_i, power


@needs_compiled
@pytest.mark.parametrize("preset", list_presets())
def test_peak_scale_is_numpy_s(preset: str) -> None:
    p = load_preset(preset)
    range_m, cos_i, power = _echoes(len(preset))
    want = power.copy()
    with np.errstate(all="ignore"):
        want *= peak_factor(p, range_m, cos_i)
    got = power.copy()
    assert fused.peak_scale(p, range_m, cos_i, got)
    assert got.tobytes() == want.tobytes()
    assert not np.array_equal(got, power)  # oblique echoes far out do lose their peak


@needs_compiled
def test_arrays_it_does_not_take() -> None:
    p = load_preset("HDL-64E")
    range_m, cos_i, power = _echoes(1, 10)
    before = power.copy()
    assert not fused.peak_scale(p, range_m.astype(np.float64), cos_i, power)
    assert not fused.peak_scale(p, range_m, cos_i, power[::2])
    power.flags.writeable = False
    assert not fused.peak_scale(p, range_m, cos_i, power)
    assert power.tobytes() == before.tobytes()
