"""tools/check_ouster_metadata.py sorts metadata files into its four outcomes: our sink and ouster-sdk
(its own venv) agree pixel for pixel, our sink refuses clearly, no preset fits, ouster-sdk refuses."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_ouster_profiles import DATA, PEER

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools"))
import check_ouster_metadata as tool  # noqa: E402

pytestmark = pytest.mark.skipif(
    not PEER.exists(), reason="ouster-sdk peer venv absent: run tools/setup_ouster_peer.sh"
)


def test_each_kind_of_file_gets_its_outcome(tmp_path):
    nested = json.loads((DATA / "os1-64_fw3.0.1_dual_nested.json").read_text())
    files = {"identical": DATA / "os1-64_fw3.0.1_dual_nested.json"}
    wide = dict(nested, config_params={**nested["config_params"], "lidar_mode": "2048x10"})
    wide["lidar_data_format"] = {
        **nested["lidar_data_format"],
        "columns_per_frame": 2048,
        "column_window": [0, 2047],
    }
    files["clear error"] = tmp_path / "os1-64_2048x10.json"
    files["clear error"].write_text(json.dumps(wide))
    alt = nested["beam_intrinsics"]["beam_altitude_angles"]
    os2 = dict(
        nested, beam_intrinsics={**nested["beam_intrinsics"], "beam_altitude_angles": [a / 2 for a in alt]}
    )
    files["no matching preset"] = tmp_path / "os-2-64.json"
    files["no matching preset"].write_text(json.dumps(os2))
    broken = {k: v for k, v in nested.items() if k != "sensor_info"}
    files["sdk failure"] = tmp_path / "no_sensor_info.json"
    files["sdk failure"].write_text(json.dumps(broken))
    work = tmp_path / "work"
    work.mkdir()
    rows = tool.check(list(files.values()), PEER, work)
    got = {r.file: r.outcome for r in rows}
    assert got == {p.name: outcome for outcome, p in files.items()}, rows
    by = {r.outcome: r for r in rows}
    assert "lidar_mode" in by["clear error"].detail and by["clear error"].preset == "OS1-64"
    assert "64 beams" in by["no matching preset"].detail
    assert "sensor_info" in by["sdk failure"].detail
    table = tool.markdown(rows)
    assert "Outcomes: clear error 1, identical 1, no matching preset 1, sdk failure 1." in table
