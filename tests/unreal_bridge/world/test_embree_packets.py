"""EmbreeCaster through Embree's packet queries (the compiled ``_embree_packets`` on embreex's own
libembree4) gives bit for bit the distances, faces and normals of embreex's one ray at a time, for
lidar rays, far limits of every kind, rays from inside objects and batches of any length."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.pipeline.pose_samples import _interpolated_sensor_poses
from rt_lidar.pipeline.sources import _rotate_f32
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between, scan_period_ns
from rt_lidar.unreal_bridge.world import World, WorldError, raycast, street_scene
from rt_lidar.unreal_bridge.world.raycast import EmbreeCaster, embree_packets

needs_packets = pytest.mark.skipif(
    embree_packets() is None, reason="the compiled packet caster was not built (no C compiler at install)"
)


@pytest.fixture(scope="module")
def street() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The street's static mesh (World's own) and one HDL-64E scan's rays from the moving sensor."""
    world = World(street_scene(0))
    static = [o for o in world.scene.objects if o.is_static and o.triangle_count]
    verts, faces, offset = [], [], 0
    for obj in static:
        verts.append(obj.trajectory.pose_at(0.0).transform_points(obj.vertices).astype(np.float32))
        faces.append(obj.faces + offset)
        offset += obj.vertices.shape[0]
    preset = load_preset("HDL-64E")
    firings = firings_between(preset, 0, scan_period_ns(preset))
    pos, quat = _interpolated_sensor_poses(world, firings.t_ns, None)
    dirs = _rotate_f32(quat.astype(np.float32), firings.directions())
    return np.concatenate(verts), np.concatenate(faces), pos.astype(np.float32), dirs


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@needs_packets
@pytest.mark.parametrize("limit", ["scalar", "per_ray", "unlimited"])
def test_packets_give_embreex_hits_bit_for_bit(street: tuple[np.ndarray, ...], limit: str) -> None:
    v, f, o, d = street
    one, packets = EmbreeCaster(v, f, packets=False), EmbreeCaster(v, f, packets=True)
    assert packets.uses_packets and not one.uses_packets
    rng = np.random.default_rng(3)
    max_distance: float | np.ndarray = {
        "scalar": 60.0,
        "per_ray": rng.uniform(0.5, 150.0, len(o)).astype(np.float32),
        "unlimited": np.inf,
    }[limit]
    a, b = one.intersect(o, d, max_distance, threads=1), packets.intersect(o, d, max_distance, threads=2)
    assert (a[1] >= 0).mean() > 0.5  # most rays hit something
    for x, y in zip(a, b, strict=True):
        assert _same(x, y)
    n = len(o)
    dist_a, dist_b = np.empty(n, np.float32), np.empty(n, np.float32)
    nrm_a, nrm_b = np.empty((n, 3), np.float32), np.empty((n, 3), np.float32)
    fa = one.intersect_into(o, d, max_distance, dist_a, nrm_a)
    fb = packets.intersect_into(o, d, max_distance, dist_b, nrm_b)
    assert _same(fa, fb) and _same(dist_a, dist_b) and _same(nrm_a, nrm_b)
    assert _same(dist_a, a[0]) and _same(fa.astype(np.int64), a[1])


@needs_packets
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 17])
def test_batches_of_any_length_and_rays_from_inside_a_box(n: int) -> None:
    """A unit box, rays from inside it (every one hits a wall from behind) and from outside (half miss),
    in batches that fill no packet, one, and one and a bit."""
    v = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], np.float32)
    f = np.array(
        [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6], [0, 2, 6],
         [0, 6, 4], [1, 5, 7], [1, 7, 3]],
        np.int32,
    )  # fmt: skip
    rng = np.random.default_rng(n)
    o = np.where(rng.random((n, 1)) < 0.5, 0.5, -2.0) + rng.uniform(-0.3, 0.3, (n, 3))
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    o, d = o.astype(np.float32), d.astype(np.float32)
    a = EmbreeCaster(v, f, packets=False).intersect(o, d)
    b = EmbreeCaster(v, f, packets=True).intersect(o, d)
    for x, y in zip(a, b, strict=True):
        assert _same(x, y)
    inside = np.all((o > 0) & (o < 1), axis=1)
    assert (a[1][inside] >= 0).all()


@needs_packets
@pytest.mark.parametrize("width", [1, 4, 8, 16])
def test_every_packet_width_gives_the_hits_of_one_ray_at_a_time(
    street: tuple[np.ndarray, ...], width: int
) -> None:
    """The module's packets of 1, 4, 8 and 16 rays, whole and a last partial one, with a far limit per
    ray: embreex's distances and faces bit for bit, and the limits of rays that hit nothing left inf."""
    v, f, o, d = street
    n = 16 * 97 + 11  # a partial last packet at every width
    o, d = o[:n], d[:n]
    limit = np.random.default_rng(width).uniform(0.5, 150.0, n).astype(np.float32)
    dist_a = np.empty(n, np.float32)
    face_a = EmbreeCaster(v, f, packets=False).faces_into(o, d, limit, dist_a)
    mod = embree_packets()
    scene = mod.new_scene(v, v.shape[0], f.astype(np.uint32), f.shape[0], True, True)
    dist_b, face_b = limit.copy(), np.empty(n, np.int32)
    mod.intersect(scene, np.ascontiguousarray(o), np.ascontiguousarray(d), dist_b, face_b, width)
    assert 0.2 < (face_a >= 0).mean() < 1.0  # hits and misses both
    assert _same(dist_b, dist_a) and _same(face_b, face_a.astype(np.int32))
    assert np.isinf(dist_b[face_b < 0]).all()


@needs_packets
def test_the_compiled_caster_refuses_arrays_of_the_wrong_type_or_length() -> None:
    mod = embree_packets()
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32)
    scene = mod.new_scene(v, 3, np.array([[0, 1, 2]], np.uint32), 1)
    o, d = np.zeros((4, 3), np.float32), np.tile(np.float32([0, 0, 1]), (4, 1))
    dist, face = np.full(4, 10.0, np.float32), np.empty(4, np.int32)
    mod.intersect(scene, o, d, dist, face)
    with pytest.raises(ValueError, match="origins"):
        mod.intersect(scene, o.astype(np.float64), d, dist, face)
    with pytest.raises(ValueError, match="directions"):
        mod.intersect(scene, o, d[:3], dist, face)
    with pytest.raises(ValueError, match="face"):
        mod.intersect(scene, o, d, dist, face.astype(np.int64))
    with pytest.raises(ValueError, match="faces"):
        mod.new_scene(v, 3, np.array([[0, 1, 2]], np.int64), 1)


def test_without_the_compiled_caster_embreex_casts_and_insisting_on_packets_says_why(
    monkeypatch: pytest.MonkeyPatch, street: tuple[np.ndarray, ...]
) -> None:
    v, f, o, d = street
    monkeypatch.setattr(raycast, "embree_packets", lambda: None)
    caster = EmbreeCaster(v, f)
    assert not caster.uses_packets
    assert (caster.intersect(o[:100], d[:100])[1] >= 0).any()
    with pytest.raises(WorldError, match="packet queries are not available"):
        EmbreeCaster(v, f, packets=True)
