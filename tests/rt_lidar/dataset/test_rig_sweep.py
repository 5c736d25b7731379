"""Sweeps that name a rig (issue 16 item 1) and dataset runs as run configurations (issue 15 item 2):
a rig run writes a KITTI sequence per sensor equal to ``demo --rig``, resumes, and names its errors;
a one-sensor run's ``config.json`` re-runs it through ``demo --config`` to the same scan bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dataset_support import tiny_sweep_dict, tree_digest

from rt_lidar.cli.main import main
from rt_lidar.dataset import (
    DatasetError,
    SweepError,
    expand_runs,
    load_sweep,
    parse_sweep,
    read_calib,
    read_sequence,
    sequence_state,
    write_run,
)
from rt_lidar.dataset.runs import run_config, run_digest, run_to_dict

TWO_VLP16 = """
[[sensor]]
name = "left"
preset = "VLP-16"
mount = { xyz = [1.0, 0.8, 1.2], rpy_deg = [0.0, 0.0, 30.0] }
phase_deg = 0.0

[[sensor]]
name = "right"
preset = "VLP-16"
mount = { xyz = [1.0, -0.8, 1.2], rpy_deg = [0.0, 0.0, -30.0] }
"""

SWEEP = """
[sweep]
name = "rigs"
frames = 2
seeds = [4]
sinks = ["pcd"]

[[scenes]]
name = "street"
kind = "street"
seed = 4

[[sensors]]
rig = "rigs/two-vlp16.toml"
"""


def _files(tmp_path: Path, sweep: str = SWEEP, rig: str = TWO_VLP16) -> Path:
    (tmp_path / "rigs").mkdir(exist_ok=True)
    (tmp_path / "rigs" / "two-vlp16.toml").write_text(rig)
    path = tmp_path / "sweep.toml"
    path.write_text(sweep)
    return path


def test_a_rig_run_writes_each_sensor_as_demo_rig_does(tmp_path: Path) -> None:
    (run,) = expand_runs(load_sweep(_files(tmp_path)))
    assert run.run_id == "street_scene_two-vlp16_clear_s4"  # the rig's name in the run id
    result = write_run(run, tmp_path / "ds")
    assert result.frames == 2 * 2 and result.points > 10_000  # scans of both sensors
    seq = tmp_path / "ds" / "sequences" / "00"
    assert sorted(p.name for p in seq.iterdir()) == ["config.json", "left", "rig.json", "right", "run.json"]
    assert sorted(p.name for p in (seq / "left").iterdir()) == [
        "calib.txt",
        "labels",
        "poses.txt",
        "recordings",
        "run.json",
        "times.txt",
        "velodyne",
    ]
    assert json.loads((seq / "run.json").read_text())["sensors"] == ["left", "right"]

    demo = tmp_path / "demo"
    args = ["demo", "--rig", str(tmp_path / "rigs" / "two-vlp16.toml"), "--seed", "4", "--frames", "2"]
    assert main([*args, "--scene", "street", "--out", str(demo), "--quiet", "--no-rosbag"]) == 0
    for sensor in ("left", "right"):
        for stem in ("000000", "000001"):
            ours = (seq / sensor / "velodyne" / f"{stem}.bin").read_bytes()
            assert ours == (demo / sensor / "scans" / f"{stem}.bin").read_bytes(), (sensor, stem)
            rec = seq / sensor / "recordings" / "pcd" / f"{stem}.pcd"
            assert rec.read_bytes() == (demo / sensor / "scans" / f"{stem}.pcd").read_bytes()
        mount_line = (demo / sensor / "calib.txt").read_text()  # Tr_lidar_to_base_link, as demo --rig
        assert mount_line.startswith("Tr_lidar_to_base_link:")
        assert (seq / sensor / "calib.txt").read_text().endswith(mount_line)
        assert read_calib(seq / sensor / "calib.txt").tr.shape == (4, 4)
        frames = list(read_sequence(tmp_path / "ds", 0, sensor))
        assert len(frames) == 2 and frames[0].labels is not None and frames[0].pose is not None
    # the two sensors see the street from different mounts: their scans differ, their calibrations too
    left, right = (np.fromfile(seq / s / "velodyne" / "000000.bin", "<f4") for s in ("left", "right"))
    assert left.shape != right.shape or not np.array_equal(left, right)
    assert (seq / "left" / "calib.txt").read_text() != (seq / "right" / "calib.txt").read_text()
    with pytest.raises(DatasetError, match="name a sensor"):
        read_sequence(tmp_path / "ds", 0)


def test_a_rig_run_resumes_and_a_changed_rig_is_another_run(tmp_path: Path) -> None:
    sweep = _files(tmp_path)
    (run,) = expand_runs(load_sweep(sweep))
    write_run(run, tmp_path / "ds")
    before = tree_digest(tmp_path / "ds")
    assert sequence_state(run, tmp_path / "ds") == "complete"
    assert write_run(run, tmp_path / "ds").skipped
    assert tree_digest(tmp_path / "ds") == before
    digest = run_digest(run)
    _files(tmp_path, rig=TWO_VLP16.replace("30.0", "35.0"))  # the rig file is read into the digest
    (changed,) = expand_runs(load_sweep(sweep))
    assert run_digest(changed) != digest
    assert sequence_state(changed, tmp_path / "ds") == "foreign"


def test_rig_and_preset_sensors_mix_in_one_sweep(tmp_path: Path) -> None:
    sweep = SWEEP + '\n[[sensors]]\npreset = "VLP-16"\n'
    runs = expand_runs(load_sweep(_files(tmp_path, sweep)))
    assert [r.sensor.name for r in runs] == ["two-vlp16", "vlp-16"]
    assert runs[0].sensor.rig.endswith("two-vlp16.toml") and not runs[1].sensor.rig
    assert "rig" not in run_to_dict(runs[1])["sensor"]  # a preset run's record and digest: as before
    assert run_to_dict(runs[0])["sensor"]["rig_sha256"]


def _cli_error(tmp_path: Path, sweep: str, capsys: pytest.CaptureFixture[str], **kw: Any) -> str:
    path = _files(tmp_path, sweep, **kw)
    assert main(["generate", str(path), "--out", str(tmp_path / "ds"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert not (tmp_path / "ds" / "sequences").exists()
    return err


def test_a_bad_rig_path_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _cli_error(tmp_path, SWEEP.replace("two-vlp16.toml", "nope.toml"), capsys)
    assert "sweep.toml: field 'sensors[0].rig': no such rig file" in err and "nope.toml" in err


def test_a_bad_rig_file_names_sweep_rig_sensor_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    right = '"VLP-16"\nmount = { xyz = [1.0, -'
    err = _cli_error(tmp_path, SWEEP, capsys, rig=TWO_VLP16.replace(right, right.replace("16", "99")))
    assert "sweep.toml: field 'sensors[0].rig'" in err
    assert "two-vlp16.toml: sensor 'right': field 'preset'" in err and "VLP-99" in err


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ('preset = "VLP-16"\n', "sensors[0]", "exactly one of 'preset'"),
        ("mount = { xyz = [0.0, 0.0, 2.0] }\n", "sensors[0].mount", "mounts from the rig file"),
    ],
)
def test_a_rig_entry_takes_no_preset_or_mount(tmp_path: Path, extra: str, field: str, words: str) -> None:
    _files(tmp_path)
    with pytest.raises(SweepError) as info:
        load_sweep(_files(tmp_path, SWEEP + extra))
    assert info.value.field == field and words in info.value.problem


def test_a_sensor_entry_needs_a_preset_or_a_rig() -> None:
    d = tiny_sweep_dict()
    d["sensors"] = [{"name": "x"}]
    with pytest.raises(SweepError, match="exactly one of 'preset'"):
        parse_sweep(d, "none.toml")


@pytest.mark.parametrize(
    "trajectory",
    [
        None,
        {
            "name": "cruise",
            "kind": "constant_velocity",
            "start": [0.0, -1.75, 0.0],
            "speed_mps": 7.0,
            "yaw_deg": 3.0,
            "yaw_rate_deg_s": 2.0,
        },
        {"name": "wp", "kind": "waypoints", "times": [0.0, 1.0], "positions": [[0, -1.75, 0], [9, -1.5, 0]]},
    ],
)
def test_a_dataset_run_re_runs_from_its_config_json(tmp_path: Path, trajectory: dict | None) -> None:
    d = tiny_sweep_dict()  # a street of seed 5, 80 m; physics seed 3; clear and 30 mm/h rain
    d["sensors"] = [{"preset": "VLP-16", "mount": {"xyz": [0.5, 0.2, 1.6], "rpy_deg": [0.0, 2.0, 10.0]}}]
    if trajectory is not None:
        d["trajectories"] = [trajectory]
    for run in expand_runs(parse_sweep(d, "tiny.toml")):
        write_run(run, tmp_path / "ds")
        seq = tmp_path / "ds" / "sequences" / run.sequence_name
        cfg = json.loads((seq / "config.json").read_text())["config"]
        assert cfg["in_process"] is True and cfg["scene_setup"]["seed"] == 5 and cfg["seed"] == 3
        assert cfg["out"] == f"out/{run.run_id}" and run_config(run).scene_setup is not None
        again = tmp_path / f"again-{run.sequence_name}"
        assert main(["demo", "--config", str(seq / "config.json"), "--out", str(again), "--quiet"]) == 0
        for stem in ("000000", "000001"):
            ours = (seq / "velodyne" / f"{stem}.bin").read_bytes()
            assert ours == (again / "scans" / f"{stem}.bin").read_bytes(), (run.run_id, stem)
        assert json.loads((again / "config.json").read_text())["config"]["scene_setup"] == cfg["scene_setup"]


def test_a_scene_setup_is_refused_over_the_bridge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run,) = expand_runs(parse_sweep({**tiny_sweep_dict(), "weather": {}}, "tiny.toml"))
    write_run(run, tmp_path / "ds")
    cfg = tmp_path / "ds" / "sequences" / "00" / "config.json"
    record = json.loads(cfg.read_text())
    record["config"]["in_process"] = False
    cfg.write_text(json.dumps(record))
    assert main(["demo", "--config", str(cfg), "--out", str(tmp_path / "b"), "--quiet"]) == 2
    assert "in-process only" in capsys.readouterr().err


def test_a_rig_run_re_runs_from_its_config_json(tmp_path: Path) -> None:
    sweep = SWEEP.replace("seeds = [4]", "seeds = [6]") + (
        '\n[[trajectories]]\nname = "cruise"\nkind = "constant_velocity"\nstart = [0.0, -1.75, 0.0]\n'
        "speed_mps = 6.0\n\n[weather]\nrain_mm_h = [25.0]\n"
    )
    (run,) = expand_runs(load_sweep(_files(tmp_path, sweep)))
    write_run(run, tmp_path / "ds")
    seq = tmp_path / "ds" / "sequences" / "00"
    cfg = json.loads((seq / "config.json").read_text())["config"]
    assert cfg["rig"].endswith("two-vlp16.toml") and cfg["scene_setup"]["mount"] is None
    assert cfg["weather"]["rain_mm_h"] == 25.0 and cfg["scene_setup"]["ego"]["speed_mps"] == 6.0
    again = tmp_path / "again"
    args = ["demo", "--config", str(seq / "config.json"), "--out", str(again), "--quiet", "--no-rosbag"]
    assert main(args) == 0
    for sensor in ("left", "right"):
        for stem in ("000000", "000001"):
            ours = (seq / sensor / "velodyne" / f"{stem}.bin").read_bytes()
            assert ours == (again / sensor / "scans" / f"{stem}.bin").read_bytes(), (sensor, stem)


def test_a_mesh_run_re_runs_from_its_config_json(tmp_path: Path) -> None:
    trimesh = pytest.importorskip("trimesh")
    box = trimesh.creation.box(extents=(1.0, 40.0, 10.0))
    box.apply_translation((12.0, 0.0, 5.0))
    box.export(tmp_path / "wall.glb")
    d = tiny_sweep_dict()
    d["scenes"] = [
        {"name": "wall", "kind": "mesh", "path": "wall.glb", "material": "brick", "class": "building"}
    ]
    d["trajectories"] = [{"name": "parked", "kind": "static", "start": [0.0, 0.0, 0.0], "yaw_deg": 5.0}]
    d["weather"] = {"fog_visibility_m": [80.0]}
    (run,) = expand_runs(parse_sweep(d, str(tmp_path / "mesh.toml"), tmp_path))
    write_run(run, tmp_path / "ds")
    seq = tmp_path / "ds" / "sequences" / "00"
    cfg = json.loads((seq / "config.json").read_text())["config"]
    assert cfg["scene"] == str(tmp_path / "wall.glb") and cfg["scene_setup"]["mesh_name"] == "wall"
    assert main(["demo", "--config", str(seq / "config.json"), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    for stem in ("000000", "000001"):
        ours = (seq / "velodyne" / f"{stem}.bin").read_bytes()
        assert len(ours) > 1000 and ours == (tmp_path / "b" / "scans" / f"{stem}.bin").read_bytes()
