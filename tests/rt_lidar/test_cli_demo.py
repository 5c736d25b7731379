"""``rt-lidar demo`` and friends run headless from the command line and write what they promise."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from pypcd4 import PointCloud

from rt_lidar.cli.main import main
from rt_lidar.points import POINT_FIELDS
from rt_lidar.sinks import read_kitti_bin


@pytest.mark.parametrize("mode", [[], ["--in-process"]])
def test_demo_writes_scans_range_image_and_summary(tmp_path, mode, capsys):
    out = tmp_path / "demo"
    rc = main(["demo", "--preset", "VLP-16", "--frames", "3", "--quiet", "--out", str(out), *mode])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames"] == 3
    for key in ("points_per_scan_mean", "drop_fraction", "realtime_factor"):
        assert summary[key] > 0 or key == "drop_fraction"
    assert 0 <= summary["drop_fraction"] < 1
    if not mode:
        assert summary["bridge"]["extension"] is True and summary["bridge"]["sector_mismatches"] == 0
    pcds = sorted((out / "scans").glob("*.pcd"))
    bins = sorted((out / "scans").glob("*.bin"))
    assert len(pcds) == len(bins) == 3
    pc = PointCloud.from_path(pcds[0])
    assert tuple(pc.fields) == POINT_FIELDS
    assert pc.points == read_kitti_bin(bins[0]).shape[0] > 1000
    assert (out / "range_image.png").stat().st_size > 1000
    assert json.loads(capsys.readouterr().out)["frames"] == 3


SUN_30 = ["--sun-lux", "100000", "--sun-elevation", "30", "--sun-azimuth", "0"]


@pytest.mark.parametrize(
    "beam",
    [[], ["--sub-rays", "7", "--return-mode", "dual"], SUN_30, ["--sub-rays", "3", "--sun-lux", "80000"]],
    ids=["one-ray", "sub-rays", "sun", "sub-rays-scene-sun"],
)
def test_bridge_and_in_process_demo_give_the_same_scans(tmp_path, beam, recwarn):
    a, b = tmp_path / "a", tmp_path / "b"
    args = ["demo", "--preset", "VLP-16", "--frames", "2", "--quiet", *beam, "--out"]
    assert main([*args, str(a)]) == 0
    assert main([*args, str(b), "--in-process"]) == 0
    assert not [w for w in recwarn if "sub-rays" in str(w.message) or "sun" in str(w.message)]
    bridge = json.loads((a / "summary.json").read_text())["bridge"]
    sub_rays = int(beam[beam.index("--sub-rays") + 1]) if "--sub-rays" in beam else 1
    assert (bridge["sub_rays"], bridge["sun"]) == (sub_rays, "--sun-lux" in beam)
    for name in ("000000.pcd", "000001.pcd"):  # every field, second returns included
        assert (a / "scans" / name).read_bytes() == (b / "scans" / name).read_bytes()


def test_bad_input_gets_one_clear_line(tmp_path, capsys):
    assert main(["demo", "--preset", "NOPE-1", "--frames", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "NOPE-1" in err and "Traceback" not in err
    assert main(["demo", "--frames", "0", "--quiet", "--in-process", "--out", str(tmp_path)]) == 2
    assert "--frames must be >= 1" in capsys.readouterr().err


def test_console_script_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "rt_lidar.cli.main", "presets", "list"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "HDL-64E" in proc.stdout


def test_demo_with_the_bundled_rinet_model(tmp_path):
    out = tmp_path / "rinet"
    assert main(["demo", "--frames", "1", "--quiet", "--rinet", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    r = summary["rinet"]
    assert r["runtime"] == "onnxruntime" and r["provider"] == "CPUExecutionProvider"
    assert r["in_view"] > 1000 and 0 < r["dropped"] < r["in_view"]
    assert r["reintensified"] == r["in_view"] - r["dropped"]


def test_demo_with_sun_and_beam_options(tmp_path):
    out = tmp_path / "sun"
    args = ["demo", "--preset", "VLP-16", "--frames", "1", "--quiet", "--in-process", "--out", str(out)]
    assert (
        main(
            [
                *args,
                "--sun-lux",
                "100000",
                "--sun-elevation",
                "10",
                "--sub-rays",
                "7",
                "--return-mode",
                "dual",
            ]
        )
        == 0
    )
    pc = PointCloud.from_path(sorted((out / "scans").glob("*.pcd"))[0])
    ret = pc.numpy(["return_id"])[:, 0]
    assert set(np.unique(ret).tolist()) <= {0, 1}
    with pytest.raises(SystemExit):
        main([*args, "--sub-rays", "0"])


def test_serve_port_out_of_range_is_one_clear_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--port", "70000"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--port" in err and "0..65535" in err and "Traceback" not in err
