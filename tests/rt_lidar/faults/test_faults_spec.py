"""The faults file: every kind loads, and a bad one is one error naming the file, fault and field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rt_lidar.config import RunConfig, load_run_config, write_run_config
from rt_lidar.errors import ConfigError, FieldError
from rt_lidar.faults.spec import FAULT_FAMILIES, FAULT_KINDS, load_faults
from rt_lidar.faults.wiring import fault_plan
from rt_lidar.sensor.presets import load_preset

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "faults.toml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "faults.toml"
    path.write_text(text)
    return path


def test_every_kind_loads_with_its_defaults(tmp_path):
    kinds = [k for fam in FAULT_FAMILIES.values() for k in fam]
    assert sorted(kinds) == sorted(FAULT_KINDS)
    text = "".join(
        f'[[fault]]\nkind = "{k}"\n'
        + ("rings = [1]\n" if "channel" in k else "")
        + ("end_s = 1.0\n" if k == "reboot" else "")
        for k in kinds
    )
    faults = load_faults(_write(tmp_path, text))
    assert [f.kind for f in faults] == kinds


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ('kind = "dirt"\ntransmission = 1.5', "fault[1].transmission", "must be in [0, 1]"),
        ('kind = "smoke"', "fault[1].kind", "must be one of blockage"),
        ("transmission = 0.5", "fault[1].kind", "is required"),
        ('kind = "reboot"\nstart_s = 1.0', "fault[1].end_s", "is required for a reboot"),
        ('kind = "blockage"\nstart_s = 2.0\nend_s = 1.0', "fault[1].end_s", "must be > start_s"),
        ('kind = "dirt"\nwindow = 3', "fault[1].window", "unknown key"),
        ('kind = "dead_channel"\nrings = []', "fault[1].rings", "at least one"),
        ('kind = "packet_loss"\nrate = -0.1', "fault[1].rate", "must be in [0, 1]"),
        ('kind = "noise_burst"\nrange_m = [50, 10]', "fault[1].range_m", "must be [low, high]"),
    ],
)
def test_bad_fault_names_file_index_and_field(tmp_path, body, field, words):
    path = _write(tmp_path, f'[[fault]]\nkind = "frozen"\n\n[[fault]]\n{body}\n')
    with pytest.raises(FieldError) as err:
        load_faults(path)
    assert err.value.source == str(path)
    assert err.value.field == field
    assert words in err.value.problem


def test_rings_checked_against_the_sensor(tmp_path):
    faults = load_faults(_write(tmp_path, '[[fault]]\nkind = "weak_channel"\nrings = [3, 16]\n'))
    with pytest.raises(FieldError, match=r"fault\[0\]\.rings.*ring 16 is not one of VLP-16's rings 0\.\.15"):
        fault_plan(faults, load_preset("VLP-16"), 0)
    assert fault_plan(faults, load_preset("HDL-32E"), 0) is not None


def test_faults_ride_in_config_json_and_read_back(tmp_path):
    faults = load_faults(EXAMPLE)
    cfg = RunConfig(faults=faults, out=str(tmp_path))
    write_run_config(tmp_path, cfg, load_preset(cfg.preset))
    assert json.loads((tmp_path / "config.json").read_text())["config"]["faults"][0]["kind"] == "dirt"
    assert load_run_config(tmp_path).faults == faults


def test_cli_prints_one_line_and_exits_2(tmp_path):
    path = _write(tmp_path, '[[fault]]\nkind = "dirt"\ntransmission = 2\n')
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rt_lidar.cli.main",
            "demo",
            "--in-process",
            "--frames",
            "1",
            "--faults",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "fault[0].transmission" in lines[0] and str(path) in lines[0]
    with pytest.raises(ConfigError):
        load_faults(tmp_path / "absent.toml")


def test_run_config_takes_fault_tables_from_code():
    cfg = RunConfig(faults=({"kind": "dirt", "transmission": 0.5}, {"kind": "reboot", "end_s": 1.0}))
    assert [f.kind for f in cfg.faults] == ["dirt", "reboot"] and cfg.faults[0].transmission == 0.5
    with pytest.raises(FieldError, match=r"faults\[0\]\.transmission"):
        RunConfig(faults=({"kind": "dirt", "transmission": 5},))
