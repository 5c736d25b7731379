"""Mutual interference: false points from same-band sensors only, flagged, purely additive."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from rt_lidar.cli.main import main
from rt_lidar.points import PointFlag
from rt_lidar.rig.crosstalk import in_band
from rt_lidar.rig.experiment import _ground, facing_pair
from rt_lidar.rig.loop import RigLoop
from rt_lidar.sensor.presets import load_preset, preset_from_dict, preset_to_dict

FLAG = np.uint8(PointFlag.CROSSTALK)


def test_pass_bands() -> None:
    vlp, hdl, os1 = (load_preset(n) for n in ("VLP-16", "HDL-64E", "OS1-64"))
    assert in_band(vlp, hdl) and in_band(hdl, vlp)  # 903 and 905 nm share a 30 nm filter
    assert not in_band(vlp, os1) and not in_band(os1, vlp)  # 903 vs 865 nm


def _scans(crosstalk: bool) -> dict[str, list]:
    loop = RigLoop(facing_pair("VLP-16"), _ground(), sim_hz=20.0, crosstalk=crosstalk)
    got: dict[str, list] = {"near": [], "far": []}
    for _ in range(5):
        for name, scans in loop.step().items():
            got[name].extend(scans)
    return got


def test_false_points_are_flagged_and_added_to_the_true_scan() -> None:
    clean, noisy = _scans(False), _scans(True)
    total = 0
    for name in ("near", "far"):
        assert len(clean[name]) == len(noisy[name]) == 2
        for a, b in zip(clean[name], noisy[name], strict=True):
            false = (b.points["flags"] & FLAG) != 0
            total += int(false.sum())
            assert not np.any(a.points["flags"] & FLAG)
            # removing the flagged points gives back the scan without interference, byte for byte
            assert b.points[~false].tobytes() == a.points.tobytes()
            assert (a.fired, a.dropped) == (b.fired, b.dropped)  # false echoes of pulses that returned
            fp = b.points[false]
            rng = np.sqrt(fp["x"] ** 2 + fp["y"] ** 2 + fp["z"] ** 2)
            assert np.all((rng >= 0.5) & (rng <= 100.0))
            assert np.all(fp["return_id"] >= 1)  # after the pulse's own return
            assert np.all((fp["t"] >= 0) & (fp["t"] < 100_000_000))  # within the 10 Hz scan
            # read as the VLP-16 reports its own returns: whole numbers, at least one step
            assert np.all(fp["intensity"] == np.round(fp["intensity"])) and np.all(fp["intensity"] >= 1)
    assert total > 0


def test_validate_only_crosstalk(tmp_path: Path) -> None:
    assert main(["validate", "--only", "crosstalk", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())["crosstalk"]
    same, other = report["false_points_same_wavelength"], report["false_points_other_wavelength"]
    assert len(same) == len(other) == 5  # per scan
    assert min(same) > 0
    assert other == [0] * 5
    assert sum(report["false_points_os1_at_903nm"]) > 0  # the wavelength alone keeps them apart
    assert (tmp_path / "crosstalk.png").stat().st_size > 10_000
    assert "crosstalk" in (tmp_path / "report.md").read_text()


def test_direct_pulse_gives_a_false_point_at_half_the_distance() -> None:
    """Two one-beam (0 deg) heads facing each other 10 m apart, phase-locked so that they point at each
    other at the top of every turn, in an empty world: only the direct path is open, and each sees the
    other's pulse (fired at the same instant) after 10 m / c, i.e. a false point at 5 m straight ahead."""
    from rt_lidar.unreal_bridge.world import Pose, Scene, StaticTrajectory, World

    d = preset_to_dict(load_preset("VLP-16"))
    d["beams"] = [{"ring": 0, "elevation_deg": 0.0}]
    one_beam = preset_from_dict(d, "one-beam VLP-16")
    pair = facing_pair("VLP-16", phase_deg=0.0)  # both heads at azimuth 0 (facing) at whole seconds
    rig = dataclasses.replace(
        pair,
        sensors=tuple(
            dataclasses.replace(s, preset=dataclasses.replace(one_beam, scan=s.preset.scan))
            for s in pair.sensors
        ),
    )
    world = World(Scene(objects=[], ego=StaticTrajectory(Pose.identity()), sensor_mount=Pose.identity()))
    loop = RigLoop(rig, world, sim_hz=20.0, crosstalk=True)
    got: dict[str, list] = {"near": [], "far": []}
    for _ in range(5):
        for name, scans in loop.step().items():
            got[name].extend(scans)
    for name in ("near", "far"):
        assert len(got[name]) == 2
        for scan in got[name]:
            pts = scan.points
            assert pts.size == 1 and pts["flags"][0] == FLAG  # nothing else to see
            assert pts["return_id"][0] == 0  # the pulse's only return
            assert abs(float(pts["x"][0]) - 5.0) < 1e-4 and abs(float(pts["y"][0])) < 1e-4
            assert pts["t"][0] == 0  # fired at the top of the turn
