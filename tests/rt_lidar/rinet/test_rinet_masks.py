import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rt_lidar.cli.rinet import BUNDLED, add_rinet_argument, add_rinet_parser, resolve_rinet_model
from rt_lidar.rinet.datasets import read_semantic_kitti
from rt_lidar.rinet.masks import (
    LABEL_DROP,
    LABEL_NONE,
    LABEL_RETURN,
    IntensityMask,
    build_mask,
    densify,
    dropped_rays,
    organise,
    recover_rings,
    zbuffer,
)


def _run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rt-lidar")
    add_rinet_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_build_mask_reports_every_point_of_the_real_kitti_frame(kitti_object_root: Path, tmp_path: Path):
    out = tmp_path / "masks"
    assert (
        _run_cli(
            [
                "rinet",
                "build-mask",
                "--layout",
                "kitti-object",
                str(kitti_object_root),
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    frames = json.loads((out / "masks.json").read_text())["frames"]
    assert [f["name"] for f in frames] == ["000008"]
    assert frames[0]["points_in_image"] == 17_238
    assert frames[0]["drop_pixels"] > 0 and frames[0]["return_pixels"] > 10 * 17_238 / 4
    mask = IntensityMask.load(out / frames[0]["mask"])
    assert mask.label.shape == (375, 1242)
    assert mask.drop_pixels == frames[0]["drop_pixels"]
    # intensities live on returns only, inside [0, 1]
    assert np.all(mask.intensity[mask.label != LABEL_RETURN] == 0)
    assert 0 < mask.intensity.max() <= 1


def test_zbuffer_keeps_the_nearest_point_per_pixel():
    u = np.array([1, 1, 1, 3])
    v = np.array([0, 0, 0, 2])
    d = np.array([5.0, 2.0, 9.0, 1.0])
    depth, index = zbuffer(u, v, d, 3, 4)
    assert index[0, 1] == 1 and depth[0, 1] == 2.0
    assert index[2, 3] == 3 and (index >= 0).sum() == 2


def test_densify_fills_from_the_nearest_depth_within_the_radius():
    depth = np.full((1, 7), np.inf, np.float32)
    val = np.zeros((1, 7), np.float32)
    lab = np.zeros((1, 7), np.uint8)
    depth[0, 0], val[0, 0], lab[0, 0] = 10.0, 0.2, LABEL_RETURN
    depth[0, 2], val[0, 2], lab[0, 2] = 3.0, 0.0, LABEL_DROP
    d, _, lab2 = densify(depth, val, lab, radius=2)
    assert lab2[0, 1] == LABEL_DROP  # the nearer neighbour wins
    assert lab2[0, 3] == LABEL_DROP and lab2[0, 4] == LABEL_DROP
    assert lab2[0, 5] == LABEL_NONE and not np.isfinite(d[0, 5])  # beyond the radius


def test_dropped_rays_are_the_empty_cells_at_the_interpolated_range():
    ring = np.array([0, 0, 0])
    az = np.radians([-10.0, 0.0, 20.0]) + 1e-6
    img = organise(ring, az, np.array([10.0, 10.0, 20.0]), 1, 36)
    assert np.isfinite(img).sum() == 3
    pts = dropped_rays(img, np.array([0.0]))
    assert pts.shape == (33, 3)
    r = np.linalg.norm(pts, axis=1)
    az_p = np.degrees(np.arctan2(pts[:, 1], pts[:, 0]))
    between = (az_p > 0) & (az_p < 20)
    assert np.all((r[between] > 10) & (r[between] < 20))


def test_ring_recovery_follows_the_kitti_point_order():
    rng = np.random.default_rng(0)
    rows = []
    for k, el in enumerate(np.radians([2.0, 1.5, 1.0])):
        az = np.concatenate([np.linspace(0.01, 0.7, 50), np.linspace(-0.7, -0.01, 50)])
        r = 10 + rng.random(100)
        rows.append(np.stack([r * np.cos(el) * np.cos(az), r * np.cos(el) * np.sin(az), r * np.sin(el)], 1))
        assert k < 3
    ring = recover_rings(np.concatenate(rows))
    assert ring.tolist() == [0] * 100 + [1] * 100 + [2] * 100


def test_build_mask_labels_a_hole_in_a_wall_as_drop():
    # a wall 10 m ahead seen by 5 rings; a gap of missing returns in the middle of every ring
    el = np.radians(np.linspace(-2, 2, 5))
    az = np.radians(np.arange(-20, 20, 0.5))
    pts, ring = [], []
    for r, e in enumerate(el):
        keep = np.abs(np.degrees(az)) > 3
        a = az[keep]
        rr = 10 / (np.cos(e) * np.cos(a))
        pts.append(np.stack([rr * np.cos(e) * np.cos(a), rr * np.cos(e) * np.sin(a), rr * np.sin(e)], 1))
        ring.append(np.full(a.size, r))
    xyz, rings = np.concatenate(pts), np.concatenate(ring)
    f, w, h = 200.0, 200, 40
    proj = np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1.0]]) @ np.array(
        [[0, -1, 0, 0], [0, 0, -1, 0], [1, 0, 0, 0.0]]
    )
    m = build_mask(xyz, np.full(len(xyz), 0.5), proj, w, h, ring=rings, row_elevation=el, n_cols=720)
    assert m.points_in_image == len(xyz)
    assert m.drop_rays >= 5 * 11
    assert m.label[h // 2, w // 2] == LABEL_DROP
    assert m.label[h // 2, 65] == LABEL_RETURN and m.intensity[h // 2, 65] == pytest.approx(0.5)


def test_semantic_kitti_reader_reads_labels_and_poses(tmp_path: Path):
    seq = tmp_path / "sequences" / "03"
    for sub in ("velodyne", "image_2", "labels"):
        (seq / sub).mkdir(parents=True)
    pts = np.array([[10, 0, 0, 0.5], [12, 1, 0.2, 0.1]], np.float32)
    pts.tofile(seq / "velodyne" / "000000.bin")
    np.array([40 | (7 << 16), 10], np.uint32).tofile(seq / "labels" / "000000.label")
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(seq / "image_2" / "000000.png")
    p = " ".join(["1", "0", "15", "0", "0", "1", "10", "0", "0", "0", "1", "0"])
    tr = " ".join(["0", "-1", "0", "0", "0", "0", "-1", "0", "1", "0", "0", "0"])
    (seq / "calib.txt").write_text(f"P0: {p}\nP2: {p}\nTr: {tr}\n")
    (tmp_path / "poses").mkdir()
    (tmp_path / "poses" / "03.txt").write_text("1 0 0 5 0 1 0 0 0 0 1 0\n")
    frames = read_semantic_kitti(tmp_path, 3)
    assert len(frames) == 1
    fr = frames[0]
    assert fr.labels is not None
    assert (fr.labels & 0xFFFF).tolist() == [40, 10] and (fr.labels >> 16).tolist() == [7, 0]
    assert fr.pose is not None and fr.pose[0, 3] == 5
    # the first point is straight ahead of the camera: the image centre
    hom = fr.calib.projection() @ np.array([10, 0, 0, 1.0])
    assert hom[:2] / hom[2] == pytest.approx([15, 10])


def test_rinet_argument_defaults_to_the_bundled_model():
    p = argparse.ArgumentParser()
    add_rinet_argument(p)
    assert p.parse_args([]).rinet is None
    assert p.parse_args(["--rinet"]).rinet == BUNDLED
    assert p.parse_args(["--rinet", "m.onnx"]).rinet == "m.onnx"
    bundled = resolve_rinet_model(BUNDLED)
    assert bundled is not None and bundled.endswith("rinet_small.onnx")
    assert resolve_rinet_model(None) is None
