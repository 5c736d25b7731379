"""A rig takes the beam options (``--sub-rays``, ``--return-mode``, ``--epw``, ``--beam full``) and
sunlight for every sensor, in-process and over the bridge (where our server chooses the ``--beam full``
pulses): the same scans both ways, byte for byte, each sensor's beam in its summary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.cli.main import main
from rt_lidar.server.serve import ServeOptions, start_embedded_server

EXAMPLE = Path(__file__).parents[3] / "docs" / "rigs" / "roof-and-corners.toml"
NAMES = ("top", "front_left", "front_right")
FULL = ["--beam", "full", "--return-mode", "dual", "--epw"]


def _return_ids(folder: Path, name: str, k: int) -> np.ndarray:
    """The ``return_id`` of every point of a sensor's scan ``k``, read back from its PCD by pypcd4."""
    from pypcd4 import PointCloud

    pc = PointCloud.from_path(folder / name / "scans" / f"{k:06d}.pcd")
    return np.asarray(pc.pc_data["return_id"])


def test_a_rig_casts_every_sensor_with_the_beam_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["demo", "--rig", str(EXAMPLE), "--frames", "1", "--quiet", "--no-rosbag"]
    assert main([*base, *FULL, "--out", str(tmp_path / "full")]) == 0
    assert main([*base, "--sub-rays", "3", "--return-mode", "dual", "--out", str(tmp_path / "three")]) == 0
    assert main([*base, "--out", str(tmp_path / "plain")]) == 0
    assert "not applied" not in capsys.readouterr().err
    full = json.loads((tmp_path / "full" / "summary.json").read_text())["sensors"]
    three = json.loads((tmp_path / "three" / "summary.json").read_text())["sensors"]
    plain = json.loads((tmp_path / "plain" / "summary.json").read_text())["sensors"]
    for name in NAMES:
        beam = full[name]["beam"]
        assert beam["mode"] == "full" and beam["return_mode"] == "dual" and 0 < beam["bundled_share"] < 0.6
        assert three[name]["beam"] == {"mode": "fixed", "sub_rays": 3, "return_mode": "dual"}
        assert plain[name]["beam"]["sub_rays"] == 1 and plain[name]["beam"]["mode"] == "fixed"
    # the beam changed what the sensors report: second returns where there were none
    top_full, top_plain = (_return_ids(tmp_path / run, "top", 0) for run in ("full", "plain"))
    assert np.count_nonzero(top_full == 1) > 0 == np.count_nonzero(top_plain == 1)


def test_a_rig_takes_sunlight_for_every_sensor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pypcd4 import PointCloud

    argv = ["demo", "--rig", str(EXAMPLE), "--frames", "1", "--quiet", "--no-rosbag"]
    assert main([*argv, "--sun-lux", "80000", "--out", str(tmp_path / "sun")]) == 0
    assert "not applied" not in capsys.readouterr().err
    for name in NAMES:
        pc = PointCloud.from_path(tmp_path / "sun" / name / "scans" / "000000.pcd")
        ambient = np.asarray(pc.pc_data["ambient_w"])  # the sunlight each point's pulse saw
        assert ambient.size > 1000 and float(ambient.max()) > 0.0


SEVEN_SUN = ["--sub-rays", "7", "--return-mode", "dual", "--sun-lux", "50000"]


@pytest.mark.parametrize(
    "beam", [FULL, SEVEN_SUN, [*FULL, "--crosstalk"]], ids=["full", "seven-sun", "full-crosstalk"]
)
def test_a_bridged_rig_with_beam_options_equals_in_process(tmp_path: Path, beam: list[str]) -> None:
    served = start_embedded_server(ServeOptions(port=0, rig=str(EXAMPLE), paused=True, seed=0))
    try:
        bridged = tmp_path / "bridged"
        argv = ["run", "--rig", str(EXAMPLE), "--airsim", f"127.0.0.1:{served.port}", "--lockstep", *beam]
        assert main([*argv, "--frames", "2", "--out", str(bridged), "--quiet", "--no-rosbag"]) == 0
    finally:
        served.close()
    local = tmp_path / "local"
    argv = [
        "demo",
        "--rig",
        str(EXAMPLE),
        "--frames",
        "2",
        "--out",
        str(local),
        "--quiet",
        "--no-rosbag",
        *beam,
    ]
    assert main(argv) == 0
    summary = json.loads((bridged / "summary.json").read_text())
    local_summary = json.loads((local / "summary.json").read_text())
    for name in NAMES:
        assert summary["bridge"][name]["sector_mismatches"] == 0
        ran, want = summary["sensors"][name]["beam"], local_summary["sensors"][name]["beam"]
        assert ran["mode"] == want["mode"] and ran.get("sub_rays") == want.get("sub_rays")
        for k in range(2):
            a = (bridged / name / "scans" / f"{k:06d}.bin").read_bytes()
            b = (local / name / "scans" / f"{k:06d}.bin").read_bytes()
            assert len(a) > 16_000 and a == b
        assert np.count_nonzero(_return_ids(bridged, name, 1) == 1) > 0
