"""Reading a SemanticKITTI / KITTI-odometry sequence back: points, labels, poses, times, calibration and
the camera images when there are any.

The RINet training reader (:func:`rt_lidar.rinet.datasets.read_semantic_kitti`) reads the same layout
but needs an image for every frame; this one works with or without ``image_2/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from rt_lidar.dataset.errors import DatasetError
from rt_lidar.sinks.kitti import read_kitti_bin

__all__ = ["KittiFrame", "SequenceCalib", "list_sequences", "read_calib", "read_sequence"]


@dataclass(frozen=True)
class SequenceCalib:
    """``P0``..``P3`` (3, 4) and ``Tr`` (4, 4, velodyne -> camera 0) of a sequence."""

    p: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    tr: np.ndarray

    def image2_projection(self) -> np.ndarray:
        """(3, 4): homogeneous velodyne points to image-2 pixels times depth, ``P2 @ Tr``."""
        return self.p[2] @ self.tr


@dataclass
class KittiFrame:
    """One frame: ``points`` (N, 4) float32 x, y, z, reflectance; ``labels`` (N,) uint32 or None;
    ``pose`` (4, 4) camera-0 pose in the first frame or None; ``time_s``; ``image`` (H, W, 3) or None."""

    index: int
    points: np.ndarray
    labels: np.ndarray | None
    pose: np.ndarray | None
    time_s: float | None
    image: np.ndarray | None

    @property
    def semantic(self) -> np.ndarray | None:
        """Semantic class per point (low 16 bits of the label)."""
        return None if self.labels is None else (self.labels & 0xFFFF).astype(np.uint16)

    @property
    def instance(self) -> np.ndarray | None:
        """Instance id per point (high 16 bits of the label)."""
        return None if self.labels is None else (self.labels >> 16).astype(np.uint16)


def list_sequences(root: str | Path) -> list[str]:
    """Names of the complete sequences under ``root/sequences`` (temporary folders are skipped)."""
    base = Path(root) / "sequences"
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))


def read_calib(path: str | Path) -> SequenceCalib:
    """A KITTI odometry ``calib.txt``; DatasetError naming the file and key when one is missing."""
    rows: dict[str, np.ndarray] = {}
    for line in Path(path).read_text().splitlines():
        key, sep, rest = line.partition(":")
        if sep:
            rows[key.strip()] = np.array(rest.split(), dtype=np.float64)
    mats = []
    for key in ("P0", "P1", "P2", "P3", "Tr"):
        if rows.get(key, np.empty(0)).size != 12:
            raise DatasetError(f"{path}: key '{key}' must hold 12 numbers")
        mats.append(rows[key].reshape(3, 4))
    tr = np.eye(4)
    tr[:3] = mats[4]
    return SequenceCalib((mats[0], mats[1], mats[2], mats[3]), tr)


def _poses(path: Path) -> np.ndarray | None:
    if not path.is_file():
        return None
    rows = np.loadtxt(path, dtype=np.float64, ndmin=2)
    out = np.tile(np.eye(4), (rows.shape[0], 1, 1))
    out[:, :3, :] = rows.reshape(-1, 3, 4)
    return out


def read_sequence(root: str | Path, sequence: str | int = "00") -> Iterator[KittiFrame]:
    """The frames of ``root/sequences/<sequence>`` in order."""
    name = f"{int(sequence):02d}" if str(sequence).isdigit() else str(sequence)
    seq = Path(root) / "sequences" / name
    velo = seq / "velodyne"
    if not velo.is_dir():
        raise DatasetError(f"{root}: no sequences/{name}/velodyne/ (KITTI odometry layout)")
    poses = _poses(seq / "poses.txt")
    if poses is None:
        poses = _poses(Path(root) / "poses" / f"{name}.txt")
    times_path = seq / "times.txt"
    times = np.loadtxt(times_path, dtype=np.float64, ndmin=1) if times_path.is_file() else None
    for k, path in enumerate(sorted(velo.glob("*.bin"))):
        stem = path.stem
        points = read_kitti_bin(path)
        label_path = seq / "labels" / f"{stem}.label"
        labels = np.fromfile(label_path, dtype="<u4") if label_path.is_file() else None
        if labels is not None and labels.size != points.shape[0]:
            raise DatasetError(f"{label_path}: {labels.size} labels for {points.shape[0]} points")
        img_path = seq / "image_2" / f"{stem}.png"
        image = None
        if img_path.is_file():
            with Image.open(img_path) as im:
                image = np.asarray(im.convert("RGB"))
        yield KittiFrame(
            k, points, labels,
            poses[k] if poses is not None and k < len(poses) else None,
            float(times[k]) if times is not None and k < len(times) else None,
            image,
        )  # fmt: skip
