"""File sinks: a folder of PCD files, a folder of KITTI ``.bin`` files (one file a scan)."""

from __future__ import annotations

import json
from pathlib import Path

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import preset_to_dict
from rt_lidar.sinks.atomic import atomic_write
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink, target_dir
from rt_lidar.sinks.kitti import write_kitti_bin
from rt_lidar.sinks.pcd import intensity_dtype, write_pcd

__all__ = ["PCD_INTENSITY_CHOICES", "KittiFolderSink", "PcdFolderSink", "write_resolved_config"]


def write_resolved_config(folder: Path, context: SinkContext) -> None:
    """Write the resolved preset and scenario beside a recording (``rt_lidar_config.json``)."""
    doc = {"preset": preset_to_dict(context.preset), "scenario": context.scenario}
    with atomic_write(folder / "rt_lidar_config.json") as fh:
        fh.write(json.dumps(doc, indent=2).encode())


class _FolderSink:
    suffix = ""
    kind = ""

    def __init__(self, target: str, options: dict[str, str]) -> None:
        SinkOptions(self.kind, options)  # takes none
        self.folder = target_dir(target)
        self.count = 0
        self.context: SinkContext | None = None

    def open(self, context: SinkContext) -> None:
        self.context = context
        write_resolved_config(self.folder, context)

    def path_for(self, count: int) -> Path:
        return self.folder / f"{count:06d}{self.suffix}"

    def write(self, scan: Scan) -> None:
        self._write(self.path_for(self.count), scan)
        self.count += 1

    def _write(self, path: Path, scan: Scan) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


PCD_INTENSITY_CHOICES = ("sensor", "float32")


@register_sink("pcd")
class PcdFolderSink(_FolderSink):
    """``--sink pcd:DIR``: one binary PCD per scan with every point field (and ``epw_ns`` when computed);
    intensity in the sensor's own type (``intensity=sensor``, the default: uint8 for an 8-bit Velodyne,
    uint16 for Ouster's counts, float32 for a continuous intensity) or ``intensity=float32``."""

    suffix = ".pcd"
    kind = "pcd"

    def __init__(self, target: str, options: dict[str, str]) -> None:
        opts = SinkOptions(self.kind, options, {"intensity"})
        self.intensity_kind = opts.choice("intensity", "sensor", PCD_INTENSITY_CHOICES)
        self.folder = target_dir(target)
        self.count = 0
        self.context: SinkContext | None = None

    def _write(self, path: Path, scan: Scan) -> None:
        assert self.context is not None, "open() first"
        out = self.context.preset.output
        kind = None
        if self.intensity_kind == "sensor":
            kind = intensity_dtype(out.intensity_max, out.intensity_step)
        write_pcd(path, scan.points, scan.extras, intensity=kind)


@register_sink("kitti")
class KittiFolderSink(_FolderSink):
    """``--sink kitti:DIR``: one KITTI ``.bin`` (x, y, z, reflectance 0..1) per scan."""

    suffix = ".bin"
    kind = "kitti"

    def _write(self, path: Path, scan: Scan) -> None:
        assert self.context is not None, "open() first"
        write_kitti_bin(path, scan.points, self.context.preset.output.intensity_max)
