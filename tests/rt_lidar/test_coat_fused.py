"""The clear coat's factor from the compiled step (``_fused.coat``) is :func:`coat_apply`'s bytes (every
material of the table, the paints with their coats and flakes, at cosines across [0, 1], their edges,
NaN and out-of-range values, and materials of -1); a material past the table falls back to the NumPy
code (whose indexing raises), and EchoModel takes the step on the compiled backend only."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rt_lidar.backend.physics_ops import backend_named
from rt_lidar.physics import fused
from rt_lidar.physics.clear_coat import coat_apply
from rt_lidar.physics.echo import EchoModel
from rt_lidar.sensor.materials import MaterialArrays, load_material_table
from rt_lidar.sensor.presets import load_preset

needs_compiled = pytest.mark.skipif(not fused.available(), reason="_fused was not built")


def _materials() -> MaterialArrays:
    table = load_material_table()
    arrays = table.arrays(list(table.names), 905.0)
    assert arrays.coat_index is not None and bool((arrays.coat_index > 0).any())
    return arrays


def _echoes(n_materials: int, seed: int, n: int = 30_000) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    edges = np.array([0.0, -0.0, 1.0, -0.5, 1.5, np.nan, np.inf, -np.inf, 1e-7, 0.99951], np.float32)
    cos_i = np.concatenate([rng.uniform(0, 1, n).astype(np.float32), edges])
    material = rng.integers(-1, n_materials, cos_i.size).astype(np.int16)
    power = rng.uniform(0, 1e-6, cos_i.size).astype(np.float32)
    refl = rng.uniform(0, 1.5, cos_i.size).astype(np.float32)
    return cos_i, material, power, refl


@needs_compiled
def test_coat_is_numpy_s() -> None:
    m = _materials()
    cos_i, material, power, refl = _echoes(m.coat_index.size if m.coat_index is not None else 0, 5)
    got = fused.coat_apply(m, cos_i, material, power, refl)
    with np.errstate(invalid="ignore"):
        want = coat_apply(m, cos_i, material, power, refl)
    assert got is not None
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype == np.float32 and g.tobytes() == w.tobytes()
    assert not np.array_equal(got[0], power)  # the coats do change the paints' echoes


@needs_compiled
def test_material_past_the_table_falls_back() -> None:
    m = _materials()
    rows = m.diffuse.size
    cos_i = np.array([0.5, 0.5], np.float32)
    power, refl = np.ones(2, np.float32), np.ones(2, np.float32)
    assert fused.coat_apply(m, cos_i, np.array([0, rows], np.int16), power, refl) is None
    with pytest.raises(IndexError):
        coat_apply(m, cos_i, np.array([0, rows], np.int16), power, refl)


@needs_compiled
@pytest.mark.parametrize("backend", ["numpy", "compiled"])
def test_echo_model_same_bytes_on_either_backend(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    m = _materials()
    model = EchoModel(load_preset("HDL-64E"), m, backend=backend_named(backend))
    calls: list[int] = []
    real = fused.coat_apply

    def spy(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(fused, "coat_apply", spy)
    cos_i, material, power, refl = _echoes(m.diffuse.size, 9)
    with np.errstate(invalid="ignore"):
        got = model.coat(cos_i, material, power, refl)
        want = coat_apply(m, cos_i, material, power, refl)
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    assert bool(calls) == (backend == "compiled")
