"""``rt-lidar generate`` run twice with one sweep, seed, machine and backend writes the same bytes: every
file of the dataset (docs/determinism.md), not only the scans: ``sweep.json``, ``runs.json``, each
sequence's ``calib.txt``, ``poses.txt``, ``times.txt``, ``run.json``, ``config.json``, the images and labels,
a rig's per-sensor sequences, and the recordings (PCD, KITTI, LAS, rosbag2 with its ``metadata.yaml``),
with faults injected. The two runs are separate processes of the CLI, each starting its own local Ray
with two workers (which worker takes which run is Ray's choice), with different hash seeds (so no file
may follow the order of a set or of a string-keyed dict built from one) and different output folders
(so no file may name where it was written)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dataset_support import tree_digest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[3]

RIG = """
[[sensor]]
name = "roof"
preset = "VLP-16"
mount = { xyz = [0.0, 0.0, 1.9], rpy_deg = [0.0, 0.0, 0.0] }
phase_deg = 0.0
sinks = []

[[sensor]]
name = "front"
preset = "VLP-16"
mount = { xyz = [1.5, 0.0, 0.8], rpy_deg = [0.0, 0.0, 0.0] }
phase_deg = 90.0
sinks = []
"""

FAULTS = """
[[fault]]
kind = "dirt"
transmission = 0.4
azimuth_deg = [-45, 45]

[[fault]]
kind = "weak_channel"
rings = [3]
power_scale = 0.2
"""

SWEEP = """
[sweep]
name = "bytes"
frames = 2
sim_hz = 20.0
seeds = [3]
sinks = ["pcd", "kitti", "las", "rosbag2"]
faults = "faults.toml"

[camera]
enabled = true
width = 160
height = 90
fov_deg = 90.0
mount = { xyz = [0.2, 0.0, 1.7], rpy_deg = [0.0, 0.0, 0.0] }

[[scenes]]
name = "street"
kind = "street"
seeds = [1]
length_m = 80.0

[[sensors]]
preset = "VLP-16"
mount = { xyz = [0.0, 0.0, 1.8], rpy_deg = [0.0, 0.0, 0.0] }

[[sensors]]
rig = "rig.toml"

[weather]
rain_mm_h = [0.0, 20.0]
"""

EXPECTED = (  # one of each kind of file, so the comparison below covers them
    "sweep.json",
    "runs.json",
    "sequences/00/velodyne/000000.bin",
    "sequences/00/labels/000000.label",
    "sequences/00/image_2/000000.png",
    "sequences/00/calib.txt",
    "sequences/00/poses.txt",
    "sequences/00/times.txt",
    "sequences/00/run.json",
    "sequences/00/config.json",
    "sequences/00/recordings/pcd/000000.pcd",
    "sequences/00/recordings/kitti/000000.bin",
    "sequences/00/recordings/las/000000.las",
    "sequences/00/recordings/rosbag2/metadata.yaml",
    "sequences/00/recordings/rosbag2/rosbag2_0.mcap",
    "sequences/03/front/velodyne/000000.bin",
    "sequences/03/roof/recordings/rosbag2/rosbag2_0.mcap",
    "sequences/03/rig.json",
)


def _generate(sweep: Path, out: Path, hash_seed: str) -> None:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "rt_lidar.cli.main", "generate", str(sweep), "--out", str(out)]
    proc = subprocess.run(
        [*cmd, "--workers", "2", "--quiet"], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"written": 4' in proc.stdout and '"failures": []' in proc.stdout


def test_generate_twice_writes_every_file_with_the_same_bytes(tmp_path: Path) -> None:
    (tmp_path / "rig.toml").write_text(RIG)
    (tmp_path / "faults.toml").write_text(FAULTS)
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(SWEEP)
    _generate(sweep, tmp_path / "first", "1")
    _generate(sweep, tmp_path / "second", "2")
    first, second = tree_digest(tmp_path / "first"), tree_digest(tmp_path / "second")
    assert set(EXPECTED) <= set(first), sorted(set(EXPECTED) - set(first))
    assert not [p for p in first if ".partial" in p]
    assert sorted(first) == sorted(second)
    differ = sorted(p for p in first if first[p] != second[p])
    assert not differ, differ
