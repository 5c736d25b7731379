"""The compiled steps of WorldSource (``rt_lidar.pipeline._source_steps``) give its NumPy code's bits: the
first-surface fields on whole frames of the street (cars' windows: rays that go on behind glass) and on
odd values, the rotated ray directions and the interpolated poses."""

from __future__ import annotations

import numpy as np
import pytest
from scenes import panel

from rt_lidar.pipeline import source_steps
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge.world import Pose, RayHits, Scene, StaticTrajectory

needs_compiled = pytest.mark.skipif(
    source_steps._c is None, reason="the _source_steps extension was not built"
)

FIELDS = (
    "range_m",
    "cos_incidence",
    "material",
    "segment",
    "glass_range_m",
    "glass_cos",
    "glass_material",
    "glass_segment",
    "glass_transmission",
)


def _frames(compiled: bool) -> list[Hits]:
    source_steps.enabled = compiled
    try:
        built = build_pipeline("HDL-64E", "street", seed=0)
        preset, source = built.preset, built.pipeline.source
        out = []
        for k in range(3):
            t0, t1 = k * 50_000_000, (k + 1) * 50_000_000
            out.append(source.hits(firings_between(preset, t0, t1), t0, t1))
        return out
    finally:
        source_steps.enabled = True


@needs_compiled
def test_whole_frames_are_the_numpy_fields() -> None:
    fast, slow = _frames(True), _frames(False)
    for a, b in zip(fast, slow, strict=True):
        assert int((a.glass_material >= 0).sum()) > 100  # rays that passed glass
        for name in FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), name


@needs_compiled
def test_odd_values_are_the_numpy_fields() -> None:
    """Misses, NaN normals, glass and no material, against the NumPy lines themselves."""
    from rt_lidar.pipeline.sources import _dot_f32

    rng = np.random.default_rng(4)
    n = 5000
    dist = rng.uniform(0.1, 100.0, n).astype(np.float32)
    dist[rng.integers(0, n, 500)] = np.inf
    dist[rng.integers(0, n, 5)] = np.nan
    normal = rng.normal(0.0, 1.0, (n, 3)).astype(np.float32)
    normal[rng.integers(0, n, 5)] = np.nan
    dirs = rng.normal(0.0, 1.0, (n, 3)).astype(np.float32)
    material = rng.integers(-1, 6, n).astype(np.int16)
    segment = rng.integers(0, 300, n).astype(np.uint32)
    transmission = np.array([0.0, 0.9, 0.0, 0.5, 0.0, 1.0], np.float32)
    rh = RayHits(dist, normal, segment, material, np.zeros(n, np.int32))
    got = source_steps.first_surfaces(rh, dirs, transmission)
    assert got is not None
    fields, active = got
    hit = np.isfinite(dist)
    t = np.take(transmission, np.maximum(material, 0))
    passes = hit & (t > 0)
    opaque = hit & ~passes
    cosi = np.abs(_dot_f32(normal, dirs))
    want_active = np.flatnonzero(passes)
    rng_m = dist.copy()
    rng_m[want_active] = np.inf
    mat = material.copy()
    mat[want_active] = -1
    seg = segment.copy()
    seg[want_active] = 0
    g = [
        np.full(n, np.inf, np.float32),
        np.zeros(n, np.float32),
        np.full(n, -1, np.int16),
        np.zeros(n, np.uint32),
    ]
    g[0][want_active], g[1][want_active] = dist[want_active], cosi[want_active]
    g[2][want_active], g[3][want_active] = material[want_active], segment[want_active]
    g_trans = np.ones(n, np.float32)
    g_trans[want_active] = t[want_active] ** 2
    want = (rng_m, np.where(opaque, cosi, np.float32(0)), mat, seg, *g, g_trans)
    assert active.tolist() == want_active.tolist()
    for x, y in zip(fields, want, strict=True):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
    with pytest.raises(IndexError):
        source_steps.first_surfaces(rh, dirs, transmission[:3])


@needs_compiled
@pytest.mark.parametrize("broadcast", [False, True])
def test_rotated_directions_are_the_numpy_s(broadcast: bool) -> None:
    from rt_lidar.pipeline.sources import _rotate_f32

    rng = np.random.default_rng(8)
    n = 20_000
    q = rng.normal(0.0, 1.0, (n, 4))
    q = (q / np.linalg.norm(q, axis=1)[:, None]).astype(np.float32)
    if broadcast:
        q = np.broadcast_to(q[:1], (n, 4))
    v = rng.normal(0.0, 1.0, (n, 3)).astype(np.float32)
    v[5] = [np.nan, 0.0, -0.0]
    got = _rotate_f32(q, v)
    source_steps.enabled = False
    try:
        want = _rotate_f32(q, v)
    finally:
        source_steps.enabled = True
    assert got.tobytes() == want.tobytes()


def _scans(compiled: bool, preset: str) -> list[tuple[bytes, int, int]]:
    source_steps.enabled = compiled
    try:
        pipe = build_pipeline(preset, "street", seed=0).pipeline
        scans = []
        while len(scans) < 3:
            scans += pipe.step()
        return [(s.points.tobytes(), s.start_ns, s.dropped) for s in scans]
    finally:
        source_steps.enabled = True


@needs_compiled
@pytest.mark.parametrize("preset", ["HDL-64E", "VLP-16"])
def test_joined_scans_are_the_numpy_s(preset: str) -> None:
    assert _scans(True, preset) == _scans(False, preset)


@needs_compiled
def test_joined_odd_parts_are_the_numpy_s() -> None:
    from rt_lidar.points import POINT_DTYPE, concat_points

    rng = np.random.default_rng(3)
    parts = [np.zeros(n, POINT_DTYPE) for n in (7, 0, 5000, 1)]
    for p in parts:
        p["t"] = rng.integers(-(2**63), 2**63 - 1, p.size, dtype=np.int64)
        p["return_id"] = rng.integers(0, 3, p.size)
        p["x"] = rng.normal(size=p.size)
    for start in (0, 987_654_321, -(2**63), 2**63 - 1):  # NumPy's int64 subtraction wraps
        joined = source_steps.join_scan(parts, start)
        assert joined is not None
        want = concat_points(parts).copy()
        want["t"] -= start
        assert joined[0].tobytes() == want.tobytes()
        assert joined[1] == np.count_nonzero(want["return_id"] == 0)
    other = np.zeros(3, [("t", "<i8"), ("x", "<f4")])  # no return_id: the NumPy code
    assert source_steps.join_scan([other, other], 0) is None
    assert source_steps.join_scan(parts[:1], 0) is None  # one part: shifted in place by the NumPy code
    size, t_at, rid_at = (
        parts[0].dtype.itemsize,
        parts[0].dtype.fields["t"][1],
        parts[0].dtype.fields["return_id"][1],
    )
    with pytest.raises(ValueError, match="out has"):
        source_steps._c.join_scan([parts[0].view(np.uint8)], np.zeros(3, np.uint8), size, t_at, rid_at, 0)
    with pytest.raises(ValueError, match="not whole records"):
        source_steps._c.join_scan(
            [np.zeros(size - 1, np.uint8)], np.zeros(size - 1, np.uint8), size, t_at, rid_at, 0
        )


def _stacked_panes() -> Scene:
    """Glass panes one behind another (rays cross one to four of them), a wall behind some, and one near
    the VLP-16's range limit behind others (oblique rays through the panes reach it past the limit)."""
    names = list(Scene(objects=[]).material_names)
    objs = [
        panel(
            f"pane{k}",
            "glass",
            names,
            (4.0 + 1.5 * k, 0.0, 0.0),
            (0.3, 4.0 - 0.8 * k, 0.0),
            (0, 0, 3.0),
            3 + k,
        )
        for k in range(4)
    ]
    objs.append(panel("wall", "concrete", names, (11.0, 2.0, 0.0), (0, 2.5, 0), (0, 0, 3.0), 9))
    objs.append(panel("far", "concrete", names, (99.0, -30.0, 0.0), (0, 30.0, 0), (0, 0, 60.0), 10))
    ego = StaticTrajectory(Pose.identity())
    return Scene(objects=objs, material_names=names, ego=ego, sensor_mount=Pose.identity())


@needs_compiled
@pytest.mark.parametrize("preset", ["VLP-16", "HDL-64E"])
def test_rays_behind_several_panes_are_the_numpy_fields(preset: str) -> None:
    def cast(compiled: bool) -> Hits:
        source_steps.enabled = compiled
        try:
            built = build_pipeline(preset, _stacked_panes(), seed=0)
            firings = firings_between(built.preset, 0, 100_000_000)
            return built.pipeline.source.hits(firings, 0, 100_000_000)
        finally:
            source_steps.enabled = True

    got, want = cast(True), cast(False)
    for name in FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
    behind = got.glass_transmission < 1
    assert np.unique(got.glass_transmission[behind]).size >= 3  # one, two, three... panes crossed
    assert np.isin([9, 10], got.segment).all()  # the wall behind the panes and the far one are hit


@pytest.mark.parametrize("seed", range(6))
def test_rows_kept_is_isin_of_an_ascending_subset(seed: int) -> None:
    """The rays still behind glass after a round, by binary search, are np.isin's mask (empty, whole and
    random subsets, rows with gaps)."""
    from rt_lidar.pipeline.sources import rows_kept

    rng = np.random.default_rng(seed)
    before = np.flatnonzero(rng.random(500) < 0.3)
    for share in (0.0, 0.1, 0.7, 1.0):
        kept = before[rng.random(before.size) < share]
        got = rows_kept(before, kept)
        assert got.dtype == bool and got.shape == before.shape
        np.testing.assert_array_equal(got, np.isin(before, kept, assume_unique=True))
    assert rows_kept(before[:0], before[:0]).shape == (0,)
