"""Readers of the camera + lidar datasets RINet trains on.

Layouts (DESIGN.md, "Dataset layouts"):

- KITTI odometry / SemanticKITTI: ``sequences/NN/velodyne/NNNNNN.bin`` (float32 x, y, z, reflectance),
  ``image_2/NNNNNN.png``, ``calib.txt`` (``P0:``..``P3:``, ``Tr:`` velodyne -> rectified cam0),
  ``poses/NN.txt`` (or ``sequences/NN/poses.txt``), ``times.txt``, ``labels/NNNNNN.label`` (uint32:
  semantic = low 16 bits, instance = high 16). Image-2 projection ``P2 @ [Tr; 0 0 0 1]``.
- KITTI object: ``[training/]velodyne/``, ``image_2/``, ``calib/NNNNNN.txt`` with ``P0``-``P3``,
  ``R0_rect`` (9), ``Tr_velo_to_cam``, ``Tr_imu_to_velo``; projection ``P2 @ R0_rect @ Tr_velo_to_cam``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from rt_lidar.errors import ConfigError
from rt_lidar.sinks.kitti import read_kitti_bin

__all__ = [
    "LAYOUTS",
    "Calibration",
    "LidarCameraFrame",
    "iter_frames",
    "kitti_object_frames",
    "kitti_odometry_frames",
    "read_calib_file",
    "read_kitti_object_calib",
    "read_kitti_odometry_calib",
    "read_semantic_kitti",
]

LAYOUTS = ("kitti-object", "kitti-odometry")


@dataclass(frozen=True)
class Calibration:
    """Camera projection of one frame: ``P2`` (3, 4) and ``velo_to_cam`` (4, 4) velodyne -> rectified
    camera 0 (R0_rect folded in)."""

    p2: np.ndarray
    velo_to_cam: np.ndarray

    def projection(self) -> np.ndarray:
        """The (3, 4) matrix taking homogeneous velodyne points to image-2 pixels (times depth)."""
        return self.p2 @ self.velo_to_cam


@dataclass
class LidarCameraFrame:
    """One frame: lidar points (N, 4) float32 x, y, z, reflectance in [0, 1]; RGB image (H, W, 3)."""

    name: str
    points: np.ndarray
    image: np.ndarray
    calib: Calibration
    image_path: Path
    labels: np.ndarray | None = None
    """SemanticKITTI labels (N,) uint32, when present."""
    pose: np.ndarray | None = None
    """(4, 4) pose of the frame (``poses/NN.txt``, left camera in the first frame), when present."""


def read_calib_file(path: str | Path) -> dict[str, np.ndarray]:
    """``KEY: v v v ...`` lines as float64 arrays (lines without a colon are skipped)."""
    out: dict[str, np.ndarray] = {}
    for line in Path(path).read_text().splitlines():
        if ":" not in line:
            continue
        key, _, rest = line.partition(":")
        try:
            out[key.strip()] = np.array([float(v) for v in rest.split()], dtype=np.float64)
        except ValueError as exc:
            raise ConfigError(f"{path}: key '{key.strip()}' holds a non-number: {exc}") from None
    return out


def _need(calib: dict[str, np.ndarray], key: str, size: int, path: str | Path) -> np.ndarray:
    if key not in calib:
        raise ConfigError(f"{path}: calibration key '{key}' is missing (have: {', '.join(sorted(calib))})")
    v = calib[key]
    if v.size != size:
        raise ConfigError(f"{path}: calibration key '{key}' needs {size} numbers, has {v.size}")
    return v


def _rigid(v12: np.ndarray) -> np.ndarray:
    m = np.eye(4)
    m[:3, :4] = v12.reshape(3, 4)
    return m


def read_kitti_object_calib(path: str | Path) -> Calibration:
    """KITTI object ``calib/NNNNNN.txt``: P2 and ``R0_rect @ Tr_velo_to_cam``."""
    c = read_calib_file(path)
    p2 = _need(c, "P2", 12, path).reshape(3, 4)
    r0 = np.eye(4)
    r0[:3, :3] = _need(c, "R0_rect", 9, path).reshape(3, 3)
    return Calibration(p2, r0 @ _rigid(_need(c, "Tr_velo_to_cam", 12, path)))


def read_kitti_odometry_calib(path: str | Path) -> Calibration:
    """KITTI odometry ``calib.txt``: P2 and ``Tr`` (velodyne -> rectified camera 0)."""
    c = read_calib_file(path)
    return Calibration(_need(c, "P2", 12, path).reshape(3, 4), _rigid(_need(c, "Tr", 12, path)))


def _read_rgb(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8)


def _image_for(image_dir: Path, stem: str) -> Path:
    for ext in (".png", ".jpg", ".jpeg"):
        p = image_dir / f"{stem}{ext}"
        if p.is_file():
            return p
    raise FileNotFoundError(f"{image_dir}: no image for frame {stem} (.png/.jpg)")


def kitti_object_frames(root: str | Path) -> Iterator[LidarCameraFrame]:
    """Frames of a KITTI object root (``root`` or ``root/training`` holding velodyne/ image_2/ calib/)."""
    base = Path(root)
    if not (base / "velodyne").is_dir() and (base / "training" / "velodyne").is_dir():
        base = base / "training"
    velo = base / "velodyne"
    if not velo.is_dir():
        raise FileNotFoundError(f"{root}: no velodyne/ (KITTI object layout: velodyne/, image_2/, calib/)")
    for bin_path in sorted(velo.glob("*.bin")):
        stem = bin_path.stem
        calib = read_kitti_object_calib(base / "calib" / f"{stem}.txt")
        img = _image_for(base / "image_2", stem)
        yield LidarCameraFrame(stem, read_kitti_bin(bin_path), _read_rgb(img), calib, img)


def _read_poses(path: Path) -> np.ndarray | None:
    if not path.is_file():
        return None
    rows = np.loadtxt(path, dtype=np.float64, ndmin=2)
    poses = np.tile(np.eye(4), (rows.shape[0], 1, 1))
    poses[:, :3, :4] = rows.reshape(-1, 3, 4)
    return poses


def kitti_odometry_frames(root: str | Path, sequence: str | int = "00") -> Iterator[LidarCameraFrame]:
    """Frames of one KITTI odometry / SemanticKITTI sequence (labels and poses when present)."""
    seq = f"{int(sequence):02d}" if str(sequence).isdigit() else str(sequence)
    base = Path(root) / "sequences" / seq
    velo = base / "velodyne"
    if not velo.is_dir():
        raise FileNotFoundError(f"{root}: no sequences/{seq}/velodyne/ (KITTI odometry layout)")
    calib = read_kitti_odometry_calib(base / "calib.txt")
    poses = _read_poses(Path(root) / "poses" / f"{seq}.txt")
    if poses is None:
        poses = _read_poses(base / "poses.txt")
    for bin_path in sorted(velo.glob("*.bin")):
        stem = bin_path.stem
        img = _image_for(base / "image_2", stem)
        label_path = base / "labels" / f"{stem}.label"
        labels = np.fromfile(label_path, dtype="<u4") if label_path.is_file() else None
        points = read_kitti_bin(bin_path)
        if labels is not None and labels.size != points.shape[0]:
            raise ConfigError(f"{label_path}: {labels.size} labels for {points.shape[0]} points")
        k = int(stem) if stem.isdigit() else -1
        pose = poses[k] if poses is not None and 0 <= k < len(poses) else None
        yield LidarCameraFrame(stem, points, _read_rgb(img), calib, img, labels, pose)


def read_semantic_kitti(root: str | Path, sequence: str | int = "00") -> list[LidarCameraFrame]:
    """All frames of a SemanticKITTI-layout sequence, labels (``semantic = labels & 0xFFFF``) and poses
    included where the files exist. The dataset generator writes this layout; this reads it back."""
    return list(kitti_odometry_frames(root, sequence))


def iter_frames(layout: str, root: str | Path, sequence: str | int = "00") -> Iterator[LidarCameraFrame]:
    """Frames of ``root`` in a named layout (:data:`LAYOUTS`)."""
    if layout == "kitti-object":
        return kitti_object_frames(root)
    if layout == "kitti-odometry":
        return kitti_odometry_frames(root, sequence)
    raise ConfigError(f"unknown dataset layout '{layout}'; known: {', '.join(LAYOUTS)}")
