"""Mutual interference over the bridge (``serve --rig`` + ``run --rig --lockstep --crosstalk``) gives every
sensor the same false points as in-process (``demo --rig --crosstalk``), byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.bridge.hits import hits_from_wire, hits_to_wire
from rt_lidar.cli.main import main
from rt_lidar.errors import RtLidarError
from rt_lidar.pipeline.builder import build_world
from rt_lidar.pipeline.frame_loop import Sensed
from rt_lidar.pipeline.sources import interpolate_pose_samples
from rt_lidar.rig.crosstalk import CrosstalkSensor, false_points
from rt_lidar.rig.experiment import facing_pair
from rt_lidar.rig.loop import RigLoop
from rt_lidar.server.serve import ServeOptions, start_embedded_server
from rt_lidar.unreal_bridge import AirSimClient, FluPose
from rt_lidar.unreal_bridge.hits_codec import decode_hits, encode_hits

FACING = """\
[[sensor]]
name = "near"
preset = "VLP-16"
mount = { xyz = [0.0, 0.0, 1.0] }
phase_deg = 0.0

[[sensor]]
name = "far"
preset = "VLP-16"
phase_deg = 225.0
mount = { xyz = [10.0, 0.0, 1.0], rpy_deg = [0.0, 0.0, 180.0] }
"""
"""Two VLP-16s facing each other 10 m apart on the street's moving car; at this phase their pulses meet
on the road within each other's listening windows in the first scans (found by a sweep)."""


@pytest.mark.parametrize(("transport", "ask_ahead"), [("tcp", 1), ("shm", 1), ("tcp", 3)])
def test_bridged_crosstalk_equals_in_process(tmp_path: Path, transport: str, ask_ahead: int) -> None:
    """Every sensor's frames asked ahead (``--ask-ahead``), pose samples and all, or not."""
    rig = tmp_path / "facing.toml"
    rig.write_text(FACING)
    served = start_embedded_server(ServeOptions(port=0, rig=str(rig), paused=True, seed=0))
    try:
        bridged = tmp_path / "bridged"
        argv = ["run", "--rig", str(rig), "--airsim", f"127.0.0.1:{served.port}", "--lockstep", "--crosstalk"]
        argv += ["--shm"] if transport == "shm" else []
        argv += ["--ask-ahead", str(ask_ahead)]
        assert main([*argv, "--frames", "2", "--out", str(bridged), "--quiet", "--no-rosbag"]) == 0
    finally:
        served.close()
    local = tmp_path / "local"
    argv = ["demo", "--rig", str(rig), "--crosstalk", "--frames", "2", "--out", str(local), "--quiet"]
    assert main([*argv, "--no-rosbag"]) == 0
    got, want = (json.loads((d / "summary.json").read_text()) for d in (bridged, local))
    assert got["crosstalk"] and want["crosstalk"]
    for name in ("near", "far"):
        assert got["bridge"][name]["sector_mismatches"] == 0
        assert got["bridge"][name]["transport"] == transport
        flagged = want["sensors"][name]["crosstalk_points"]
        assert flagged > 0 and got["sensors"][name]["crosstalk_points"] == flagged
        for k in range(2):
            for ext in ("pcd", "bin"):  # the PCD holds the flags, the times and the return numbers
                a = (bridged / name / "scans" / f"{k:06d}.{ext}").read_bytes()
                b = (local / name / "scans" / f"{k:06d}.{ext}").read_bytes()
                assert len(a) > 16_000 and a == b, (name, k, ext)


def _sensed() -> tuple[RigLoop, dict[str, Sensed]]:
    loop = RigLoop(facing_pair("VLP-16", 225.0), build_world("street"), crosstalk=True)
    sensed = {name: u.pipeline.sense() for name, u in loop.units.items()}
    return loop, sensed


def test_pose_samples_cross_the_wire_exactly() -> None:
    loop, sensed = _sensed()
    hits = sensed["near"].hits
    assert hits.pose_samples is not None
    pose = FluPose((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
    answer = hits_to_wire(hits, pose, sensed["near"].t1_ns)
    assert "pose_samples" not in encode_hits(answer)["info"]  # only when a beam's "poses" asks
    back = hits_from_wire(decode_hits(encode_hits(answer, poses=True)))
    assert back.pose_samples is not None
    for a, b in zip(hits.pose_samples, back.pose_samples, strict=True):
        assert a.dtype == b.dtype == np.float64 and np.array_equal(a, b)
    t = hits.firings.t_ns
    for a, b in zip(
        interpolate_pose_samples(t, hits.pose_samples),
        interpolate_pose_samples(t, back.pose_samples),
        strict=True,
    ):
        assert np.array_equal(a, b)
    loop.close()


def test_crosstalk_without_pose_samples_says_why() -> None:
    loop, sensed = _sensed()
    sensed["far"].hits.pose_samples = None  # as from a server older than info.pose_samples
    sensors = [CrosstalkSensor(n, u.sensor.preset, u.sensor.physics) for n, u in loop.units.items()]
    with pytest.raises(RtLidarError, match=r"far.*pose samples"):
        false_points(sensors, sensed)
    loop.close()


def test_poses_only_when_asked(tmp_path: Path) -> None:
    rig = tmp_path / "facing.toml"
    rig.write_text(FACING)
    served = start_embedded_server(ServeOptions(port=0, rig=str(rig), paused=True, seed=0))
    try:
        with AirSimClient("127.0.0.1", served.port, timeout=30.0) as client:
            client.rt_lidar_get_hits("far")
            client.sim_continue_for_time(0.05)
            plain = client.rt_lidar_get_hits("far")
            client.sim_continue_for_time(0.05)
            asked = client.rt_lidar_get_hits("far", poses=True)
    finally:
        served.close()
    assert "pose_samples" not in plain.info
    samples = asked.info["pose_samples"]
    t0, t1 = asked.info["t0_ns"], asked.info["t1_ns"]
    assert samples.shape == (round((t1 - t0) / 1e6) + 1, 8) and samples.dtype == np.float64
    # the far sensor rides 10 m ahead of the car, facing back: x forward of the car, yaw 180 deg
    assert np.allclose(samples[:, 3], 1.0) and np.allclose(np.abs(samples[:, 7]), 1.0)
