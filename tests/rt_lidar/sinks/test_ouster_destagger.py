"""A vertical pole reads as a vertical line after ouster-sdk's destagger: the beams of an OS1 look up to
~3 deg apart in azimuth (8 columns at 1024 a turn), so in the staggered image the pole's pixels spread
over columns; ``core.destagger`` with the ``pixel_shift_by_row`` we wrote lines them up."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from peers import needs_peer
from test_ouster_profiles import _decode, _write

from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.unreal_bridge.world import Pose, Scene, StaticTrajectory

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scenes import panel

pytestmark = needs_peer("ouster")


def _pole_scene(distance_m: float, y_m: float) -> Scene:
    """A 0.15 m wide, 12 m tall pole (a panel facing the sensor) and nothing else."""
    names = list(Scene(objects=[]).material_names)
    pole = panel("pole", "concrete", names, (distance_m, y_m, 0.0), (0, 0.075, 0), (0, 0, 6.0), 5)
    return Scene(
        objects=[pole],
        material_names=names,
        ego=StaticTrajectory(Pose.identity()),
        sensor_mount=Pose.identity(),
    )


OS1_128_AZIMUTHS = [4.27, 1.43, -1.39, -4.23] * 32
"""An OS-1-128's beam azimuths (deg; fw 2.4.0 metadata in ouster-sdk's tests, to 0.05 deg): the
preset has none, so the file gives them and the packets move each beam by them."""


@pytest.mark.parametrize("preset", ["OS1-64", "OS1-128"])
def test_a_vertical_pole_is_a_vertical_line_after_destagger(tmp_path, preset):
    scan = build_pipeline(preset, _pole_scene(8.0, 2.0), seed=0).pipeline.scans(1)[0]
    assert scan.points.size > 40  # the pole, every beam that reaches it
    options = {"profile": "RNG19"}
    if preset == "OS1-128":
        given = tmp_path / "given.json"
        given.write_text(json.dumps({"beam_azimuth_angles": OS1_128_AZIMUTHS, "lidar_mode": "1024x10"}))
        options["metadata"] = str(given)
    pcap = _write(tmp_path, preset, [scan], options)
    meta = tmp_path / "os.json"
    dec = _decode(tmp_path, pcap, meta, meta)
    staggered, dest = dec["RANGE"][0], dec["destaggered"][0]
    rows_hit = np.flatnonzero((dest > 0).any(axis=1))
    assert rows_hit.size > 0.3 * dest.shape[0]

    def columns(img: np.ndarray) -> np.ndarray:
        rows, cols = np.nonzero(img)
        return np.array([np.median(cols[rows == r]) for r in np.unique(rows)])

    c_dest, c_stag = columns(dest), columns(staggered)
    # destaggered: one column (the pole is 0.15 m = 1.1 deg wide at 8 m: 3 columns; every row's
    # middle within a column of every other's)
    assert np.ptp(c_dest) <= 1.0, np.ptp(c_dest)
    # staggered: the rows' azimuth offsets spread the pole over many columns
    assert np.ptp(c_stag) >= 8.0, np.ptp(c_stag)
    shifts = json.loads(meta.read_text())["lidar_data_format"]["pixel_shift_by_row"]
    assert max(shifts) - min(shifts) >= 8
