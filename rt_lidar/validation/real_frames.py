"""The real scans ``rt-lidar validate --only realism`` sets beside the simulated ones: those of the shared
reference (``../shared/reference/real``), those vendored under ``tests/data/real`` (public sample data of
datasets and driver repositories; their README names each source and licence), and the user's own
(``--real PRESET=PATH``).

Each frame names the preset it stands beside (the same sensor model, or its closest kin: an OS1-32 beside
the OS1-64). A frame recorded indoors (nine tenths of its returns within 15 m) has no road to measure: only
its sensor statistics (zeros beyond 40 m, raydrop, largest intensity) are compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.real_formats import detect_format, read_real_scan
from rt_lidar.validation.realism_grid import ScanGrid, read_kitti_bin, read_ouster_legacy_pcap

__all__ = [
    "INDOOR_RANGE_M",
    "RealFrame",
    "is_outdoor",
    "parse_real_option",
    "read_frame",
    "shared_frames",
    "shared_real_dir",
    "vendored_frames",
    "vendored_real_dir",
]

INDOOR_RANGE_M = 15.0
"""A frame whose 90th percentile of return range is below this is indoors (no road statistics)."""


@dataclass(frozen=True)
class RealFrame:
    """One real scan and the preset whose simulated scans it stands beside."""

    preset: str
    path: Path
    label: str
    """Short name in the tables and the plot (``nuScenes HDL-32E``)."""
    origin: str
    """``shared`` (../shared/reference/real), ``vendored`` (tests/data/real) or ``user`` (--real)."""
    meta: Path | None = None
    """The metadata or calibration file it is read with (Ouster JSON, KITTI calib.txt), if any."""
    kitti_view: bool = False
    """The frame is KITTI's camera-2 crop: its raydrop compares with the simulated scans' same crop."""
    grid: ScanGrid | None = field(default=None, compare=False, repr=False)
    """The frame as already read (``--real`` reads it when parsed), so it is not read again."""


def shared_real_dir() -> Path | None:
    """``../shared/reference/real`` beside the checkout (or above a worktree), None where absent."""
    for up in Path(__file__).resolve().parents:
        cand = up / "shared" / "reference" / "real"
        if cand.is_dir():
            return cand
    return None


def vendored_real_dir() -> Path | None:
    """``tests/data/real`` of the checkout this package runs from (None in an installed wheel)."""
    cand = Path(__file__).resolve().parents[2] / "tests" / "data" / "real"
    return cand if cand.is_dir() else None


def shared_frames(root: Path | None) -> list[RealFrame]:
    """KITTI's HDL-64E frame 000008 and the Ouster OS1-64 frame of the shared reference folder ``root``
    (:func:`shared_real_dir`), where present."""
    if root is None:
        return []
    out = []
    k = root / "kitti_000008"
    if (k / "velodyne_000008.bin").exists():
        out.append(
            RealFrame("HDL-64E", k / "velodyne_000008.bin", "KITTI HDL-64E", "shared", k / "calib.txt", True)
        )
    o = root / "ouster_os1_64"
    if (o / "OS-1-64_1024x10_fw20.pcap").exists():
        out.append(
            RealFrame(
                "OS1-64",
                o / "OS-1-64_1024x10_fw20.pcap",
                "Ouster OS1-64 (indoors)",
                "shared",
                o / "OS-1-64_sensor_config_reduced.json",
            )
        )
    return out


VENDORED = (
    ("HDL-32E", "HDL-32E/nuscenes_LIDAR_TOP_1532402927647951.pcd.bin", "nuScenes HDL-32E"),
    ("VLP-32C", "VLP-32C/av2_up_lidar_315966265259836000.pcd", "Argoverse 2 VLP-32C"),
    ("VLP-32C", "VLP-32C/vlp32c_nebula_1713492677.pcap", "nebula VLP-32C (indoors)"),
    ("VLS-128", "VLS-128/vls128_nebula_1614315746.pcap", "nebula VLS-128"),
    ("OS1-64", "OS1-32/OS-1-32-G_v2.1.1_1024x10.pcap", "Ouster OS1-32 gen 2"),
)
"""(preset, file under tests/data/real, label) of the vendored frames (tests/data/real/README.md)."""


def vendored_frames() -> list[RealFrame]:
    """The frames vendored under ``tests/data/real`` (none where that folder is absent)."""
    root = vendored_real_dir()
    if root is None:
        return []
    return [RealFrame(p, root / f, label, "vendored") for p, f, label in VENDORED if (root / f).exists()]


def parse_real_option(text: str) -> RealFrame:
    """``PRESET=PATH`` (``--real``) as a frame; a preset that is not shipped, a missing file, one whose
    format is not known or that cannot be read is a :class:`ConfigError` naming it."""
    preset, sep, path = text.partition("=")
    if not sep or not preset or not path:
        raise ConfigError(f"--real {text!r}: must be PRESET=PATH (e.g. --real HDL-32E=scan.pcd.bin)")
    try:
        p = load_preset(preset)
    except ConfigError as exc:
        raise ConfigError(f"--real {text!r}: {exc}") from None
    try:
        fmt = detect_format(path)
        grid = read_real_scan(path, p)  # read here, so a file that cannot be is refused before simulating
    except ConfigError as exc:
        raise ConfigError(f"--real {text!r}: {exc}") from None
    calib = Path(path).parent / "calib.txt"
    kitti_view = fmt == "kitti-bin" and p.name.upper().startswith("HDL-64") and calib.exists()
    meta = calib if kitti_view else None
    return RealFrame(p.name, Path(path), Path(path).name, "user", meta, kitti_view, grid)


def read_frame(frame: RealFrame) -> ScanGrid:
    """The frame on its firing grid (a file that cannot be read is a :class:`RecordingError`)."""
    if frame.grid is not None:
        return frame.grid
    if frame.origin == "shared" and frame.kitti_view:
        return read_kitti_bin(frame.path, frame.meta)
    if frame.origin == "shared" and frame.meta is not None:
        return read_ouster_legacy_pcap(frame.path, frame.meta)
    return read_real_scan(frame.path, frame.preset)


def is_outdoor(grid: ScanGrid) -> bool:
    """Nine tenths of the returns are not within :data:`INDOOR_RANGE_M`: there is a road to measure."""
    r = grid.range_m[grid.returned & grid.in_view]
    return bool(r.size) and float(np.percentile(r, 90)) >= INDOOR_RANGE_M
