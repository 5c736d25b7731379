"""The backend layer and the determinism contract (docs/determinism.md), one test body over every backend
present here: NumPy, the compiled twins, the CUDA kernels' source compiled for the CPU, CuPy on a GPU.

- one backend, configuration and seed: the same bytes, run after run (another seed: other bytes);
- the compiled twins: the NumPy bytes;
- every backend: the NumPy backend's statistics within CROSS_BACKEND_TOLERANCES.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from rt_lidar.backend import CompiledBackend, NumpyBackend, available_backends, select_backend
from rt_lidar.backend.physics_ops import BACKEND_NAMES, backend_named
from rt_lidar.physics import device, fused
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.sources import Capabilities
from rt_lidar.validation.backend_check import (
    CROSS_BACKEND_TOLERANCES,
    backend_scans,
    backend_statistics,
    compare_statistics,
)

BACKENDS = [pytest.param(name, id=name) for name in BACKEND_NAMES]


def _backend(name: str) -> NumpyBackend:
    why = available_backends()[name]
    if why is not None:
        pytest.skip(f"backend {name}: {why}")
    return backend_named(name)


def _bytes(scans: list[Scan]) -> list[bytes]:
    return [s.points.tobytes() + b"".join(v.tobytes() for _, v in sorted(s.extras.items())) for s in scans]


@pytest.fixture(scope="module")
def reference() -> list[Scan]:
    return backend_scans(NumpyBackend())


@pytest.mark.parametrize("name", BACKENDS)
def test_one_backend_gives_the_same_bytes_run_after_run(name: str) -> None:
    backend = _backend(name)
    first = backend_scans(backend)
    assert all(s.points.size > 1000 for s in first) and "epw_ns" in first[0].extras
    assert _bytes(backend_scans(backend_named(name))) == _bytes(first)
    assert _bytes(backend_scans(backend, seed=4)) != _bytes(first)


@pytest.mark.parametrize("name", BACKENDS)
def test_every_backend_keeps_the_numpy_statistics(name: str, reference: list[Scan]) -> None:
    backend = _backend(name)
    got = backend_scans(backend)
    report = compare_statistics(backend_statistics(got), backend_statistics(reference))
    bad = {k: v for k, v in report.items() if not v[2]}
    assert not bad, f"{name} vs numpy out of tolerance: {bad}"
    ref = backend_statistics(reference)
    assert ref.second_return_share > 0.005 and ref.rain_clutter_share > 0  # the comparison is not vacuous
    if name == "compiled" and fused.available():
        assert _bytes(got) == _bytes(reference)  # the twins: the NumPy bytes, not only its statistics
    if name == "cuda-host":  # the weather and waveform ran the CUDA source, built for this CPU
        assert device._host_kernel.cache_info().currsize >= 2


def test_tolerances_are_the_documented_ones() -> None:
    assert CROSS_BACKEND_TOLERANCES == {
        "points_per_scan": (0.005, 20.0),
        "second_return_share": (0.02, 0.0005),
        "rain_clutter_share": (0.05, 0.0005),
        "median_range_m": (0.001, 0.01),
        "median_intensity": (0.01, 1.0),
        "mean_reflectivity": (0.002, 0.0),
    }


def test_the_backend_is_chosen_once_and_shared_by_the_echo_model() -> None:
    built = build_pipeline("VLP-16", "street", seed=1)
    physics = built.pipeline.physics
    want = CompiledBackend if fused.available() else NumpyBackend
    assert type(physics.backend) is want and physics.backend.kernels_device == "cpu"
    assert physics.echo.backend is physics.backend
    assert type(select_backend(twins=False)) is NumpyBackend
    assert select_backend("cuda", twins=True).label == "compiled+cuda"
    numpy_run = build_pipeline("VLP-16", "street", seed=1, backend=NumpyBackend()).pipeline
    assert numpy_run.physics.echo.backend is numpy_run.physics.backend
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        backend_named("tpu")


def test_a_compiled_backend_takes_the_numpy_operation_where_its_twin_cannot() -> None:
    """float64 ranges (not what the compiled step takes): the NumPy values, from either backend."""
    physics = build_pipeline("VLP-16", "street", seed=1).pipeline.physics
    rng = np.random.default_rng(0)
    r = rng.uniform(1, 80, 500)
    cos = rng.uniform(0, 1, 500).astype(np.float32)
    mat = rng.integers(0, len(physics.materials.diffuse), 500).astype(np.int16)
    t = np.ones(500, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = CompiledBackend().echo_power(physics.echo, r, cos, mat, t)
        b = NumpyBackend().echo_power(physics.echo, r, cos, mat, t)
    assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()


def test_osi_takes_the_world_from_the_capabilities_not_the_class() -> None:
    """A source that is no WorldSource but states ``world_truth`` gives OSI its world; one that does
    not state it gets the bridge's ego-only ground truth, with the warning."""
    from rt_lidar.osi.encode import FrameEncoder

    built = build_pipeline("VLP-16", "street", seed=1)
    inner = built.pipeline.source

    class Wrapped:
        def __init__(self, truth: bool) -> None:
            self._truth = truth

        @property
        def capabilities(self) -> Capabilities:
            return dataclasses.replace(inner.capabilities, world_truth=self._truth)

        def __getattr__(self, name: str) -> object:
            return getattr(inner, name)

        def __setattr__(self, name: str, value: object) -> None:
            if name == "_truth":
                object.__setattr__(self, name, value)
            else:
                setattr(inner, name, value)

    mount = (0.0, 0.0, 1.8, 1.0, 0.0, 0.0, 0.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built.pipeline.source = Wrapped(True)  # type: ignore[assignment]
        enc = FrameEncoder(built.pipeline, mount)
        assert enc.world is built.world and inner.keep_normals
        built.pipeline.source = Wrapped(False)  # type: ignore[assignment]
        assert FrameEncoder(built.pipeline, mount).world is None
    assert any("over the bridge" in str(w.message) for w in caught)
