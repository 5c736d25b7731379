"""The compiled mirror rays off the rays' first panes (``_source_steps.glass_mirror_rays`` and
``mirror_hits``, the ghosts behind glass) give the NumPy operations' bits: on random rays and normals
(not unit, facing either side), on hits at and beyond the sensor's range, and on whole street frames
(the ``glass_mirror_*`` fields of the hits)."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.backend.source_ops import CompiledSourceOps, NumpySourceOps
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline import source_steps
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge.world import RayHits

needs_compiled = pytest.mark.skipif(
    source_steps._c is None, reason="the _source_steps extension was not built"
)

EPS = np.float32(1e-3)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _rays(n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    origins = rng.normal(0, 50, (n, 3)).astype(np.float32)
    dirs = rng.normal(0, 1, (n, 3)).astype(np.float32)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True).astype(np.float32)
    normal = (rng.normal(0, 1, (n, 3)) * rng.uniform(0.2, 3.0, (n, 1))).astype(np.float32)
    distance = rng.uniform(0.5, 120.0, n).astype(np.float32)
    rows = np.sort(rng.choice(n, n // 3, replace=False)).astype(np.int64)
    return origins, dirs, rows, distance, normal


@needs_compiled
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_glass_mirror_rays_are_the_numpy_rays(seed: int) -> None:
    origins, dirs, rows, distance, normal = _rays(20_000, seed)
    got = source_steps.glass_mirror_rays(origins, dirs, rows, distance, normal, EPS)
    assert got is not None
    want = NumpySourceOps().glass_mirror_rays(origins, dirs, rows, distance, normal, EPS)
    for a, b in zip(got, want, strict=True):
        assert _same(a, b)
    d = dirs[rows]
    assert (np.einsum("ij,ij->i", d, normal[rows]) > 0).any() and (
        np.einsum("ij,ij->i", d, normal[rows]) < 0
    ).any()


@needs_compiled
def test_glass_mirror_rays_refuse_other_types_and_bad_rows() -> None:
    origins, dirs, rows, distance, normal = _rays(100, 3)
    assert (
        source_steps.glass_mirror_rays(origins.astype(np.float64), dirs, rows, distance, normal, EPS) is None
    )
    assert source_steps.glass_mirror_rays(origins, dirs, rows.astype(np.int32), distance, normal, EPS) is None
    with pytest.raises(IndexError, match="rows"):
        source_steps.glass_mirror_rays(origins, dirs, np.array([0, 100], np.int64), distance, normal, EPS)
    got = CompiledSourceOps().glass_mirror_rays(origins.astype(np.float64), dirs, rows, distance, normal, EPS)
    want = NumpySourceOps().glass_mirror_rays(origins.astype(np.float64), dirs, rows, distance, normal, EPS)
    assert all(_same(a, b) for a, b in zip(got, want, strict=True))


def _mirror_hits_case(seed: int, max_range: float) -> tuple[int, np.ndarray, np.ndarray, RayHits, np.ndarray]:
    rng = np.random.default_rng(seed)
    n, m = 5_000, 1_500
    rows = np.sort(rng.choice(n, m, replace=False)).astype(np.int64)
    dist = rng.uniform(1.0, 100.0, m).astype(np.float32)
    hit_d = rng.uniform(0.0, 250.0, m).astype(np.float32)
    hit_d[::7] = np.inf  # misses
    # totals exactly at the range (in float32) and one float32 step either side of it
    edge = np.float32(max_range)
    hit_d[1::11] = edge - dist[1::11]
    hit_d[2::11] = np.nextafter(edge, np.float32(np.inf)) - dist[2::11]
    hit_d[3::11] = np.nextafter(edge, np.float32(0)) - dist[3::11]
    normal = rng.normal(0, 1, (m, 3)).astype(np.float32)
    mdir = rng.normal(0, 1, (m, 3)).astype(np.float32)
    mh = RayHits(
        hit_d,
        normal,
        rng.integers(1, 2**31, m).astype(np.uint32),
        rng.integers(0, 40, m).astype(np.int16),
        rng.integers(0, 100, m).astype(np.int32),
    )
    return n, rows, dist, mh, mdir


@needs_compiled
@pytest.mark.parametrize("max_range", [300.0, 245.3, 120.7])
def test_mirror_hits_are_the_numpy_fields(max_range: float) -> None:
    n, rows, dist, mh, mdir = _mirror_hits_case(int(max_range), max_range)
    got = source_steps.mirror_hits(n, rows, dist, mh, mdir, max_range)
    assert got is not None
    want = NumpySourceOps().mirror_hits(n, rows, dist, mh, mdir, max_range)
    for a, b in zip(got, want, strict=True):
        assert _same(a, b)
    assert np.isfinite(want[0]).sum() > 100 and (want[2] == -1).sum() > n // 2


@needs_compiled
def test_mirror_hits_of_no_rays_and_refusals() -> None:
    n, rows, dist, mh, mdir = _mirror_hits_case(5, 300.0)
    assert source_steps.mirror_hits(n, rows, dist, mh, mdir, np.float64(300.0)) is None  # not a float
    none = RayHits(
        *(
            np.zeros((0, 3) if i == 1 else 0, t)
            for i, t in enumerate((np.float32, np.float32, np.uint32, np.int16, np.int32))
        )
    )
    empty = np.zeros(0, np.int64)
    got = source_steps.mirror_hits(
        7, empty, np.zeros(0, np.float32), none, np.zeros((0, 3), np.float32), 300.0
    )
    assert got is not None
    want = NumpySourceOps().mirror_hits(
        7, empty, np.zeros(0, np.float32), none, np.zeros((0, 3), np.float32), 300.0
    )
    assert all(_same(a, b) for a, b in zip(got, want, strict=True))


MIRROR_FIELDS = ("glass_mirror_range_m", "glass_mirror_cos", "glass_mirror_material", "glass_mirror_segment")


def _vls_frames(compiled: bool) -> list[Hits]:
    source_steps.enabled = compiled
    try:
        cfg = PhysicsConfig(beam=BeamConfig(sub_rays=1, return_mode="dual"))
        built = build_pipeline("VLS-128", build_world("street", seed=3), seed=3, physics=cfg)
        preset, source = built.preset, built.pipeline.source
        out = []
        for k in range(2):
            t0, t1 = k * 50_000_000, (k + 1) * 50_000_000
            out.append(source.hits(firings_between(preset, t0, t1), t0, t1))
        return out
    finally:
        source_steps.enabled = True


@needs_compiled
def test_street_frames_mirror_fields_are_the_numpy_fields() -> None:
    for a, b in zip(_vls_frames(True), _vls_frames(False), strict=True):
        assert int(np.isfinite(b.glass_mirror_range_m).sum()) > 1000  # ghosts behind the street's glass
        for name in MIRROR_FIELDS:
            assert _same(getattr(a, name), getattr(b, name)), name
