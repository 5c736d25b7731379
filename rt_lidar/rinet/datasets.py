"""Readers of the camera + lidar datasets RINet trains on: frames with an image each and the camera
projection of their points.

Layouts:

- KITTI odometry / SemanticKITTI (``sequences/NN/velodyne/``, ``image_2/``, ``calib.txt``, ``labels/``,
  ``poses.txt`` or ``poses/NN.txt``): read by :mod:`rt_lidar.dataset.reader`, the one reader of that
  layout, and given here a :class:`Calibration`. Image-2 projection ``P2 @ [Tr; 0 0 0 1]``.
- KITTI object: ``[training/]velodyne/``, ``image_2/``, ``calib/NNNNNN.txt`` with ``P0``-``P3``,
  ``R0_rect`` (9), ``Tr_velo_to_cam``, ``Tr_imu_to_velo``; projection ``P2 @ R0_rect @ Tr_velo_to_cam``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rt_lidar.dataset.errors import DatasetError
from rt_lidar.dataset.reader import (
    IMAGE_SUFFIXES,
    calib_values,
    find_image,
    read_calib_file,
    read_rgb,
    read_sequence,
    rigid,
    sequence_path,
)
from rt_lidar.errors import ConfigError
from rt_lidar.sinks.kitti import read_kitti_bin

__all__ = [
    "LAYOUTS",
    "Calibration",
    "LidarCameraFrame",
    "iter_frames",
    "kitti_object_frames",
    "kitti_odometry_frames",
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
    """(4, 4) pose of the frame (``poses.txt`` or ``poses/NN.txt``, left camera in the first frame), when
    present."""


def read_kitti_object_calib(path: str | Path) -> Calibration:
    """KITTI object ``calib/NNNNNN.txt``: P2 and ``R0_rect @ Tr_velo_to_cam``."""
    c = read_calib_file(path)
    p2 = calib_values(c, "P2", 12, path).reshape(3, 4)
    r0 = np.eye(4)
    r0[:3, :3] = calib_values(c, "R0_rect", 9, path).reshape(3, 3)
    return Calibration(p2, r0 @ rigid(calib_values(c, "Tr_velo_to_cam", 12, path)))


def read_kitti_odometry_calib(path: str | Path) -> Calibration:
    """KITTI odometry ``calib.txt``: P2 and ``Tr`` (velodyne -> rectified camera 0)."""
    c = read_calib_file(path)
    return Calibration(calib_values(c, "P2", 12, path).reshape(3, 4), rigid(calib_values(c, "Tr", 12, path)))


def _missing_image(image_dir: Path, stem: str) -> FileNotFoundError:
    return FileNotFoundError(f"{image_dir}: no image for frame {stem} ({'/'.join(IMAGE_SUFFIXES)})")


def kitti_object_frames(root: str | Path) -> Iterator[LidarCameraFrame]:
    """Frames of a KITTI object root (``root`` or ``root/training`` holding velodyne/ image_2/ calib/)."""
    base = Path(root)
    if not (base / "velodyne").is_dir() and (base / "training" / "velodyne").is_dir():
        base = base / "training"
    velo = base / "velodyne"
    if not velo.is_dir():
        raise DatasetError(f"{root}: no velodyne/ (KITTI object layout: velodyne/, image_2/, calib/)")
    for bin_path in sorted(velo.glob("*.bin")):
        stem = bin_path.stem
        calib = read_kitti_object_calib(base / "calib" / f"{stem}.txt")
        img = find_image(base / "image_2", stem)
        if img is None:
            raise _missing_image(base / "image_2", stem)
        yield LidarCameraFrame(stem, read_kitti_bin(bin_path), read_rgb(img), calib, img)


def kitti_odometry_frames(root: str | Path, sequence: str | int = "00") -> Iterator[LidarCameraFrame]:
    """Frames of one KITTI odometry / SemanticKITTI sequence (labels and poses when present), read by
    :func:`rt_lidar.dataset.reader.read_sequence`; every frame needs an image (FileNotFoundError)."""
    frames = read_sequence(root, sequence)
    seq = sequence_path(root, sequence)
    calib = read_kitti_odometry_calib(seq / "calib.txt")
    for fr in frames:
        if fr.image is None or fr.image_path is None:
            raise _missing_image(seq / "image_2", fr.name)
        yield LidarCameraFrame(fr.name, fr.points, fr.image, calib, fr.image_path, fr.labels, fr.pose)


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
