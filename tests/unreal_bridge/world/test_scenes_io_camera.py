"""The street scene, mesh file loading and the camera renderer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh
from trimesh.visual import TextureVisuals
from trimesh.visual.material import PBRMaterial

from rt_lidar.unreal_bridge.world import (
    MATERIAL_NAMES,
    SCENES,
    CameraSpec,
    Pose,
    Scene,
    World,
    WorldError,
    load_mesh_file,
    street_scene,
    targets_scene,
)


@pytest.fixture(scope="module")
def street() -> Scene:
    return street_scene(seed=0)


@pytest.fixture(scope="module")
def street_world(street: Scene) -> World:
    return World(street)


def test_street_deterministic_per_seed(street: Scene) -> None:
    again = street_scene(seed=0)
    other = street_scene(seed=1)
    assert [o.name for o in again.objects] == [o.name for o in street.objects]
    for a, b in zip(street.objects, again.objects, strict=True):
        np.testing.assert_array_equal(a.vertices, b.vertices)
        np.testing.assert_array_equal(a.faces, b.faces)
        np.testing.assert_array_equal(a.face_material, b.face_material)
        assert a.segment_id == b.segment_id
    all_a = np.concatenate([o.vertices for o in street.objects])
    all_b = np.concatenate([o.vertices for o in other.objects])
    assert all_a.shape != all_b.shape or not np.array_equal(all_a, all_b)


def test_street_contents(street: Scene) -> None:
    used = {street.material_names[i] for o in street.objects for i in np.unique(o.face_material)}
    assert used == set(MATERIAL_NAMES)
    assert 50_000 <= street.triangle_count <= 400_000
    ids = [o.segment_id for o in street.objects]
    assert all(1 <= i <= 255 for i in ids) and len(set(ids)) == len(ids)
    moving = [o.name for o in street.objects if not o.is_static]
    assert 2 <= len(moving) <= 3
    # the ego drives at ~10 m/s with the lidar 1.8 m above the ground
    p0, p1 = street.ego.pose_at(0.0).position, street.ego.pose_at(1.0).position
    assert np.linalg.norm(p1 - p0) == pytest.approx(10.0)
    assert street.sensor_mount.position[2] == pytest.approx(1.8)
    assert set(SCENES) >= {"street", "plane", "wall", "targets", "glass"}


def test_street_windows_have_interiors(street_world: World) -> None:
    # a ray into a facade window from the street goes through glass and stops inside the building
    world = street_world
    glass = world.material_names.index("glass")
    pose = world.sensor_pose(0.0)
    az = np.radians(np.linspace(-80, -100, 200))
    el = np.radians(np.linspace(0, 30, 60))
    a, e = np.meshgrid(az, el)
    d = (
        np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], -1)
        .reshape(-1, 3)
        .astype(np.float32)
    )
    o = np.broadcast_to(pose.position.astype(np.float32), d.shape)
    hits = world.cast(o, d, 0.0, 200.0)
    on_glass = hits.material == glass
    assert on_glass.sum() > 50
    beyond = world.cast(
        o[on_glass] + d[on_glass] * (hits.distance[on_glass, None] + 0.01), d[on_glass], 0.0, 50.0
    )
    assert np.all(np.isfinite(beyond.distance)) and np.all(beyond.distance < 15.0)


def _two_material_scene() -> trimesh.Scene:
    a = trimesh.creation.box(extents=(0.2, 4.0, 2.0))
    a.apply_translation((5.0, 1.0, 0.0))
    a.visual = TextureVisuals(material=PBRMaterial(name="Brick", baseColorFactor=[200, 60, 50, 255]))
    b = trimesh.creation.box(extents=(0.2, 4.0, 2.0))
    b.apply_translation((5.0, -3.0, 0.0))
    b.visual = TextureVisuals(material=PBRMaterial(name="glass", baseColorFactor=[40, 60, 200, 255]))
    return trimesh.Scene({"wall": a, "pane": b})


def _cast_x(objects: list, y: float) -> tuple[float, str]:
    world = World(Scene(objects=objects, sensor_mount=Pose.identity()))
    hit = world.cast(np.array([[0.0, y, 0.0]], np.float32), np.array([[1.0, 0.0, 0.0]], np.float32), 0.0)
    mat = world.material_names[hit.material[0]] if hit.material[0] >= 0 else "miss"
    return float(hit.distance[0]), mat


@pytest.mark.parametrize("suffix", [".glb", ".gltf", ".obj"])
def test_mesh_file_round_trip_keeps_materials(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"walls{suffix}"
    _two_material_scene().export(path)
    objects = load_mesh_file(path, material="concrete", segment_id=11)
    assert len(objects) == 2 and all(o.segment_id == 11 for o in objects)
    assert _cast_x(objects, 1.0) == (pytest.approx(4.9, abs=1e-5), "brick")
    assert _cast_x(objects, -3.0) == (pytest.approx(4.9, abs=1e-5), "glass")
    assert _cast_x(objects, 5.0)[1] == "miss"


def test_ply_round_trip_with_pose(tmp_path: Path) -> None:
    path = tmp_path / "box.ply"
    trimesh.creation.box(extents=(1.0, 1.0, 1.0)).export(path)
    objects = load_mesh_file(path, name="crate", material="rock", pose=Pose.from_xyz_rpy(8.0, 0.0, 0.0))
    assert [o.name for o in objects] == ["crate"]
    assert _cast_x(objects, 0.0) == (pytest.approx(7.5, abs=1e-5), "rock")


def test_corrupt_and_unknown_files_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.glb"
    bad.write_bytes(b"glTF\x02\x00\x00\x00garbage-not-a-real-glb")
    with pytest.raises(WorldError, match=r"broken\.glb"):
        load_mesh_file(bad)
    odd = tmp_path / "model.fbx"
    odd.write_text("x")
    with pytest.raises(WorldError, match=r"model\.fbx.*unknown mesh format"):
        load_mesh_file(odd)
    with pytest.raises(WorldError, match=r"missing\.obj"):
        load_mesh_file(tmp_path / "missing.obj")


def test_camera_segments_where_objects_are() -> None:
    mats = ["brick", "glass", "chrome"]
    world = World(targets_scene(mats, 10.0, panel_size_m=2.0, gap_m=1.0))
    cam = CameraSpec(width=160, height=90, fov_deg=60.0, mount=Pose.from_xyz_rpy(0.0, 0.0, 1.8))
    img = world.render_camera(cam, 0.0)
    assert img.rgb.shape == (90, 160, 3) and img.rgb.dtype == np.uint8
    assert img.depth.shape == (90, 160) and img.segmentation.dtype == np.uint32
    # project each panel centre with the pinhole model: its pixel shows that panel's segment id
    k_mat = cam.intrinsics()
    for k, m in enumerate(mats):
        c = world.object_pose(f"target_{k}_{m}", 0.0).position - [0.0, 0.0, 1.8]
        u, v, w = k_mat @ np.array([-c[1], -c[2], c[0]])
        assert img.segmentation[int(v / w), int(u / w)] == k + 1
        assert img.depth[int(v / w), int(u / w)] == pytest.approx(c[0], rel=1e-3)
    assert img.segmentation[2, 80] == 0 and np.isinf(img.depth[2, 80])  # sky at the top
    assert set(np.unique(img.segmentation)) == {0, 1, 2, 3}
    sky = img.rgb[2, 80].astype(int)
    assert sky[2] > sky[0]  # bluish sky


def test_street_camera_renders_every_object_class(street_world: World) -> None:
    cam = CameraSpec()
    img = street_world.render_camera(cam, 1.0)
    ids = street_world.segment_ids()
    seen = set(np.unique(img.segmentation).tolist())
    assert ids["road"] in seen and ids["car_moving_0"] in seen and 0 in seen
