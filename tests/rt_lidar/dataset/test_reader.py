"""The one SemanticKITTI reader: what it reads, and that bad files are named with what is wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rt_lidar.dataset import DatasetError, read_calib, read_sequence
from rt_lidar.rinet.datasets import read_semantic_kitti

P = "1 0 15 0 0 1 10 0 0 0 1 0"
TR = "0 -1 0 0 0 0 -1 0 1 0 0 0"


def _sequence(root: Path, stems: tuple[str, ...] = ("000000", "000002")) -> Path:
    seq = root / "sequences" / "03"
    for sub in ("velodyne", "image_2", "labels"):
        (seq / sub).mkdir(parents=True)
    for k, stem in enumerate(stems):
        np.full((k + 2, 4), k, np.float32).tofile(seq / "velodyne" / f"{stem}.bin")
        np.arange(k + 2, dtype=np.uint32).tofile(seq / "labels" / f"{stem}.label")
        Image.fromarray(np.full((4, 6, 3), k, np.uint8)).save(seq / "image_2" / f"{stem}.jpg", quality=100)
    (seq / "calib.txt").write_text("".join(f"P{i}: {P}\n" for i in range(4)) + f"Tr: {TR}\n")
    (seq / "poses.txt").write_text("".join(f"1 0 0 {x} 0 1 0 0 0 0 1 0\n" for x in range(3)))
    (seq / "times.txt").write_text("0.0\n0.1\n0.2\n")
    return seq


def test_both_views_read_the_same_frames(tmp_path: Path) -> None:
    _sequence(tmp_path)
    ours = list(read_sequence(tmp_path, 3))
    theirs = read_semantic_kitti(tmp_path, "03")
    assert [f.name for f in ours] == [f.name for f in theirs] == ["000000", "000002"]
    assert [f.index for f in ours] == [0, 1]
    # a frame named by a number takes that line of poses.txt and times.txt
    assert [f.pose[0, 3] for f in ours if f.pose is not None] == [0, 2]
    assert [f.time_s for f in ours] == [0.0, 0.2]
    for a, b in zip(ours, theirs, strict=True):
        assert a.image is not None and a.image_path is not None and a.image_path.suffix == ".jpg"
        np.testing.assert_array_equal(a.image, b.image)
        np.testing.assert_array_equal(a.labels, b.labels)
        np.testing.assert_allclose(a.pose, b.pose)
        np.testing.assert_allclose(
            b.calib.projection(), read_calib(tmp_path / "sequences/03/calib.txt").image2_projection()
        )


@pytest.mark.parametrize(
    ("file", "content", "match"),
    [
        ("labels/000002.label", b"\0" * 4, r"000002\.label: 1 labels for 3 points"),
        ("labels/000000.label", b"\0" * 5, r"000000\.label: size 5 is not a multiple of 4 bytes"),
        ("poses.txt", b"1 2 3\n", r"poses\.txt: a pose needs 12 numbers a line, has 3"),
        ("times.txt", b"soon\n", r"times\.txt: not a table of numbers"),
    ],
)
def test_a_bad_file_is_named(tmp_path: Path, file: str, content: bytes, match: str) -> None:
    (_sequence(tmp_path) / file).write_bytes(content)
    with pytest.raises(DatasetError, match=match):
        list(read_sequence(tmp_path, 3))
    with pytest.raises(DatasetError, match=match):
        read_semantic_kitti(tmp_path, 3)


def test_calib_and_layout_errors_name_the_file_and_key(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"no sequences/03/velodyne/"):
        read_sequence(tmp_path, 3)
    seq = _sequence(tmp_path)
    calib = seq / "calib.txt"
    calib.write_text(f"P0: {P}\nP2: {P}\nTr: {TR}\n")
    with pytest.raises(
        DatasetError, match=r"calib\.txt: calibration key 'P1' is missing \(have: P0, P2, Tr\)"
    ):
        read_calib(calib)
    assert len(read_semantic_kitti(tmp_path, 3)) == 2  # RINet needs only P2 and Tr
    calib.write_text(f"P2: {P}\nTr: 1 2 x\n")
    with pytest.raises(DatasetError, match=r"calib\.txt: key 'Tr' holds a non-number"):
        read_semantic_kitti(tmp_path, 3)
    calib.write_text(f"P2: {P}\nTr: 1 2 3\n")
    with pytest.raises(DatasetError, match=r"calib\.txt: calibration key 'Tr' needs 12 numbers, has 3"):
        read_semantic_kitti(tmp_path, 3)


def test_rinet_needs_an_image_for_every_frame(tmp_path: Path) -> None:
    seq = _sequence(tmp_path)
    (seq / "image_2" / "000002.jpg").unlink()
    assert [f.image is None for f in read_sequence(tmp_path, 3)] == [False, True]
    with pytest.raises(FileNotFoundError, match=r"image_2: no image for frame 000002 \(\.png/\.jpg/\.jpeg\)"):
        read_semantic_kitti(tmp_path, 3)
