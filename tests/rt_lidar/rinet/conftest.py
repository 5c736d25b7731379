"""Shared fixtures of the RINet tests: the real KITTI frame laid out as a KITTI object root."""

from __future__ import annotations

from pathlib import Path

import pytest

KITTI_FRAME = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "real" / "kitti_000008"


@pytest.fixture
def kitti_object_root(tmp_path: Path) -> Path:
    """``tmp/training/{velodyne,image_2,calib}/000008.*`` linked to the reference frame."""
    if not KITTI_FRAME.is_dir():
        pytest.skip("../shared/reference/real/kitti_000008 not present")
    base = tmp_path / "kitti" / "training"
    for sub, src in (
        ("velodyne", "velodyne_000008.bin"),
        ("image_2", "image_2_000008.png"),
        ("calib", "calib.txt"),
    ):
        (base / sub).mkdir(parents=True)
        suffix = Path(src).suffix
        (base / sub / f"000008{suffix}").symlink_to(KITTI_FRAME / src)
    return tmp_path / "kitti"
