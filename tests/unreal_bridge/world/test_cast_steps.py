"""The compiled steps of World.cast (``_cast_steps.c``) give the NumPy versions' bits: the moving-object
ray transform keeps the same rays and the same float32 origins and directions in the object frame, and
whole casts of the street (moving cars, glass, misses) are the same with and without the steps."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.unreal_bridge.world import moving as moving_module
from rt_lidar.unreal_bridge.world import world as world_module
from rt_lidar.unreal_bridge.world.moving import _object_frame_rays
from rt_lidar.unreal_bridge.world.pose import quat_from_yaw, quat_multiply

needs_compiled = pytest.mark.skipif(
    world_module._steps is None, reason="the _cast_steps extension was not built"
)


def _case(rng: np.random.Generator, n: int, k: int) -> tuple[np.ndarray, ...]:
    o = (rng.normal(0.0, 0.3, (n, 3)) + np.array([2.0, -1.0, 1.7])).astype(np.float32)
    d = rng.normal(0.0, 1.0, (n, 3))
    d /= np.linalg.norm(d, axis=1)[:, None]
    d = d.astype(np.float32)
    d[rng.integers(0, n, 5), rng.integers(0, 3, 5)] = 0.0  # rays in a slab's plane: inf and NaN slabs
    d[rng.integers(0, n, 2)] = [1.0, 0.0, 0.0]
    cand = np.sort(rng.choice(n, k, replace=False)).astype(np.intp)
    yaw = rng.uniform(-np.pi, np.pi, k)
    tilt = quat_multiply(quat_from_yaw(yaw), [np.cos(0.01), np.sin(0.01), 0.0, 0.0])
    p = rng.normal(0.0, 4.0, (k, 3)) + np.array([9.0, 0.0, 0.0])
    return o, d, cand, p, tilt


@needs_compiled
@pytest.mark.parametrize("seed", range(6))
def test_compiled_and_numpy_give_the_same_bits(seed: int) -> None:
    rng = np.random.default_rng(seed)
    o, d, cand, p, q = _case(rng, 4000, 1500)
    box = (np.array([-2.4, -1.0, 0.0], np.float32), np.array([2.4, 1.0, 1.6], np.float32))
    c_keep, c_ol, c_dl = _object_frame_rays(o, d, cand, p, q, box, compiled=True)
    n_keep, n_ol, n_dl = _object_frame_rays(o, d, cand, p, q, box, compiled=False)
    assert 10 < c_keep.size < cand.size  # some rays meet the box, some miss it
    assert c_keep.tolist() == n_keep.tolist()
    assert c_ol.tobytes() == n_ol.tobytes() and c_dl.tobytes() == n_dl.tobytes()


@needs_compiled
def test_compiled_edge_cases() -> None:
    """No candidates; a ray from inside the box; a zero direction; a row that is not one is refused."""
    box = (np.array([-1.0, -1.0, -1.0], np.float32), np.array([1.0, 1.0, 1.0], np.float32))
    o = np.array([[0.0, 0.0, 0.0], [5.0, 0.0, 0.0], [5.0, 0.0, 0.0]], np.float32)
    d = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    q = np.tile([1.0, 0.0, 0.0, 0.0], (3, 1))
    p = np.zeros((3, 3))
    for cand in (np.arange(0), np.arange(3)):
        got = _object_frame_rays(o, d, cand, p[: cand.size], q[: cand.size], box, compiled=True)
        want = _object_frame_rays(o, d, cand, p[: cand.size], q[: cand.size], box, compiled=False)
        assert got[0].tolist() == want[0].tolist()
        assert got[1].tobytes() == want[1].tobytes() and got[2].tobytes() == want[2].tobytes()
    with pytest.raises(IndexError, match="cand"):
        _object_frame_rays(o, d, np.array([0, 7]), p[:2], q[:2], box, compiled=True)
    with pytest.raises(ValueError, match="q must be"):
        _object_frame_rays(o, d, np.arange(3), p, q[:2], box, compiled=True)


def _street_rays(scans: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from rt_lidar.pipeline.pose_samples import _interpolated_sensor_poses
    from rt_lidar.pipeline.sources import _rotate_f32
    from rt_lidar.sensor.presets import load_preset
    from rt_lidar.sensor.scan_pattern import firings_between
    from rt_lidar.unreal_bridge.world import World, street_scene

    world = World(street_scene(seed=0))
    preset = load_preset("HDL-64E")
    firings = firings_between(preset, 1_000_000_000, 1_000_000_000 + int(scans * 1e8))
    pos, quat = _interpolated_sensor_poses(world, firings.t_ns, None)
    dirs = _rotate_f32(quat.astype(np.float32), firings.directions())
    return pos.astype(np.float32), dirs, firings.t_ns.astype(np.float64) * 1e-9


@needs_compiled
@pytest.mark.parametrize("packets", [True, False])
def test_whole_casts_are_the_same_without_the_compiled_steps(
    monkeypatch: pytest.MonkeyPatch, packets: bool
) -> None:
    from rt_lidar.unreal_bridge.world import World, raycast, street_scene

    o, d, t = _street_rays()
    if not packets:  # embreex's own rtcIntersect1: its faces come as they come
        monkeypatch.setattr(raycast, "embree_packets", lambda: None)
    world = World(street_scene(seed=0))
    assert world._static is not None and world._static.uses_packets == packets  # type: ignore[attr-defined]
    runs = {}
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(world_module, "_steps", None)
            monkeypatch.setattr(moving_module, "_steps", None)
        runs[compiled] = (world.cast(o, d, t, 120.0, threads=1), world.cast(o[::7], d[::7], 1.02, 120.0))
    for a, b in zip(runs[True], runs[False], strict=True):
        assert np.isfinite(a.distance).mean() > 0.5 and (a.object_index >= 0).any()
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes()


@needs_compiled
def test_bounds_and_cone_candidates() -> None:
    """The origins' bounds are NumPy's min and max (NaN included); the cone keeps the rays NumPy's dot
    product keeps, but for rays within float32 rounding of its edge."""
    steps = world_module._steps
    assert steps is not None
    rng = np.random.default_rng(2)
    o = rng.normal(0.0, 5.0, (10_001, 3)).astype(np.float32)
    assert steps.bounds(o) == (*o.min(axis=0).tolist(), *o.max(axis=0).tolist())
    o[77, 1] = np.nan
    got = steps.bounds(o)
    assert np.isnan(got[1]) and np.isnan(got[4]) and got[0] == float(o[:, 0].min())
    with pytest.raises(ValueError, match="no rows"):
        steps.bounds(np.zeros((0, 3), np.float32))
    d = rng.normal(0.0, 1.0, (50_000, 3))
    d = (d / np.linalg.norm(d, axis=1)[:, None]).astype(np.float32)
    axis = np.array([0.6, 0.0, 0.8], np.float32)
    cmin = np.float32(0.9)
    out = np.empty(d.shape[0], np.int64)
    kept = set(out[: steps.cone_candidates(d, axis, np.array([cmin], np.float32), out)].tolist())
    dot = d.astype(np.float64) @ axis.astype(np.float64)
    want = set(np.flatnonzero(dot >= cmin).tolist())
    near_edge = set(np.flatnonzero(np.abs(dot - cmin) < 1e-6).tolist())
    assert len(want) > 1000 and kept ^ want <= near_edge


def test_a_batch_casts_as_its_halves_and_on_one_thread_as_on_two() -> None:
    """The moving cars are cast once over the whole batch after the static slices: per-ray times on
    the street give the same bytes on one thread, on two, and as two halves cast apart."""
    from rt_lidar.unreal_bridge.world import World, street_scene

    o, d, t = _street_rays()
    world = World(street_scene(seed=0))
    one, two = world.cast(o, d, t, 120.0, threads=1), world.cast(o, d, t, 120.0, threads=2)
    h = o.shape[0] // 2
    a = World(street_scene(seed=0)).cast(o[:h], d[:h], t[:h], 120.0)
    b = World(street_scene(seed=0)).cast(o[h:], d[h:], t[h:], 120.0)
    names = np.array(world.objects)
    assert any(x.startswith("car_moving_") for x in names[one.object_index[one.object_index >= 0]].tolist())
    for x, y, lo, hi in zip(one, two, a, b, strict=True):
        assert x.tobytes() == y.tobytes() == np.concatenate([lo, hi]).tobytes()


@needs_compiled
def test_merging_a_moving_object_s_hits_refuses_bad_rows() -> None:
    steps = world_module._steps
    assert steps is not None
    n, m = 5, 2
    dist, normal = np.full(n, 9.0, np.float32), np.zeros((n, 3), np.float32)
    material, owner = np.full(n, -1, np.int16), np.full(n, -1, np.int32)
    q = np.tile([1.0, 0.0, 0.0, 0.0], (m, 1))
    hd, hn, limit = np.ones(m, np.float32), np.ones((m, 3), np.float32), np.full(m, 9.0, np.float32)
    fm = np.array([3, 4], np.int16)
    args = (q, hd, np.array([0, 1]), hn, limit, fm, 7, dist, normal, material, owner)
    assert steps.merge_hits(np.array([1, 4]), *args) == 2
    assert owner.tolist() == [-1, 7, -1, -1, 7] and material.tolist() == [-1, 3, -1, -1, 4]
    before = [a.copy() for a in (dist, normal, material, owner)]
    for bad_cand, bad_face in ((np.array([1, 5]), np.array([0, 1])), (np.array([1, 2]), np.array([0, 2]))):
        with pytest.raises(IndexError, match="merge_hits"):
            steps.merge_hits(bad_cand, q, hd, bad_face, hn, limit, fm, 7, dist, normal, material, owner)
    assert all(
        x.tobytes() == y.tobytes() for x, y in zip(before, (dist, normal, material, owner), strict=True)
    )


@needs_compiled
def test_sphere_candidates_keep_every_ray_that_meets_the_sphere() -> None:
    """The cull for scattered origins (rays behind glass), in float64: every ray whose forward half meets
    the sphere is kept, none that passes it by more than the slack, and the rays kept are those of the
    float32 NumPy version but for rays at the slack's edge."""
    steps = world_module._steps
    assert steps is not None
    rng = np.random.default_rng(12)
    n, center, radius = 60_000, np.array([20.0, -3.0, 1.0]), 2.5
    o = rng.uniform(-30.0, 30.0, (n, 3)).astype(np.float32)
    d = rng.normal(size=(n, 3))
    half = n // 2  # half the rays aimed near the sphere: some meet it, some pass just by
    d[:half] = center + rng.normal(0.0, 2.0, (half, 3)) - o[:half]
    d = (d / np.linalg.norm(d, axis=1)[:, None]).astype(np.float32)
    o[:50] = center + rng.uniform(-1.0, 1.0, (50, 3))  # origins inside the sphere: every direction
    r2 = radius * radius * 1.01 + 0.05
    out = np.empty(n, np.int64)
    kept = out[: steps.sphere_candidates(o, d, center, np.array([r2]), out)]
    oc = center - o.astype(np.float64)
    tca = np.einsum("ij,ij->i", oc, d.astype(np.float64))
    d2 = np.einsum("ij,ij->i", oc, oc) - tca * tca
    meets = (d2 <= radius * radius) & (tca + np.sqrt(np.maximum(radius * radius - d2, 0.0)) >= 0.0)
    assert int(meets.sum()) > 1000 and set(range(50)) <= set(kept.tolist())
    assert set(np.flatnonzero(meets).tolist()) <= set(kept.tolist())
    far = (d2 > r2 * 1.001) | (tca + np.sqrt(np.maximum(r2 - d2, 0.0)) < -1e-3)
    assert not far[kept].any()
    od, oo = np.einsum("ij,ij->i", o, d), np.einsum("ij,ij->i", o, o)
    numpy_kept = set(moving_module.MovingObjects._cull_rays(radius, center, o, d, od, oo).tolist())
    edge = np.abs(d2 - r2) < 1e-2 * r2
    assert set(kept.tolist()) ^ numpy_kept <= set(np.flatnonzero(edge).tolist())
