"""Reading the KITTI odometry / SemanticKITTI layout: the one reader of it, used by the dataset generator's
users and tests and by RINet training (:mod:`rt_lidar.rinet.datasets`).

``sequences/NN/`` holds ``velodyne/NNNNNN.bin`` (float32 x, y, z, reflectance), ``labels/NNNNNN.label``
(uint32: semantic class low 16 bits, instance high 16), ``image_2/NNNNNN.png`` (or ``.jpg``),
``calib.txt`` (``P0:``..``P3:`` and ``Tr:`` velodyne -> rectified camera 0), ``poses.txt`` (or
``poses/NN.txt`` beside ``sequences/``; camera 0 in the first frame, 12 numbers a line) and
``times.txt``. Every file but the ``.bin`` clouds is optional. The calibration-file, image and cloud
helpers here also serve the KITTI object reader in :mod:`rt_lidar.rinet.datasets`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image

from rt_lidar.dataset.errors import DatasetError
from rt_lidar.dataset.labels import split_labels
from rt_lidar.sinks.kitti import read_kitti_bin

__all__ = [
    "IMAGE_SUFFIXES",
    "KittiFrame",
    "SequenceCalib",
    "calib_values",
    "find_image",
    "list_sequences",
    "read_calib",
    "read_calib_file",
    "read_labels",
    "read_poses",
    "read_rgb",
    "read_sequence",
    "rigid",
    "sequence_path",
]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
"""Image files a frame's camera image may be, in the order they are looked for."""


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
    ``pose`` (4, 4) camera-0 pose in the first frame or None; ``time_s``; ``image`` (H, W, 3) uint8 or
    None. ``index`` is the frame's place in the sequence, ``name`` its file stem (``000042``) and
    ``image_path`` the image file read, if any."""

    index: int
    points: np.ndarray
    labels: np.ndarray | None
    pose: np.ndarray | None
    time_s: float | None
    image: np.ndarray | None
    name: str
    image_path: Path | None

    @property
    def semantic(self) -> np.ndarray | None:
        """Semantic class per point (low 16 bits of the label)."""
        return None if self.labels is None else split_labels(self.labels)[0]

    @property
    def instance(self) -> np.ndarray | None:
        """Instance id per point (high 16 bits of the label)."""
        return None if self.labels is None else split_labels(self.labels)[1]


def read_calib_file(path: str | Path) -> dict[str, np.ndarray]:
    """``KEY: v v v ...`` lines of a KITTI calibration file as float64 arrays (lines without a colon
    are skipped); DatasetError naming the file and key when a value is not a number."""
    out: dict[str, np.ndarray] = {}
    for line in Path(path).read_text().splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        try:
            out[key.strip()] = np.array([float(v) for v in rest.split()], dtype=np.float64)
        except ValueError as exc:
            raise DatasetError(f"{path}: key '{key.strip()}' holds a non-number: {exc}") from None
    return out


def calib_values(calib: dict[str, np.ndarray], key: str, size: int, path: str | Path) -> np.ndarray:
    """``calib[key]`` (from :func:`read_calib_file` of ``path``), which must hold ``size`` numbers;
    DatasetError naming the file and key when it is missing or of another size."""
    if key not in calib:
        raise DatasetError(f"{path}: calibration key '{key}' is missing (have: {', '.join(sorted(calib))})")
    v = calib[key]
    if v.size != size:
        raise DatasetError(f"{path}: calibration key '{key}' needs {size} numbers, has {v.size}")
    return v


def rigid(v12: np.ndarray) -> np.ndarray:
    """(4, 4) homogeneous transform of 12 numbers, a (3, 4) row-major ``[R | t]``."""
    m = np.eye(4)
    m[:3, :4] = np.asarray(v12).reshape(3, 4)
    return m


def read_calib(path: str | Path) -> SequenceCalib:
    """A KITTI odometry ``calib.txt`` (``P0``..``P3``, ``Tr``); DatasetError naming the file and key
    when one is missing, malformed or of the wrong size."""
    c = read_calib_file(path)
    p0, p1, p2, p3 = (calib_values(c, f"P{i}", 12, path).reshape(3, 4) for i in range(4))
    return SequenceCalib((p0, p1, p2, p3), rigid(calib_values(c, "Tr", 12, path)))


def _loadtxt(path: Path, ndmin: Literal[1, 2]) -> np.ndarray:
    try:
        return np.loadtxt(path, dtype=np.float64, ndmin=ndmin)
    except ValueError as exc:
        raise DatasetError(f"{path}: not a table of numbers: {exc}") from None


def read_poses(path: str | Path) -> np.ndarray | None:
    """(F, 4, 4) poses of a KITTI poses file (12 numbers a line), None when there is no such file;
    DatasetError naming the file when a line does not hold 12 numbers."""
    p = Path(path)
    if not p.is_file():
        return None
    rows = _loadtxt(p, 2)
    if rows.size and rows.shape[1] != 12:
        raise DatasetError(f"{p}: a pose needs 12 numbers a line, has {rows.shape[1]}")
    out = np.tile(np.eye(4), (rows.shape[0], 1, 1))
    out[:, :3, :4] = rows.reshape(-1, 3, 4)
    return out


def read_labels(path: str | Path, n_points: int) -> np.ndarray | None:
    """(N,) uint32 SemanticKITTI labels of a ``.label`` file, None when there is no such file;
    DatasetError naming the file when it does not hold one label per point of its cloud."""
    p = Path(path)
    if not p.is_file():
        return None
    size = p.stat().st_size
    if size % 4:
        raise DatasetError(f"{p}: size {size} is not a multiple of 4 bytes, not a .label file")
    labels = np.fromfile(p, dtype="<u4")
    if labels.size != n_points:
        raise DatasetError(f"{p}: {labels.size} labels for {n_points} points")
    return labels


def find_image(image_dir: str | Path, stem: str) -> Path | None:
    """The image of frame ``stem`` in ``image_dir`` (the first of :data:`IMAGE_SUFFIXES`), or None."""
    for suffix in IMAGE_SUFFIXES:
        p = Path(image_dir) / f"{stem}{suffix}"
        if p.is_file():
            return p
    return None


def read_rgb(path: str | Path) -> np.ndarray:
    """(H, W, 3) uint8 RGB of an image file (any mode PIL reads is converted)."""
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8)


def list_sequences(root: str | Path) -> list[str]:
    """Names of the complete sequences under ``root/sequences`` (temporary folders are skipped)."""
    base = Path(root) / "sequences"
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))


def sequence_path(root: str | Path, sequence: str | int = "00") -> Path:
    """``root/sequences/<sequence>``, a number written with two digits (``3`` -> ``03``)."""
    name = f"{int(sequence):02d}" if str(sequence).isdigit() else str(sequence)
    return Path(root) / "sequences" / name


def read_sequence(
    root: str | Path, sequence: str | int = "00", sensor: str | None = None
) -> Iterator[KittiFrame]:
    """The frames of ``root/sequences/<sequence>`` (of a rig's run: ``sensor``'s,
    ``root/sequences/<sequence>/<sensor>``) in order (labels, pose, time and image where the files
    exist). A frame named by a number takes that line of the poses and times files, another its place
    in the sequence. DatasetError naming the file when one is malformed; raised at once when the
    sequence has no ``velodyne/``."""
    seq = sequence_path(root, sequence)
    if sensor is not None:
        seq = seq / sensor
    velo = seq / "velodyne"
    if not velo.is_dir():
        rel = seq.relative_to(Path(root) / "sequences")
        hint = ""
        if sensor is None and (seq / "rig.json").is_file():
            names = sorted(p.name for p in seq.iterdir() if (p / "velodyne").is_dir())
            hint = f"; a rig's run: name a sensor ({', '.join(names)})"
        raise DatasetError(f"{root}: no sequences/{rel}/velodyne/ (KITTI odometry layout){hint}")
    poses = read_poses(seq / "poses.txt")
    if poses is None:
        poses = read_poses(Path(root) / "poses" / f"{seq.name}.txt")
    times_path = seq / "times.txt"
    times = _loadtxt(times_path, 1) if times_path.is_file() else None
    return _frames(seq, sorted(velo.glob("*.bin")), poses, times)


def _frames(
    seq: Path, bins: list[Path], poses: np.ndarray | None, times: np.ndarray | None
) -> Iterator[KittiFrame]:
    for k, bin_path in enumerate(bins):
        stem = bin_path.stem
        row = int(stem) if stem.isdigit() else k
        points = read_kitti_bin(bin_path)
        labels = read_labels(seq / "labels" / f"{stem}.label", points.shape[0])
        image_path = find_image(seq / "image_2", stem)
        yield KittiFrame(
            k,
            points,
            labels,
            poses[row] if poses is not None and row < len(poses) else None,
            float(times[row]) if times is not None and row < len(times) else None,
            None if image_path is None else read_rgb(image_path),
            stem,
            image_path,
        )
