"""Faults in a rig: a sensor's own ``faults`` file, and run-wide faults that name a sensor."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.cli.main import main
from rt_lidar.errors import FieldError
from rt_lidar.points import PointFlag
from rt_lidar.rig import load_rig

RIG = """
[[sensor]]
name = "left"
preset = "VLP-16"
mount = {{ xyz = [0.0, 0.5, 1.8] }}
{left_faults}

[[sensor]]
name = "right"
preset = "VLP-16"
mount = {{ xyz = [0.0, -0.5, 1.8] }}
"""


def _rig(tmp_path: Path, left_faults: str = 'faults = "left_faults.toml"') -> Path:
    (tmp_path / "left_faults.toml").write_text('[[fault]]\nkind = "dead_channel"\nrings = [0, 1, 2]\n')
    path = tmp_path / "rig.toml"
    path.write_text(RIG.format(left_faults=left_faults))
    return path


def _pcd(path: Path) -> dict[str, np.ndarray]:
    """ring and flags of a PCD as pypcd4 reads them (flags is uint16: the fault bits in 8-15)."""
    pypcd4 = pytest.importorskip("pypcd4")
    pc = pypcd4.PointCloud.from_path(path)
    assert dict(zip(pc.fields, pc.types, strict=True))["flags"] == np.dtype(np.uint16)
    ring, flags = pc.numpy(("ring", "flags")).T
    return {"ring": ring.astype(np.int64), "flags": flags.astype(np.int64)}


def test_sensor_faults_file_and_run_wide_fault_naming_a_sensor(tmp_path):
    rig = _rig(tmp_path)
    run_wide = tmp_path / "run.toml"
    run_wide.write_text('[[fault]]\nkind = "noise_burst"\nrate_hz = 30000\nsensor = "right"\n')
    out = tmp_path / "out"
    args = ["demo", "--rig", str(rig), "--frames", "2", "--out", str(out), "--quiet", "--no-rosbag"]
    assert main([*args, "--faults", str(run_wide)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    left, right = summary["sensors"]["left"], summary["sensors"]["right"]
    assert [f["kind"] for f in left["faults"]] == ["dead_channel"]
    assert [f["kind"] for f in right["faults"]] == ["noise_burst"]
    left_pts = _pcd(next((out / "left" / "scans").glob("*.pcd")))
    right_pts = _pcd(next((out / "right" / "scans").glob("*.pcd")))
    assert not np.isin(left_pts["ring"], [0, 1, 2]).any()
    assert np.isin(right_pts["ring"], [0, 1, 2]).any()
    noise = np.count_nonzero(right_pts["flags"] & int(PointFlag.FAULT_NOISE))
    assert noise == pytest.approx(30000 * 0.1, rel=0.15)
    assert not np.any(left_pts["flags"] & int(PointFlag.FAULT_NOISE))


def test_a_run_wide_fault_naming_no_rig_sensor_is_refused(tmp_path, capsys):
    rig = _rig(tmp_path, "")
    bad = tmp_path / "bad.toml"
    bad.write_text('[[fault]]\nkind = "frozen"\nsensor = "middle"\n')
    args = ["demo", "--rig", str(rig), "--frames", "1", "--out", str(tmp_path / "o"), "--quiet"]
    assert main([*args, "--faults", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fault[0].sensor" in err[0] and "no sensor 'middle'" in err[0]


def test_a_sensor_faults_file_is_checked_against_its_preset(tmp_path):
    rig = _rig(tmp_path)
    (tmp_path / "left_faults.toml").write_text('[[fault]]\nkind = "weak_channel"\nrings = [16]\n')
    with pytest.raises(FieldError, match=r"left_faults\.toml.*fault\[0\]\.rings.*ring 16"):
        load_rig(rig)
