"""Moving objects in World.cast: however the rays are culled (a cone from close origins, a sphere per ray
from scattered ones, a box test when an origin is inside the bounding sphere), a moving object posed at t
is hit exactly where the same mesh, placed there as static geometry, is hit."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.unreal_bridge.world import (
    RAY_CASTERS,
    ConstantVelocity,
    Pose,
    Scene,
    StaticTrajectory,
    World,
    WorldError,
    plane_scene,
)
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.moving import _meets_box

T = 3.0
MOVING = ConstantVelocity(Pose.from_xyz_rpy(4.0, -6.0, 0.0, yaw=0.3), (0.0, 2.0, 0.0))


def _car_scene(trajectory: ConstantVelocity | StaticTrajectory) -> Scene:
    b = MeshBuilder()
    b.box((0.0, 0.0, 0.75), (4.5, 1.8, 1.5), "car_paint_red")
    b.box((0.3, 0.0, 1.8), (2.0, 1.6, 0.6), "car_paint_red", yaw=0.1)
    car = b.build("car", 9, trajectory)
    return Scene(objects=[*plane_scene(40.0).objects, car], sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, 1.8))


def _worlds(caster: str) -> tuple[World, World]:
    moving = World(_car_scene(MOVING), caster=caster)
    static = World(_car_scene(StaticTrajectory(MOVING.pose_at(T))), caster=caster)
    return moving, static


def _sphere_rays(n: int, origin: np.ndarray, spread: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    o = origin + rng.uniform(-spread, spread, (n, 3))
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return o.astype(np.float32), d.astype(np.float32)


def _assert_same_hits(a: World, b: World, o: np.ndarray, d: np.ndarray) -> None:
    ha, hb = a.cast(o, d, T, 100.0), b.cast(o, d, T, 100.0)
    names_a = np.array([a.objects[i] if i >= 0 else "" for i in ha.object_index])
    names_b = np.array([b.objects[i] if i >= 0 else "" for i in hb.object_index])
    assert (names_a == "car").sum() >= 20  # the car is really in the way
    same = names_a == names_b
    assert same.mean() > 0.999  # float32 grazing hits on an edge may go either way
    np.testing.assert_allclose(ha.distance[same], hb.distance[same], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ha.normal[same], hb.normal[same], atol=1e-3)
    np.testing.assert_array_equal(ha.segment[same], hb.segment[same])


@pytest.mark.parametrize("caster", sorted(RAY_CASTERS))
def test_close_origins_inside_the_bounding_sphere(caster: str) -> None:
    """A lidar right beside the car (inside its bounding sphere): the box test decides, not the sphere."""
    moving, static = _worlds(caster)
    n = 40_000 if caster == "embree" else 3_000
    o, d = _sphere_rays(n, MOVING.pose_at(T).position + np.array([0.0, 2.4, 1.8]), 0.2, seed=1)
    _assert_same_hits(moving, static, o, d)


@pytest.mark.parametrize("caster", sorted(RAY_CASTERS))
def test_close_origins_outside_the_sphere(caster: str) -> None:
    """A lidar 12 m away, its origins spread over 0.5 m as in one sim frame: the cone test culls."""
    moving, static = _worlds(caster)
    n = 40_000 if caster == "embree" else 12_000
    o, d = _sphere_rays(n, MOVING.pose_at(T).position + np.array([-12.0, 0.0, 1.8]), 0.25, seed=2)
    _assert_same_hits(moving, static, o, d)


def test_scattered_origins() -> None:
    """Origins all over the scene (rays continued behind glass): the per-ray sphere test culls."""
    moving, static = _worlds("embree")
    o, d = _sphere_rays(40_000, MOVING.pose_at(T).position, 15.0, seed=3)
    _assert_same_hits(moving, static, o, d)


def test_meets_box_matches_a_dense_march() -> None:
    rng = np.random.default_rng(4)
    lo, hi = np.array([-2.0, -1.0, 0.0], np.float32), np.array([2.0, 1.0, 1.5], np.float32)
    o = rng.uniform(-6, 6, (4000, 3)).astype(np.float32)
    d = rng.normal(size=(4000, 3))
    d[:500, 0] = 0.0  # rays parallel to a slab
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    d = d.astype(np.float32)
    got = np.zeros(o.shape[0], bool)
    got[_meets_box(o, d, lo, hi)] = True
    steps = np.linspace(0.0, 20.0, 8001)[None, :, None]
    p = o[:, None, :] + steps * d[:, None, :]
    marched = np.all((p >= lo - 1e-3) & (p <= hi + 1e-3), axis=2).any(axis=1)
    # a march of 2.5 mm steps can miss a corner the exact test clips, never the other way round
    assert np.all(got[marched])
    assert (got & ~marched).sum() <= 5


@pytest.mark.parametrize("caster", sorted(RAY_CASTERS))
def test_per_ray_max_distance(caster: str) -> None:
    v = np.array([[5, -1, -1], [5, 1, -1], [5, 0, 1]], np.float32)
    f = np.array([[0, 1, 2]], np.int32)
    c = RAY_CASTERS[caster](v, f)
    o = np.zeros((3, 3), np.float32)
    d = np.tile(np.array([1, 0, 0], np.float32), (3, 1))
    dist, face, _ = c.intersect(o, d, np.array([4.0, 6.0, np.inf], np.float32))
    np.testing.assert_array_equal(face, [-1, 0, 0])
    np.testing.assert_allclose(dist, [np.inf, 5.0, 5.0])
    with pytest.raises(WorldError, match="2 max_distance values for 3 rays"):
        c.intersect(o, d, np.array([1.0, 2.0], np.float32))
    with pytest.raises(WorldError, match="NaN"):
        c.intersect(o, d, np.array([1.0, np.nan, 2.0], np.float32))


def test_one_thread_casts_the_same_as_two() -> None:
    """``threads=1`` (a camera drawn on an idle-class thread keeps the whole cast at its own priority)."""
    moving, _ = _worlds("embree")
    o, d = _sphere_rays(40_000, MOVING.pose_at(T).position + np.array([0.0, 2.4, 1.8]), 0.2, seed=5)
    one, two = moving.cast(o, d, T, 100.0, threads=1), moving.cast(o, d, T, 100.0)
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_batch_within_an_earlier_batchs_times_casts_as_it_would_alone() -> None:
    """The rays that go on behind glass reuse the spheres swept over the whole frame's times (larger
    than their own): every hit is the one a fresh world gives them, bit for bit."""
    rng = np.random.default_rng(11)
    o, d = _sphere_rays(4000, np.array([0.0, 0.0, 1.8]), 0.05, 12)
    t = np.sort(rng.uniform(1.0, 5.0, o.shape[0]))
    warm = World(_car_scene(MOVING))
    warm.cast(o, d, t, 100.0)  # the whole frame first: its spheres are kept
    sub = np.flatnonzero((t > 2.0) & (t < 3.5))
    got = warm.cast(o[sub], d[sub], t[sub], 100.0)
    fresh = World(_car_scene(MOVING)).cast(o[sub], d[sub], t[sub], 100.0)
    assert (np.array(warm.objects)[got.object_index[got.object_index >= 0]] == "car").sum() >= 20
    for field in ("distance", "normal", "material", "object_index", "segment"):
        assert getattr(got, field).tobytes() == getattr(fresh, field).tobytes(), field


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, "shape"])
def test_per_ray_times_must_be_finite_one_a_ray(bad: float | str) -> None:
    moving, _ = _worlds("embree")
    o, d = _sphere_rays(50, np.zeros(3), 0.1, seed=6)
    t = np.full(50, T)
    if bad == "shape":
        t = t[:49]
    else:
        t[17] = bad
    with pytest.raises(WorldError, match="finite per-ray times"):
        moving.cast(o, d, t, 100.0)


TURNING = ConstantVelocity(Pose.from_xyz_rpy(4.0, -6.0, 0.0, yaw=0.3), (1.0, 9.0, 0.0), yaw_rate=0.8)


@pytest.mark.parametrize(
    ("origin", "spread", "kept"),
    [((0.0, 2.4, 1.8), 0.6, 0.7), ((-12.0, 0.0, 1.8), 0.6, 0.7), ((0.0, 0.0, 0.0), 15.0, 0.8)],
    ids=["beside-the-car", "a-lidar-12-m-away", "scattered-behind-glass"],
)
def test_the_swept_box_cull_drops_rays_and_changes_no_hit(
    monkeypatch: pytest.MonkeyPatch, origin: tuple[float, ...], spread: float, kept: float
) -> None:
    """A turning car, rays at per-ray times over a 50 ms frame from origins beside it (inside its
    bounding sphere), 12 m away (the cone cull first) and scattered: with the swept-box cull the hits
    are the same bit for bit, and fewer rays were taken into the car's frame."""
    from rt_lidar.unreal_bridge.world import moving

    if moving._steps is None:
        pytest.skip("the compiled cast steps were not built (the box cull is theirs)")
    world = World(_car_scene(TURNING), caster="embree")
    o, d = _sphere_rays(60_000, TURNING.pose_at(T).position + np.array(origin), spread, seed=7)
    t = T + np.sort(np.random.default_rng(8).uniform(0.0, 0.05, o.shape[0]))
    taken: list[int] = []
    into_frame = moving._object_frame_rays

    def counted(o, d, cand, *rest, **kw):  # type: ignore[no-untyped-def]
        taken.append(int(cand.shape[0]))
        return into_frame(o, d, cand, *rest, **kw)

    monkeypatch.setattr(moving, "_object_frame_rays", counted)

    def cast(box_cull: bool) -> tuple[bytes, ...]:
        world._moving.box_cull = box_cull
        world._moving._sweep_cache.clear()
        h = world.cast(o, d, t, 100.0)
        return tuple(
            np.ascontiguousarray(a).tobytes() for a in (h.distance, h.normal, h.material, h.object_index)
        )

    plain = cast(False)
    taken_plain, taken[:] = sum(taken), []
    culled = cast(True)
    car = world.objects.index("car")
    assert (np.frombuffer(plain[3], np.int32) == car).sum() >= 20  # the car is really in the way
    assert culled == plain
    assert sum(taken) < kept * taken_plain, (sum(taken), taken_plain)


def test_box_candidates_is_a_slab_test_from_each_origin() -> None:
    from rt_lidar.unreal_bridge.world import moving

    if moving._steps is None:
        pytest.skip("the compiled cast steps were not built")
    rng = np.random.default_rng(11)
    n = 20_000
    o = rng.uniform(-4.0, 4.0, (n, 3)).astype(np.float32)
    d = rng.normal(size=(n, 3))
    d[rng.random((n, 3)) < 0.1] = 0.0  # directions along an axis or a plane: zero components
    d[np.all(d == 0.0, axis=1)] = (1.0, 0.0, 0.0)
    d = (d / np.linalg.norm(d, axis=1, keepdims=True)).astype(np.float32)
    lo, hi = np.array([-1.0, -0.5, 0.0]), np.array([2.0, 0.5, 1.5])
    cand = np.sort(rng.choice(n, n // 2, replace=False)).astype(np.int64)
    out = np.empty(cand.size, np.int64)
    got = out[: moving._steps.box_candidates(o, d, cand, lo, hi, out)]
    oc, dc = o[cand].astype(np.float64), d[cand].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t1, t2 = (lo - oc) / dc, (hi - oc) / dc
    t_near = np.where(dc != 0, np.minimum(t1, t2), -np.inf).max(axis=1).clip(min=0.0)
    t_far = np.where(dc != 0, np.maximum(t1, t2), np.inf).min(axis=1)
    outside = ((dc == 0) & ((oc < lo) | (oc > hi))).any(axis=1)
    want = cand[(t_near <= t_far) & ~outside]
    inside = cand[np.all((oc >= lo) & (oc <= hi), axis=1)]
    assert np.array_equal(got, want)
    assert np.isin(inside, got).all() and 0 < got.size < cand.size
    with pytest.raises(IndexError, match="outside the 20000 rays"):
        moving._steps.box_candidates(o, d, np.array([0, n], np.int64), lo, hi, np.empty(2, np.int64))
    with pytest.raises(ValueError, match="cand"):
        moving._steps.box_candidates(o, d, cand.astype(np.int32), lo, hi, out)


def test_a_swept_box_holds_the_object_at_every_time_of_its_span() -> None:
    """The turning car's box corners at 2,001 times over 50 ms and over 2 s all lie inside the swept
    box of that span (which is sampled at 17 times), and the box is not much larger than they need."""
    from rt_lidar.unreal_bridge.world import moving
    from rt_lidar.unreal_bridge.world.pose import quat_rotate

    if moving._steps is None:
        pytest.skip("the compiled cast steps were not built (the box cull is theirs)")
    world = World(_car_scene(TURNING), caster="embree")
    objects = world._moving
    mv = objects.items[0]
    for lo, hi in ((T, T + 0.05), (T, T + 2.0)):
        box_lo, box_hi = objects.swept_boxes(lo, hi)[0]
        p, q = TURNING.positions_rotations(np.linspace(lo, hi, 2001))
        corners = p[:, None, :] + quat_rotate(q[:, None, :], mv.corners[None, :, :])
        assert (corners >= box_lo).all() and (corners <= box_hi).all()
        slack = np.maximum(corners.min(axis=(0, 1)) - box_lo, box_hi - corners.max(axis=(0, 1)))
        assert slack.max() < 0.01 + 1.5 * (hi - lo) * 9.1 / 16  # a centimetre and about a sample's step


def _random_poses(rng: np.random.Generator, s: int) -> tuple[np.ndarray, np.ndarray]:
    p = rng.normal(0.0, 50.0, (s, 3))
    q = rng.normal(size=(s, 4))
    return p, q / np.linalg.norm(q, axis=1)[:, None]


@pytest.mark.parametrize("samples", [1, 2, 17, 64])
def test_the_compiled_swept_sphere_gives_the_numpy_lines_bits(samples: int) -> None:
    from rt_lidar.unreal_bridge.world import moving

    if moving._steps is None:
        pytest.skip("the compiled cast steps were not built")
    rng = np.random.default_rng(samples)
    for _ in range(200):
        p, q = _random_poses(rng, samples)
        center, radius = rng.normal(0.0, 2.0, 3), float(rng.uniform(0.5, 5.0))
        mid, r = moving._swept_sphere(p, q, center, radius)
        got = np.empty(5)
        moving._steps.swept_sphere(p, q, center, got)
        assert got[:3].tobytes() == mid.tobytes()
        assert radius + float(got[3]) + float(got[4]) + 1e-3 == r


def test_the_compiled_swept_sphere_carries_a_nan_and_refuses_bad_input() -> None:
    from rt_lidar.unreal_bridge.world import moving

    if moving._steps is None:
        pytest.skip("the compiled cast steps were not built")
    p, q = _random_poses(np.random.default_rng(1), 17)
    p[5, 1] = np.nan
    mid, r = moving._swept_sphere(p, q, np.zeros(3), 1.0)
    got = np.empty(5)
    moving._steps.swept_sphere(p, q, np.zeros(3), got)
    assert np.isnan(mid[1]) and np.isnan(got[1]) and np.isnan(r) and np.isnan(got[3])
    assert got[[0, 2]].tobytes() == mid[[0, 2]].tobytes()
    with pytest.raises(ValueError, match="no samples"):
        moving._steps.swept_sphere(p[:0], q[:0], np.zeros(3), got)
    with pytest.raises(ValueError, match="at most 64 samples"):
        moving._steps.swept_sphere(np.zeros((65, 3)), np.zeros((65, 4)), np.zeros(3), got)
    with pytest.raises(ValueError, match="center"):
        moving._steps.swept_sphere(p, q, np.zeros(4), got)
    with pytest.raises(ValueError, match="q"):
        moving._steps.swept_sphere(p, q[:16], np.zeros(3), got)


def test_the_swept_spheres_are_the_same_with_and_without_the_compiled_steps(monkeypatch) -> None:
    """The turning car's spheres over frame-like spans, the compiled path against the NumPy lines."""
    from rt_lidar.unreal_bridge.world import moving

    if moving._steps is None:
        pytest.skip("the compiled cast steps were not built")
    spans = [(T + 0.05 * k, T + 0.05 * (k + 1)) for k in range(40)] + [(0.0, 2.0), (T, T)]
    compiled = [World(_car_scene(TURNING), caster="embree")._moving.swept_spheres(*s)[0] for s in spans]
    monkeypatch.setattr(moving, "_steps", None)
    plain = [World(_car_scene(TURNING), caster="embree")._moving.swept_spheres(*s)[0] for s in spans]
    for (mid_c, r_c), (mid_n, r_n) in zip(compiled, plain, strict=True):
        assert mid_c.tobytes() == mid_n.tobytes() and r_c == r_n
    with pytest.raises(RuntimeError, match="compiled cast steps"):
        World(_car_scene(TURNING), caster="embree")._moving.swept_boxes(T, T + 0.05)
