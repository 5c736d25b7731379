"""``rt-lidar demo`` and friends run headless from the command line and write what they promise."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

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
    assert summary["points_per_scan_mean"] > 1000 and summary["realtime_factor"] > 0
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
    printed = capsys.readouterr().out
    assert f"3 VLP-16 scans in {out}/" in printed and "real time" in printed


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


def test_the_fast_caster_is_asked_for_in_both_paths_and_recorded(tmp_path):
    """``--caster embree-fast`` reaches the demo's own server as well as the in-process world: both give
    the same scans, which are not the robust caster's, and config.json records the caster."""
    args = ["demo", "--preset", "VLP-16", "--frames", "2", "--quiet", "--out"]
    fast = ["--caster", "embree-fast"]
    assert main([*args, str(tmp_path / "bridged"), *fast]) == 0
    assert main([*args, str(tmp_path / "in-process"), *fast, "--in-process"]) == 0
    assert main([*args, str(tmp_path / "robust"), "--in-process"]) == 0
    for name in ("000000.pcd", "000001.pcd"):
        bridged, in_process, robust = (
            (tmp_path / run / "scans" / name).read_bytes() for run in ("bridged", "in-process", "robust")
        )
        assert bridged == in_process != robust
    recorded = json.loads((tmp_path / "bridged" / "config.json").read_text())["config"]
    assert recorded["caster"] == "embree-fast"
    again = tmp_path / "again"  # a re-run of the recorded run casts with the caster it names
    assert main(["demo", "--quiet", "--config", str(tmp_path / "in-process"), "--out", str(again)]) == 0
    for name in ("000000.pcd", "000001.pcd"):
        assert (again / "scans" / name).read_bytes() == (
            tmp_path / "in-process" / "scans" / name
        ).read_bytes()
    assert json.loads((tmp_path / "robust" / "config.json").read_text())["config"]["caster"] == "embree"
    # the same sensor and scene: the same points, but for last bits and a few edge rays
    for name in ("000000.pcd", "000001.pcd"):
        fast = PointCloud.from_path(tmp_path / "in-process" / "scans" / name).numpy()
        robust = PointCloud.from_path(tmp_path / "robust" / "scans" / name).numpy()
        assert fast.shape == robust.shape
        fields = list(POINT_FIELDS)
        same = [fields.index(f) for f in ("ring", "t", "return_id", "segment")]
        assert (fast[:, same] == robust[:, same]).all(axis=1).mean() > 0.999
        moved = np.linalg.norm(fast[:, :3] - robust[:, :3], axis=1)
        assert (moved > 1e-3).mean() < 5e-4 and np.median(moved) < 1e-5
        i = fields.index("intensity")
        assert (np.abs(fast[:, i] - robust[:, i]) <= 0.005 * np.abs(robust[:, i]) + 1e-3).mean() > 0.999


def _count_writes(monkeypatch) -> Counter:
    writes: Counter = Counter()
    write_text = Path.write_text

    def counting(self, *args, **kwargs):
        writes[str(self)] += 1
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", counting)
    return writes


@pytest.mark.parametrize("mode", [[], ["--in-process"]], ids=["bridged", "in-process"])
def test_a_demo_re_runs_from_its_config_json_to_the_same_scan_bytes(tmp_path, mode, monkeypatch):
    writes = _count_writes(monkeypatch)
    a, b = tmp_path / "a", tmp_path / "b"
    opts = [
        "--preset",
        "VLP-16",
        "--frames",
        "2",
        "--seed",
        "4",
        "--sim-hz",
        "25",
        "--sub-rays",
        "3",
        "--return-mode",
        "dual",
        "--epw",
        "--rain",
        "10",
        "--sun-lux",
        "60000",
    ]
    assert main(["demo", "--quiet", *opts, *mode, "--out", str(a)]) == 0
    assert writes[str(a / "summary.json")] == writes[str(a / "config.json")] == 1
    cfg = json.loads((a / "config.json").read_text())["config"]
    want = {"sub_rays": 3, "return_mode": "dual", "epw": True, "full": False, "bundle": "sparse"}
    assert cfg["beam"] == want
    ran = (cfg["seed"], cfg["sim_hz"], cfg["sun"]["lux"], cfg["in_process"])
    assert ran == (4, 25.0, 60000.0, bool(mode))
    assert cfg["weather"]["rain_mm_h"] == 10.0
    assert main(["demo", "--config", str(a / "config.json"), "--out", str(b)]) == 0
    assert writes[str(b / "summary.json")] == writes[str(b / "config.json")] == 1
    again = json.loads((b / "config.json").read_text())["config"]
    # the bridged demo records the server it started, on a port of its own each time
    assert {**again, "out": None, "bridge": None} == {**cfg, "out": None, "bridge": None}
    assert {**again["bridge"], "airsim": None} == {**cfg["bridge"], "airsim": None}
    scans = sorted(p.name for p in (a / "scans").iterdir() if p.suffix in (".pcd", ".bin"))
    assert len(scans) == 4
    assert scans == sorted(p.name for p in (b / "scans").iterdir() if p.suffix in (".pcd", ".bin"))
    for name in scans:
        assert (a / "scans" / name).read_bytes() == (b / "scans" / name).read_bytes()


def test_the_preset_beam_is_recorded_as_it_ran_and_options_override_a_config(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    args = ["demo", "--quiet", "--in-process", "--preset", "VLP-16", "--frames", "1"]
    assert main([*args, "--out", str(a)]) == 0
    cfg = json.loads((a / "config.json").read_text())["config"]
    the_presets = {"sub_rays": 1, "return_mode": "strongest", "epw": False, "full": False, "bundle": "sparse"}
    assert cfg["beam"] == the_presets
    assert main(["demo", "--config", str(a), "--frames", "2", "--seed", "5", "--out", str(b)]) == 0
    again = json.loads((b / "config.json").read_text())["config"]
    assert (again["frames"], again["seed"], again["preset"], again["in_process"]) == (2, 5, "VLP-16", True)


def test_a_bad_config_json_gets_one_clear_line(tmp_path, capsys):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"config": {"command": "demo", "frames": 0}}))
    assert main(["demo", "--config", str(bad), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "config.frames" in err and "must be in [1," in err and "Traceback" not in err


def test_bad_input_gets_one_clear_line(tmp_path, capsys):
    assert main(["demo", "--preset", "NOPE-1", "--frames", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "NOPE-1" in err and "Traceback" not in err
    assert main(["demo", "--frames", "0", "--quiet", "--in-process", "--out", str(tmp_path)]) == 2
    assert "error: --frames: must be in [1, 1000000000], got 0" in capsys.readouterr().err
    assert main(["demo", "--seed", "-3", "--quiet", "--in-process", "--out", str(tmp_path)]) == 2
    assert "error: --seed: must be in [0, " in capsys.readouterr().err
    assert main(["demo", "--rain", "500", "--quiet", "--in-process", "--out", str(tmp_path)]) == 2
    assert "error: --rain: must be in [0, 200] mm/h, got 500" in capsys.readouterr().err
    assert main(["serve", "--seed", "-3"]) == 2
    assert "error: --seed: must be in [0, " in capsys.readouterr().err


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
    ambient = pc.numpy(["ambient_w"])[:, 0]  # the sunlight on each point's pulse, a PCD field
    assert (ambient > 0).mean() > 0.3 and float(ambient.max()) < 1e-6
    with pytest.raises(SystemExit):
        main([*args, "--sub-rays", "0"])


def test_serve_port_out_of_range_is_one_clear_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--port", "70000"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--port" in err and "0..65535" in err and "Traceback" not in err


def test_serve_options_come_from_a_run_config() -> None:
    from rt_lidar.cli.main import build_parser
    from rt_lidar.config import RunConfig
    from rt_lidar.errors import ConfigError
    from rt_lidar.server.serve import ServeOptions

    run = RunConfig(command="serve", preset="VLP-16", scene="street", seed=7)
    opts = ServeOptions.of_run(run, port=0, paused=True)
    assert (opts.preset, opts.scene, opts.seed, opts.port, opts.paused) == ("VLP-16", "street", 7, 0, True)
    assert ServeOptions.of_run(RunConfig()) == ServeOptions()  # serve's defaults are demo's
    args = build_parser().parse_args(["serve"])
    assert (args.preset, args.scene, args.seed) == (RunConfig().preset, RunConfig().scene, RunConfig().seed)
    with pytest.raises(ConfigError, match=r"serve: field 'port': must be in \[0, 65535\], got 70000"):
        ServeOptions.of_run(run, port=70000)
    assert ServeOptions.of_run(RunConfig(caster="embree-fast")).caster == "embree-fast"
    with pytest.raises(ConfigError, match=r"field 'caster'.*'optix'"):
        RunConfig(caster="optix")


def test_the_casters_a_run_may_name_are_the_worlds() -> None:
    from rt_lidar.config import CASTERS, DEFAULT_CASTER
    from rt_lidar.unreal_bridge.world import RAY_CASTERS

    assert set(CASTERS) == set(RAY_CASTERS) and DEFAULT_CASTER == "embree"


def test_no_scans_sends_every_scan_to_the_sinks_only(tmp_path, capsys):
    base = ["demo", "--in-process", "--preset", "VLP-16", "--frames", "2", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "full")]) == 0
    assert (
        main([*base, "--out", str(tmp_path / "live"), "--no-scans", "--sink", f"kitti:{tmp_path / 'k'}"]) == 0
    )
    assert not (tmp_path / "live" / "scans").exists()
    assert json.loads((tmp_path / "live" / "config.json").read_text())["config"]["write_scans"] is False
    full = sorted((tmp_path / "full" / "scans").glob("*.bin"))
    sunk = sorted((tmp_path / "k").glob("*.bin"))
    assert len(full) == len(sunk) == 2
    assert [f.read_bytes() for f in full] == [f.read_bytes() for f in sunk]
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "none"), "--no-scans"]) == 2
    assert "--no-scans: give at least one --sink" in capsys.readouterr().err


@pytest.mark.parametrize("scene", ["plane", "wall", "targets", "glass"])
def test_every_named_scene_runs_from_the_command_line(tmp_path, scene, capsys):
    out = tmp_path / scene
    argv = ["demo", "--in-process", "--scene", scene, "--preset", "VLP-16", "--frames", "1", "--quiet"]
    assert main([*argv, "--out", str(out)]) == 0
    assert json.loads((out / "summary.json").read_text())["points_per_scan_mean"] > 0
    assert read_kitti_bin(next((out / "scans").glob("*.bin"))).shape[0] > 0


def test_a_named_analytic_scene_is_the_same_bridged(tmp_path):
    argv = ["demo", "--scene", "targets", "--preset", "VLP-16", "--frames", "1", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    assert main([*argv, "--in-process", "--out", str(tmp_path / "i")]) == 0
    assert (tmp_path / "b/scans/000000.bin").read_bytes() == (tmp_path / "i/scans/000000.bin").read_bytes()
