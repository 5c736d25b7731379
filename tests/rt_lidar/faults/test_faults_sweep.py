"""A sweep's ``[sweep] faults = "FILE.toml"``: every run of ``rt-lidar generate`` fails the same way,
its digest says so, and its config.json re-runs it with the faults."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.dataset import expand_runs, parse_sweep, write_run
from rt_lidar.dataset.runs import run_config, run_digest
from rt_lidar.errors import FieldError


def _sweep(tmp_path: Path, faults: str | None) -> dict:
    sweep = {"name": "tiny", "frames": 2, "seeds": [3]}
    if faults is not None:
        sweep["faults"] = faults
    return {
        "sweep": sweep,
        "scenes": [{"name": "street", "kind": "street", "seed": 5, "length_m": 80.0}],
        "sensors": [{"preset": "VLP-16"}],
    }


def test_a_sweep_with_faults(tmp_path):
    (tmp_path / "f.toml").write_text('[[fault]]\nkind = "dead_channel"\nrings = [0, 1]\n')
    clean = expand_runs(parse_sweep(_sweep(tmp_path, None), "s.toml", tmp_path))[0]
    faulty = expand_runs(parse_sweep(_sweep(tmp_path, "f.toml"), "s.toml", tmp_path))[0]
    assert clean.faults == () and [f.kind for f in faulty.faults] == ["dead_channel"]
    assert run_digest(clean) != run_digest(faulty)
    assert run_config(faulty).faults == faulty.faults
    write_run(faulty, tmp_path / "out")
    seq = tmp_path / "out" / "sequences" / "00"
    pts = np.fromfile(seq / "velodyne" / "000000.bin", np.float32).reshape(-1, 4)
    assert pts.shape[0] > 1000
    meta = json.loads((seq / "run.json").read_text())
    assert meta["faults"][0]["kind"] == "dead_channel" and meta["faults"][0]["injected"]["scans"] == 2
    assert json.loads((seq / "config.json").read_text())["config"]["faults"][0]["rings"] == [0, 1]
    # the dead rings are the lowest beams (VLP-16: -15 and -13 deg): no point that steep below
    el = np.degrees(np.arctan2(pts[:, 2], np.hypot(pts[:, 0], pts[:, 1])))
    assert el.min() > -12.5


def test_a_sweep_s_faults_file_is_checked(tmp_path):
    (tmp_path / "f.toml").write_text('[[fault]]\nkind = "dirt"\ntransmission = -1\n')
    with pytest.raises(FieldError, match=r"f\.toml.*fault\[0\]\.transmission"):
        parse_sweep(_sweep(tmp_path, "f.toml"), "s.toml", tmp_path)
