"""The scene's BVH (kernels.bvh) and the CUDA traversal kernel (kernels.bvh_cuda) held to the CPU caster
(Embree through embreex): the same hits on the street world and the validation scenes, moving objects at
each ray's own firing time included. One test body runs on every backend present: the CUDA source
compiled for the CPU always, CuPy where a GPU is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from rt_lidar.kernels.bvh import LEAF_SIZE, MAX_DEPTH, build_bvh
from rt_lidar.pipeline.builder import build_world
from rt_lidar.pipeline.device_world import BvhWorld
from rt_lidar.unreal_bridge.world import RayHits, Scene, World
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.scenes import plane_scene
from rt_lidar.validation.scenes import rain_test_scene

REL_T = 1e-4
"""Hit distances agree within this relative difference."""
MAX_OTHER_SHARE = 2e-4
"""Rays whose hit (or miss) differs from Embree's: those through a shared edge or grazing a face, where
two watertight tests may pick either triangle; their share stays below this."""

VALIDATION_SCENES: dict[str, Callable[[], Scene | str]] = {
    "plane": lambda: "plane",
    "wall": lambda: "wall",
    "targets": lambda: "targets",
    "glass": lambda: "glass",
    "rain_test": rain_test_scene,
}


def _backend_name(backend: Any) -> str:
    return "cuda" if backend.name == "cupy" else "cuda-source-on-cpu"


@pytest.fixture(scope="module")
def street() -> World:
    return build_world("street", seed=3)


def _sensor_rays(world: World, n: int, t0: float, span: float, seed: int) -> tuple[np.ndarray, ...]:
    """``n`` rays from the sensor at its pose at per-ray times in [t0, t0 + span) (in firing order): a
    spinning fan of elevations from -25 to +15 degrees, as a lidar fires them."""
    rng = np.random.default_rng(seed)
    t = t0 + np.sort(rng.uniform(0.0, span, n))
    pos, quat = world.sensor_poses(t)
    az = rng.uniform(-np.pi, np.pi, n)
    el = np.radians(rng.uniform(-25.0, 15.0, n))
    d_sensor = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=1)
    from rt_lidar.unreal_bridge.world.pose import quat_rotate

    d = quat_rotate(quat, d_sensor)
    return pos.astype(np.float32), (d / np.linalg.norm(d, axis=1)[:, None]).astype(np.float32), t


def _rays_at_movers(world: World, per_object: int, t0: float, seed: int) -> tuple[np.ndarray, ...]:
    """Rays from the sensor aimed at the moving objects' centres (with a spread of a few metres) at per-
    ray times over a tenth of a second, so most of them meet a moving object."""
    rng = np.random.default_rng(seed)
    movers = [o for o in world.scene.objects if o.triangle_count and not o.is_static]
    origins, dirs, times = [], [], []
    for obj in movers:
        t = t0 + np.sort(rng.uniform(0.0, 0.1, per_object))
        p, _ = obj.trajectory.positions_rotations(t)
        target = p + rng.normal(0.0, 1.0, (per_object, 3)) + np.array([0.0, 0.0, 0.7])
        pos, _ = world.sensor_poses(t)
        d = target - pos
        origins.append(pos)
        dirs.append(d / np.linalg.norm(d, axis=1)[:, None])
        times.append(t)
    order = np.argsort(np.concatenate(times), kind="stable")
    return (
        np.concatenate(origins)[order].astype(np.float32),
        np.concatenate(dirs)[order].astype(np.float32),
        np.concatenate(times)[order],
    )


def assert_same_hits(want: RayHits, got: RayHits, moving: list[int] | None = None) -> dict[str, float]:
    """``got`` holds ``want``'s hits: distance within :data:`REL_T`, the same object, material, segment
    and normal, for all but :data:`MAX_OTHER_SHARE` of the rays. Returns the shares measured."""
    n = want.distance.shape[0]
    hit_w, hit_g = np.isfinite(want.distance), np.isfinite(got.distance)
    both = hit_w & hit_g
    rel = np.zeros(n)
    rel[both] = np.abs(got.distance[both] - want.distance[both]) / want.distance[both]
    same = (hit_w == hit_g) & (rel <= REL_T) & (want.object_index == got.object_index)
    same &= (want.material == got.material) & (want.segment == got.segment)
    same &= np.abs(want.normal - got.normal).max(axis=1) <= 1e-5
    other = 1.0 - float(same.mean())
    assert other <= MAX_OTHER_SHARE, f"{other:.2e} of the rays differ from Embree's"
    assert (got.segment[~hit_g] == 0).all() and (got.material[~hit_g] == -1).all()
    assert (got.object_index[~hit_g] == -1).all() and (got.normal[~hit_g] == 0).all()
    shares = {"rays": n, "hit_share": float(hit_w.mean()), "other_share": other}
    if moving:
        shares["moving_hits"] = int(np.isin(want.object_index, moving).sum())
    return shares


def test_bvh_holds_every_triangle_once_inside_nested_boxes(street: World) -> None:
    obj = max(street.scene.objects, key=lambda o: o.triangle_count)
    b = build_bvh(obj.vertices, obj.faces)
    leaf = b.node_meta[:, 1] > 0
    assert 0 < b.depth < MAX_DEPTH and b.node_meta[leaf, 1].max() <= LEAF_SIZE
    assert np.array_equal(np.sort(b.tri_index), np.arange(obj.triangle_count))
    covered = np.zeros(obj.triangle_count, int)
    for first, count in b.node_meta[leaf]:
        covered[first : first + count] += 1
    assert (covered == 1).all()
    # each leaf's box holds its triangles; each inner node's box holds both children's
    tri = b.tri_vertices.reshape(-1, 3, 3)
    for node in np.flatnonzero(leaf):
        first, count = b.node_meta[node]
        corners = tri[first : first + count].reshape(-1, 3)
        assert (corners >= b.node_box[node, :3]).all() and (corners <= b.node_box[node, 3:]).all()
    inner = np.flatnonzero(~leaf)
    for child in (b.node_meta[inner, 0], b.node_meta[inner, 0] + 1):
        assert (b.node_box[child, :3] >= b.node_box[inner, :3]).all()
        assert (b.node_box[child, 3:] <= b.node_box[inner, 3:]).all()
    again = build_bvh(obj.vertices, obj.faces)  # the same input gives the same arrays
    assert (
        again.node_box.tobytes() == b.node_box.tobytes()
        and again.tri_index.tobytes() == b.tri_index.tobytes()
    )


def test_empty_mesh_gives_an_empty_tree() -> None:
    b = build_bvh(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32))
    assert b.node_count == 0 and b.tri_vertices.shape == (0, 9)


def test_street_hits_match_embree_at_per_ray_times(cuda_backend: Any, street: World) -> None:
    o, d, t = _sensor_rays(street, 60_000, 0.5, 0.1, seed=1)
    bw = BvhWorld(street, _backend_name(cuda_backend))
    got = bw.cast(o, d, t, 120.0)
    shares = assert_same_hits(street.cast(o, d, t, 120.0), got)
    assert 0.9 < shares["hit_share"] < 1.0  # the ground, buildings and cars, and a few rays into the sky


def test_moving_objects_are_met_at_each_rays_own_time(cuda_backend: Any, street: World) -> None:
    bw = BvhWorld(street, _backend_name(cuda_backend))
    moving = [i for i, o in enumerate(street.scene.objects) if o.triangle_count and not o.is_static]
    assert len(moving) >= 2
    for t0 in (0.3, 2.0):
        o, d, t = _rays_at_movers(street, 3000, t0, seed=int(t0 * 10))
        want = street.cast(o, d, t, 120.0)
        shares = assert_same_hits(want, bw.cast(o, d, t, 120.0), moving)
        assert shares["moving_hits"] > 0.1 * o.shape[0]  # (some cars stand behind others)
        # at one time for the whole batch the objects stand elsewhere: other hits, the same on both
        one = street.cast(o, d, t0, 120.0)
        with np.errstate(invalid="ignore"):  # inf - inf: a ray that misses at both
            moved = np.abs(np.nan_to_num(one.distance - want.distance, nan=0.0, posinf=1.0)) > 0.01
        assert (moved & np.isin(want.object_index, moving)).mean() > 0.02
        assert_same_hits(one, bw.cast(o, d, t0, 120.0), moving)


def test_rays_out_of_time_order_and_a_short_range(cuda_backend: Any, street: World) -> None:
    o, d, t = _rays_at_movers(street, 1500, 1.0, seed=5)
    perm = np.random.default_rng(0).permutation(o.shape[0])
    bw = BvhWorld(street, _backend_name(cuda_backend))
    assert_same_hits(street.cast(o[perm], d[perm], t[perm], 15.0), bw.cast(o[perm], d[perm], t[perm], 15.0))


@pytest.mark.parametrize("name", list(VALIDATION_SCENES))
def test_validation_scenes_match_embree(cuda_backend: Any, name: str) -> None:
    world = build_world(VALIDATION_SCENES[name]())
    o, d, t = _sensor_rays(world, 20_000, 0.0, 0.1, seed=2)
    got = BvhWorld(world, _backend_name(cuda_backend)).cast(o, d, t, 200.0)
    shares = assert_same_hits(world.cast(o, d, t, 200.0), got)
    assert shares["hit_share"] > 0.0


def test_segment_ids_set_after_the_build_are_used(cuda_backend: Any) -> None:
    world = build_world(plane_scene())
    bw = BvhWorld(world, _backend_name(cuda_backend))
    o, d, t = _sensor_rays(world, 2000, 0.0, 0.1, seed=4)
    assert bw.set_segment_id("plane", 77)
    got = bw.cast(o, d, t, 100.0)
    assert (got.segment[np.isfinite(got.distance)] == 77).all() and np.isfinite(got.distance).any()


def _only_moving_scene() -> Scene:
    """No static mesh: two spinning, driving boxes and a sphere crossing in front of the sensor."""
    from rt_lidar.unreal_bridge.world import ConstantVelocity, Pose

    objs = []
    for k, (y, vx, yaw_rate) in enumerate([(6.0, 4.0, 0.8), (-7.0, -6.0, -0.5), (0.0, 0.0, 2.0)]):
        b = MeshBuilder()
        if k < 2:
            b.box((0.0, 0.0, 0.0), (4.5, 1.9, 1.5), "car_paint_red", yaw=0.3 * k)
        else:
            b.sphere((0.0, 0.0, 0.0), (1.0, 1.5, 0.8), "concrete", subdivisions=3)
        start = Pose.from_xyz_rpy(-8.0 + 8.0 * k, y, 1.0, 0.0, 0.0, 0.2 * k)
        objs.append(b.build(f"mover_{k}", k + 1, ConstantVelocity(start, (vx, 0.0, 0.0), yaw_rate)))
    return Scene(objects=objs)


def test_a_scene_of_moving_objects_alone(cuda_backend: Any) -> None:
    world = World(_only_moving_scene())
    bw = BvhWorld(world, _backend_name(cuda_backend))
    assert bw.scene_arrays.static_nodes == 0 and bw.scene_arrays.instances == 3
    o, d, t = _rays_at_movers(world, 2000, 0.0, seed=7)
    shares = assert_same_hits(world.cast(o, d, t, 60.0), bw.cast(o, d, t, 60.0), [0, 1, 2])
    assert shares["moving_hits"] > 0.3 * o.shape[0]
    o, d, t = _sensor_rays(world, 5000, 0.0, 1.0, seed=8)  # most of these meet nothing
    assert_same_hits(world.cast(o, d, t, 60.0), bw.cast(o, d, t, 60.0), [0, 1, 2])


def test_no_rays_a_short_range_and_hits_left_on_the_backend(cuda_backend: Any, street: World) -> None:
    bw = BvhWorld(street, _backend_name(cuda_backend))
    empty = bw.cast(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32), 0.5, 100.0)
    assert all(a.shape[0] == 0 for a in empty)
    o, d, t = _sensor_rays(street, 5000, 0.5, 0.1, seed=9)
    near = bw.cast(o, d, t, 5.0)
    assert_same_hits(street.cast(o, d, t, 5.0), near)
    assert np.isfinite(near.distance).any() and (near.distance[np.isfinite(near.distance)] <= 5.0).all()
    host = bw.cast(o, d, t, 120.0, threads=1)
    kept = bw.cast_device(cuda_backend.asarray(o), cuda_backend.asarray(d), t, 120.0)
    for a, b in zip(host, kept, strict=True):
        assert cuda_backend.asnumpy(b).tobytes() == np.asarray(a).tobytes()


def test_the_cuda_backends_plumbing_with_numpy_standing_in_for_cupy(
    monkeypatch: pytest.MonkeyPatch, street: World
) -> None:
    """BvhWorld's ``cuda`` branch (upload, launch through the RawKernel wrapper, copy back into pinned
    memory) run with NumPy as CuPy and the CPU build as the RawKernel: what a GPU run goes through."""
    import sys
    import types

    import rt_lidar.kernels.bvh_cuda as bc
    import rt_lidar.pipeline.device_world as dw
    from rt_lidar.kernels.cuda_host import HostKernel, host_compiler

    if host_compiler() is None:
        pytest.skip("no C++ compiler to build the CUDA source for the CPU")
    copies: list[tuple[int, ...]] = []

    def asnumpy(a: np.ndarray, out: np.ndarray) -> np.ndarray:
        copies.append(out.shape)
        np.copyto(out, a)
        return out

    cupy = types.SimpleNamespace(
        asarray=np.asarray, ascontiguousarray=np.ascontiguousarray, float32=np.float32, asnumpy=asnumpy
    )
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupyx", types.SimpleNamespace(empty_pinned=np.empty))
    monkeypatch.setattr(dw, "cupy_available", lambda: True)
    kernel = HostKernel(bc.CUDA_SOURCE, bc.KERNEL_NAME)
    monkeypatch.setattr(bc, "_cupy_kernel", lambda: kernel)
    gpu = BvhWorld(street, "cuda")
    o, d, t = _rays_at_movers(street, 1000, 1.5, seed=11)
    got = gpu.cast(o, d, t, 120.0)
    assert len(copies) == 5 and copies[0] == (o.shape[0],)  # every field came back through pinned memory
    want = BvhWorld(street, "cuda-source-on-cpu").cast(o, d, t, 120.0)
    assert all(np.asarray(a).tobytes() == np.asarray(b).tobytes() for a, b in zip(want, got, strict=True))
