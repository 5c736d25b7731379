"""Shared fixtures of the sink tests: a few real pipeline scans per preset (cached per session)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import SensorPreset


@functools.lru_cache(maxsize=8)
def _scans(preset: str | SensorPreset, n: int, return_mode: str | None = None) -> tuple[Scan, ...]:
    physics = None if return_mode is None else PhysicsConfig(beam=BeamConfig(return_mode=return_mode))
    built = build_pipeline(preset, "street", seed=0, physics=physics)
    return tuple(built.pipeline.scans(n))


@pytest.fixture(scope="session")
def pipeline_scans():
    """``pipeline_scans(preset, n[, return_mode])`` -> n consecutive scans of the street scene, in the
    preset's return mode or ``return_mode`` (``"dual"``: the simulator's own second returns; do not
    modify)."""
    return _scans


def with_second_returns(
    scan: Scan, every: int = 3, factor: float = 1.25, preset: SensorPreset | None = None
) -> Scan:
    """A copy of ``scan`` where every ``every``-th point gains a farther, weaker second return.

    The twin lies on its pulse's beam, ``factor`` times as far along it: for a ``preset`` whose beams
    start off the sensor centre (Velodyne offsets), from the beam's origin along its direction, placed
    as the vendor's decoder places that range (:func:`~rt_lidar.sensor.beam_origins.place_as_decoded`);
    without origins (or no ``preset``) the point scaled from the centre, which is the same line."""
    pts = scan.points
    twin = pts[::every].copy()
    if preset is not None and preset.beam_origins_m is not None:
        from rt_lidar.sensor.beam_origins import firing_geometry, place_as_decoded, ranges_from_decoded

        d, o = firing_geometry(preset, np.int64(scan.start_ns) + twin["t"].astype(np.int64), twin["ring"])
        far = ranges_from_decoded(preset, twin, o, d) * factor
        for k, axis in enumerate("xyz"):
            twin[axis] = (d[:, k] * far).astype(np.float32)
        place_as_decoded(preset, twin, o, d, far)
    else:
        for axis in ("x", "y", "z"):
            twin[axis] *= np.float32(factor)
    twin["intensity"] = np.floor(twin["intensity"] * 0.5)
    twin["return_id"] = 1
    merged = np.concatenate([pts, twin])
    merged = merged[np.lexsort((merged["return_id"], merged["ring"], merged["t"]))]
    return Scan(scan.index, scan.start_ns, merged, scan.fired, scan.dropped, scan.frames)


def pcap_of(
    make_sink: Callable[[str, dict[str, str]], Any],
    path: Path,
    preset: SensorPreset,
    scans: list[Scan],
    mode: str,
    fake_second_returns: bool = True,
) -> list[Scan]:
    """Write ``scans`` of ``preset`` to ``path`` with the pcap sink ``make_sink`` in return ``mode`` (dual,
    with ``fake_second_returns``: every third point gains a second return on its beam first; without,
    the scans' own second returns); returns the scans as written."""
    from rt_lidar.sinks.base import SinkContext

    if mode == "dual" and fake_second_returns:
        scans = [with_second_returns(s, preset=preset) for s in scans]
    sink = make_sink(str(path), {"mode": mode})
    sink.open(SinkContext(preset))
    for s in scans:
        sink.write(s)
    sink.close()
    return scans


def velodyne_pcap_of(
    path: Path, preset: SensorPreset, scans: list[Scan], mode: str, fake_second_returns: bool = True
) -> list[Scan]:
    """:func:`pcap_of` with the velodyne-pcap sink."""
    from rt_lidar.sinks.velodyne import velodyne_pcap_sink

    return pcap_of(velodyne_pcap_sink, path, preset, scans, mode, fake_second_returns)


_BENCH = Path(__file__).resolve().parents[3] / "tools" / "bench"
if str(_BENCH) not in sys.path:
    sys.path.insert(0, str(_BENCH))
