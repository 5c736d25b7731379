"""``--model`` and ``--lidar-mode`` beside ``--preset``: what a vendor calibration file does not say.

They become part of the preset reference (``FILE#model=M,lidar_mode=X``, :func:`vendor_ref`), so a run's
``config.json``, a rig or a sweep file holds them with the file and ``--config`` re-runs it.
"""

from __future__ import annotations

import argparse

from rt_lidar.errors import ConfigError
from rt_lidar.sensor.vendor import is_vendor_ref, vendor_ref

__all__ = ["PRESET_HELP", "add_vendor_arguments", "preset_ref"]

PRESET_HELP = (
    "sensor preset: a name (see 'presets list'), a preset TOML, or the sensor's own calibration file "
    "(Ouster metadata JSON, Velodyne YAML / db.xml, Hesai angle CSV / AT128 .dat, RoboSense angle.csv)"
)


def add_vendor_arguments(p: argparse.ArgumentParser) -> None:
    """``--model`` and ``--lidar-mode`` (for a vendor file given as ``--preset`` or ``FILE``)."""
    p.add_argument(
        "--model",
        default=None,
        metavar="PRODUCT",
        help="the vendor's product name where a calibration file does not say it (VLP-32A, Puck Hi-Res, "
        "PandarXT-32, OT128, RS-Bpearl, ...; case and punctuation not significant)",
    )
    p.add_argument(
        "--lidar-mode",
        default=None,
        metavar="COLSxHZ",
        help="an Ouster beam-intrinsics file's lidar mode (e.g. 1024x10); overrides a metadata file's",
    )


def preset_ref(preset: str, model: str | None, lidar_mode: str | None) -> str:
    """The preset reference of ``--preset`` with ``--model`` / ``--lidar-mode`` folded in."""
    if model is None and lidar_mode is None:
        return preset
    if not is_vendor_ref(preset):
        flag = "--model" if model is not None else "--lidar-mode"
        raise ConfigError(f"{flag}: applies to a vendor calibration file; preset {preset!r} is a preset")
    return vendor_ref(preset, model, lidar_mode)
