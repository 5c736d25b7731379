"""Ray casters and World.cast: agreement, analytic distances, normals, moving objects, segment ids."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rt_lidar.unreal_bridge.world import (
    RAY_CASTERS,
    ConstantVelocity,
    MeshObject,
    Pose,
    Scene,
    World,
    WorldError,
    plane_scene,
    targets_scene,
)
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder


def _small_mesh() -> tuple[np.ndarray, np.ndarray]:
    b = MeshBuilder()
    rng = np.random.default_rng(3)
    b.sphere((0.0, 0.0, 0.0), (1.0, 0.8, 0.6), "rock", subdivisions=2, jitter=0.2, rng=rng)
    b.box((1.5, 0.0, 0.0), (0.5, 2.0, 1.0), "brick", yaw=0.3)
    obj = b.build("m", 1)
    return obj.vertices, obj.faces


def _random_rays(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    origins = rng.uniform(-4.0, 4.0, size=(n, 3)).astype(np.float32)
    targets = rng.uniform(-1.0, 1.5, size=(n, 3))
    d = targets - origins
    return origins, (d / np.linalg.norm(d, axis=1, keepdims=True)).astype(np.float32)


def test_embree_agrees_with_numpy_reference() -> None:
    v, f = _small_mesh()
    o, d = _random_rays(3000, seed=1)
    de, fe, ne = RAY_CASTERS["embree"](v, f).intersect(o, d)
    dn, fn, nn = RAY_CASTERS["numpy"](v, f).intersect(o, d)
    assert (fe >= 0).mean() > 0.5  # most rays aim at the mesh
    np.testing.assert_array_equal(fe >= 0, fn >= 0)
    hit = fe >= 0
    np.testing.assert_allclose(de[hit], dn[hit], atol=1e-4)
    assert (fe[hit] == fn[hit]).mean() > 0.995  # ties on shared edges may pick either face
    same = fe == fn
    np.testing.assert_allclose(ne[same & hit], nn[same & hit], atol=1e-5)
    assert np.all(np.isinf(de[~hit])) and np.all(fe[~hit] == -1)


def test_embree_threaded_split_matches_serial() -> None:
    v, f = _small_mesh()
    o, d = _random_rays(40_000, seed=2)
    caster = RAY_CASTERS["embree"](v, f)
    a = caster.intersect(o, d)
    b = caster.intersect(o, d, threads=1)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("caster", sorted(RAY_CASTERS))
@pytest.mark.parametrize("distance", [3.0, 17.5])
def test_plane_at_known_distance(caster: str, distance: float) -> None:
    world = World(plane_scene(distance, "concrete", size_m=20.0), caster=caster)
    pose = world.sensor_pose(0.0)
    az = np.radians(np.linspace(-20, 20, 41))
    d = np.stack([np.cos(az), np.sin(az), np.zeros_like(az)], axis=-1).astype(np.float32)
    o = np.tile(pose.position.astype(np.float32), (len(d), 1))
    hits = world.cast(o, d, 0.0, 100.0)
    np.testing.assert_allclose(hits.distance, distance / np.cos(az), rtol=1e-5)
    np.testing.assert_allclose(hits.normal, np.tile([-1.0, 0.0, 0.0], (len(d), 1)), atol=1e-6)
    assert np.all(hits.material == world.material_names.index("concrete"))
    assert np.all(hits.segment == world.segment_ids()["plane"])
    # beyond max_range the plane is a miss
    far = world.cast(o, d, 0.0, distance * 0.9)
    assert np.all(np.isinf(far.distance)) and np.all(far.segment == 0) and np.all(far.object_index == -1)
    assert np.all(far.material == -1)


def test_normals_unit_and_facing_the_ray_from_both_sides() -> None:
    world = World(plane_scene(5.0))
    sensor = world.sensor_pose(0.0).position
    o = np.array(
        [sensor, sensor + np.array([10.0, 0.0, 0.0])], dtype=np.float32
    )  # in front of and behind the plane
    d = np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]], dtype=np.float32)
    hits = world.cast(o, d, 0.0)
    np.testing.assert_allclose(hits.distance, [5.0, 5.0], rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(hits.normal, axis=1), 1.0, atol=1e-6)
    assert np.all(np.einsum("ij,ij->i", hits.normal, d) < 0)


def _moving_box_scene(*, with_wall: bool) -> Scene:
    b = MeshBuilder()
    b.box((0.0, 0.0, 1.0), (1.0, 1.0, 2.0), "car_paint_red")
    # moves along +y at 2 m/s from y = -10, crossing x = 10 in front of the sensor at t = 5 s
    mover = b.build(
        "mover", 7, ConstantVelocity(Pose.from_xyz_rpy(10.0, -10.0, 0.0, yaw=0.4), (0.0, 2.0, 0.0))
    )
    objects = [mover]
    if with_wall:
        objects = [*plane_scene(30.0).objects, mover]
    return Scene(objects=objects, sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, 1.0))


@pytest.mark.parametrize("caster", sorted(RAY_CASTERS))
def test_moving_object_hit_where_trajectory_says(caster: str) -> None:
    world = World(_moving_box_scene(with_wall=True), caster=caster)
    o = np.array([[0.0, 0.0, 1.0]], dtype=np.float32)
    d = np.array([[1.0, 0.0, 0.0]], dtype=np.float32)
    at = world.cast(o, d, 5.0)
    pose = world.object_pose("mover", 5.0)
    np.testing.assert_allclose(pose.position, [10.0, 0.0, 0.0])
    # the box is yawed 0.4 rad: the ray meets its -x face, whose plane passes 0.5 m from the centre
    expected = 10.0 - 0.5 / np.cos(0.4)
    np.testing.assert_allclose(at.distance, [expected], rtol=1e-5)
    assert at.segment[0] == 7 and world.objects[at.object_index[0]] == "mover"
    np.testing.assert_allclose(at.normal[0], [-np.cos(0.4), -np.sin(0.4), 0.0], atol=1e-5)
    before = world.cast(o, d, 0.0)  # still at y = -10: the ray passes and hits the far plane
    np.testing.assert_allclose(before.distance, [30.0], rtol=1e-6)
    assert world.objects[before.object_index[0]] == "plane"


def test_moving_object_with_many_rays_and_separate_origins() -> None:
    world = World(_moving_box_scene(with_wall=False))
    rng = np.random.default_rng(0)
    n = 40_000  # large enough to take the threaded path
    o = np.c_[rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), np.full(n, 1.0)].astype(np.float32)
    d = np.tile(np.array([1.0, 0.0, 0.0], np.float32), (n, 1))
    hits = world.cast(o, d, 5.0)
    inside = np.abs(o[:, 1]) < 0.45  # rays that clearly cross the 1 m box around y = 0
    assert np.all(np.isfinite(hits.distance[inside]))
    outside = np.abs(o[:, 1]) > 0.8
    assert np.all(np.isinf(hits.distance[outside]))


def test_segment_ids_and_regex() -> None:
    world = World(targets_scene(["asphalt", "glass", "chrome"], 10.0))
    assert world.segment_ids() == {"target_0_asphalt": 1, "target_1_glass": 2, "target_2_chrome": 3}
    assert world.set_segment_id("target_1_glass", 42)
    assert world.segment_ids()["target_1_glass"] == 42
    assert not world.set_segment_id("nothing", 5)
    assert world.set_segment_id("TARGET_[02]_.*", 9, is_regex=True)
    assert world.segment_ids() == {"target_0_asphalt": 9, "target_1_glass": 42, "target_2_chrome": 9}
    sensor = world.sensor_pose(0.0).position.astype(np.float32)
    d = np.array([[1.0, 0.0, 0.0]], np.float32)  # straight ahead: the middle panel
    assert world.cast(sensor[None], d, 0.0).segment[0] == 42
    with pytest.raises(WorldError, match=r"0\.\.255"):
        world.set_segment_id("target_1_glass", 300)


def test_targets_at_equal_range() -> None:
    mats = ["asphalt", "lane_paint", "sign_sheeting", "vegetation"]
    world = World(targets_scene(mats, 25.0, panel_size_m=1.0, gap_m=0.5))
    sensor = world.sensor_pose(0.0).position
    for k, m in enumerate(mats):
        c = world.object_pose(f"target_{k}_{m}", 0.0).position
        d = (c - sensor) / np.linalg.norm(c - sensor)
        hit = world.cast(sensor[None], d[None], 0.0)
        assert hit.distance[0] == pytest.approx(25.0, rel=1e-5)
        assert world.material_names[hit.material[0]] == m
    ys = [world.object_pose(f"target_{k}_{m}", 0.0).position[1] for k, m in enumerate(mats)]
    assert ys == sorted(ys, reverse=True)  # left to right


def test_glass_pane_has_nothing_behind() -> None:
    from rt_lidar.unreal_bridge.world import glass_scene

    world = World(glass_scene(5.0))
    sensor = world.sensor_pose(0.0).position.astype(np.float32)
    hit = world.cast(sensor[None], np.array([[1.0, 0, 0]], np.float32), 0.0)
    assert world.material_names[hit.material[0]] == "glass"
    behind = world.cast(
        (sensor + np.array([5.1, 0, 0])).astype(np.float32)[None], np.array([[1.0, 0, 0]], np.float32), 0.0
    )
    assert np.isinf(behind.distance[0])


def test_world_rejects_unknown_caster_and_bad_objects() -> None:
    with pytest.raises(WorldError, match="unknown caster"):
        World(plane_scene(5.0), caster="optix")
    with pytest.raises(WorldError, match="'bad'"):
        MeshObject(
            "bad", np.zeros((3, 3), np.float32), np.array([[0, 1, 5]], np.int32), np.zeros(1, np.int16), 1
        )


def test_sensor_poses_vectorised_match_compose() -> None:
    from rt_lidar.unreal_bridge.world import street_scene

    world = World(
        Scene(objects=[], ego=street_scene(0).ego, sensor_mount=Pose.from_xyz_rpy(0.5, 0.1, 1.8, 0, 0, 0.3))
    )
    t = np.array([0.0, 1.0, 2.5])
    pos, quat = world.sensor_poses(t)
    for i, ti in enumerate(t):
        ref = world.ego_pose(float(ti)).compose(world.scene.sensor_mount)
        np.testing.assert_allclose(pos[i], ref.position, atol=1e-12)
        np.testing.assert_allclose(quat[i], ref.rotation, atol=1e-12)
    np.testing.assert_allclose(pos[1] - pos[0], [10.0, 0.0, 0.0], atol=1e-12)  # ego at 10 m/s


def test_split_covers_every_ray_once() -> None:
    """One part is the whole batch (the calling thread's cast), several are linspace's contiguous parts."""
    from rt_lidar.unreal_bridge.world.raycast import split

    for n in (0, 1, 7, 66_656):
        assert split(n, 1) == [slice(0, n)]
        parts = split(n, 2)
        assert parts[0].start == 0 and parts[-1].stop == n
        assert all(a.stop == b.start for a, b in itertools.pairwise(parts))


def test_scalar_limits_cast_the_same() -> None:
    """A far limit given as a Python float or int or a NumPy scalar gives the same hits, each within it
    (the street's static caster: Embree where it is); NaN is refused."""
    from rt_lidar.unreal_bridge.world import street_scene

    w = World(street_scene(seed=0))
    o = np.zeros((64, 3), np.float32) + np.array([0.0, 0.0, 1.7], np.float32)
    ang = np.linspace(-np.pi, np.pi, 64, endpoint=False)
    d = np.stack([np.cos(ang), np.sin(ang), np.full(64, -0.05)], 1).astype(np.float32)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    ref = w.cast(o, d, 0.0, 10.0)
    for limit in (10, np.float32(10.0), np.float64(10.0), np.array(10.0)):
        got = w.cast(o, d, 0.0, limit)
        np.testing.assert_array_equal(got.distance, ref.distance)
        np.testing.assert_array_equal(got.object_index, ref.object_index)
    far = w.cast(o, d, 0.0, np.inf)
    hit = np.isfinite(ref.distance)
    assert hit.any() and (ref.distance[hit] <= 10.0).all()
    assert (np.isfinite(far.distance) & ~hit).any()  # the limit dropped hits that are there
    np.testing.assert_array_equal(far.distance[hit], ref.distance[hit])
    with pytest.raises(WorldError):
        w.cast(o, d, 0.0, float("nan"))
