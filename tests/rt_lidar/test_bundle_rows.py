"""The probes' start points made alone (``_beam_steps.bundle_rows``, the compiled source operations'
``subray_rows``): the chosen rows of the whole bundle's (``bundle_rays``, the NumPy lines), bit for bit;
and a ``--beam full`` frame's probes cast the same rays whichever makes them."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.backend.source_ops import CompiledSourceOps, NumpySourceOps
from rt_lidar.pipeline import beam_steps
from rt_lidar.pipeline.beam_probe import PROBE_SIDES, probe_pattern
from rt_lidar.sensor.beam import SubRayPattern, exit_m_per_rad, subray_pattern
from rt_lidar.sensor.presets import load_preset

needs_compiled = pytest.mark.skipif(not beam_steps.available(), reason="_beam_steps was not built")


def _beams(p: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    d = rng.standard_normal((p, 3))
    d[: p // 10, :2] = 0.0  # straight up and down: the vertical reference
    d /= np.linalg.norm(d, axis=1)[:, None]
    q = rng.standard_normal((p, 4))
    q /= np.linalg.norm(q, axis=1)[:, None]
    return d.astype(np.float32), rng.uniform(-50, 50, (p, 3)), q


def _rows(p: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(pulse, sub-ray) of some rows, each once, by sub-ray then pulse (as the probes come)."""
    rng = np.random.default_rng(seed)
    key = np.flatnonzero(rng.random(p * n) < 0.35)
    return (key % p).astype(np.int64), (key // p).astype(np.int64)


@needs_compiled
@pytest.mark.parametrize("preset", ["HDL-64E", "VLP-16"])
def test_the_chosen_rows_are_the_whole_bundle_s(preset: str) -> None:
    sensor = load_preset(preset)
    d, pos, quat = _beams(1_500, 3)
    offsets = np.array([[1e-3, 0.0], [-1e-3, 2e-3], [0.0, -2e-3]])  # no nominal ray first
    other = SubRayPattern(offsets, np.full(3, 1 / 3, np.float32), np.ones(3))
    for pattern in (probe_pattern(subray_pattern(sensor, 19)), subray_pattern(sensor, 7), other):
        pulse, sub = _rows(len(d), len(pattern), len(pattern))
        for m in (exit_m_per_rad(sensor), (0.0, 0.0)):
            got = CompiledSourceOps().subray_rows(d, pattern, m, pos, quat, pulse, sub)
            want = NumpySourceOps().subray_rows(d, pattern, m, pos, quat, pulse, sub)
            assert beam_steps.bundle_rows(d, pattern, m, pos, quat, pulse, sub) is not None
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()


@needs_compiled
def test_no_rows_and_rows_out_of_range() -> None:
    pattern = probe_pattern(subray_pattern(load_preset("HDL-64E"), 19))
    d, pos, quat = _beams(10, 1)
    none = np.zeros(0, np.int64)
    got = beam_steps.bundle_rows(d, pattern, (1.0, 1.0), pos, quat, none, none)
    assert got is not None and [a.shape for a in got] == [(0, 3), (0, 3), (0, 4)]
    with pytest.raises(IndexError):
        beam_steps.bundle_rows(d, pattern, (1.0, 1.0), pos, quat, np.array([10]), np.array([0]))
    with pytest.raises(IndexError):
        beam_steps.bundle_rows(d, pattern, (1.0, 1.0), pos, quat, np.array([0]), np.array([PROBE_SIDES]))


def test_foreign_arrays_run_numpy() -> None:
    sensor = load_preset("VLP-16")
    d, pos, quat = _beams(10, 2)
    one = np.array([1], np.int64)
    assert beam_steps.bundle_rows(d, subray_pattern(sensor, 1), (1.0, 1.0), pos, quat, one, one * 0) is None
    pattern = subray_pattern(sensor, 7)
    assert beam_steps.bundle_rows(d, pattern, (1.0, 1.0), pos, quat, one.astype(np.int32), one) is None
    assert beam_steps.bundle_rows(d.astype(np.float64), pattern, (1.0, 1.0), pos, quat, one, one) is None
    got = CompiledSourceOps().subray_rows(d.astype(np.float64), pattern, (1.0, 1.0), pos, quat, one, one)
    want = NumpySourceOps().subray_rows(d.astype(np.float64), pattern, (1.0, 1.0), pos, quat, one, one)
    for g, w in zip(got, want, strict=True):
        assert g.tobytes() == w.tobytes()
