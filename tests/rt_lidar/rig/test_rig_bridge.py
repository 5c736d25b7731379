"""A rig over the AirSim bridge (``serve --rig`` + ``run --rig --lockstep``) gives every sensor the
same scans as in-process, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rt_lidar.cli.main import main
from rt_lidar.server.serve import ServeOptions, start_embedded_server

EXAMPLE = Path(__file__).parents[3] / "docs" / "rigs" / "roof-and-corners.toml"
NAMES = ("top", "front_left", "front_right")


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_bridged_rig_equals_in_process(tmp_path: Path, transport: str) -> None:
    served = start_embedded_server(ServeOptions(port=0, rig=str(EXAMPLE), paused=True, seed=0))
    try:
        bridged = tmp_path / "bridged"
        argv = ["run", "--rig", str(EXAMPLE), "--airsim", f"127.0.0.1:{served.port}", "--lockstep"]
        argv += ["--shm"] if transport == "shm" else []
        assert main([*argv, "--frames", "2", "--out", str(bridged), "--quiet", "--no-rosbag"]) == 0
    finally:
        served.close()
    local = tmp_path / "local"
    argv = ["demo", "--rig", str(EXAMPLE), "--frames", "2", "--out", str(local), "--quiet", "--no-rosbag"]
    assert main(argv) == 0
    summary = json.loads((bridged / "summary.json").read_text())
    for name in NAMES:
        assert summary["bridge"][name]["sector_mismatches"] == 0
        assert summary["bridge"][name]["transport"] == transport
        for k in range(2):
            a = (bridged / name / "scans" / f"{k:06d}.bin").read_bytes()
            b = (local / name / "scans" / f"{k:06d}.bin").read_bytes()
            assert len(a) > 16_000 and a == b


def test_run_rig_needs_lockstep(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--rig", str(EXAMPLE), "--airsim", "127.0.0.1:9"]) == 2
    assert "--lockstep" in capsys.readouterr().err


def test_rig_server_settings_name_every_lidar_at_its_mount() -> None:
    from rt_lidar.rig import load_rig
    from rt_lidar.rig.airsim import rig_airsim_settings
    from rt_lidar.unreal_bridge import AirSimClient

    served = start_embedded_server(ServeOptions(port=0, rig=str(EXAMPLE), paused=True))
    try:
        with AirSimClient("127.0.0.1", served.port, timeout=30.0) as client:
            got = json.loads(client.get_settings_string())["Vehicles"]["PhysXCar"]["Sensors"]
    finally:
        served.close()
    want = rig_airsim_settings(load_rig(EXAMPLE))["Vehicles"]["PhysXCar"]["Sensors"]
    assert list(got) == list(want) == list(NAMES)
    for name in NAMES:
        for key, value in want[name].items():
            assert got[name][key] == pytest.approx(value, abs=1e-9), (name, key)
