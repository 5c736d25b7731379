"""What a new user meets first: the Python API, the output folder, the run's last lines, the preset
checked against the server's lidar, the partial first scan, help and version (issue 38)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from served import served

import rt_lidar
from rt_lidar.cli.main import main
from rt_lidar.errors import ConfigError
from rt_lidar.sinks.registry import SINK_FACTORIES
from rt_lidar.unreal_bridge import AirSimClient

IN_PROCESS = ["demo", "--in-process", "--quiet"]


def _points_of(scans: list[rt_lidar.Scan]) -> list[bytes]:
    return [s.points.tobytes() for s in scans]


def test_simulate_yields_structured_scans_the_same_bytes_for_a_seed() -> None:
    a = list(rt_lidar.simulate("VLP-16", scans=2, seed=3, weather={"rain_mm_h": 10}))
    b = list(rt_lidar.simulate("VLP-16", scans=2, seed=3, weather={"rain_mm_h": 10}))
    c = list(rt_lidar.simulate("VLP-16", scans=2, seed=4, weather={"rain_mm_h": 10}))
    assert [s.index for s in a] == [0, 1]
    assert a[0].points.dtype == rt_lidar.POINT_DTYPE
    assert a[0].points.size > 20_000
    assert _points_of(a) == _points_of(b)
    assert _points_of(a) != _points_of(c)
    assert np.any(a[0].points["flags"] & rt_lidar.PointFlag.RAIN_CLUTTER)


def test_simulate_refuses_unknown_weather_and_bad_counts() -> None:
    with pytest.raises(ConfigError, match=r"unknown field.*drizzle.*known: fog_visibility_m"):
        next(rt_lidar.simulate("VLP-16", weather={"drizzle": 1.0}))
    with pytest.raises(ConfigError, match="rain"):
        next(rt_lidar.simulate("VLP-16", weather={"rain_mm_h": -5}))
    with pytest.raises(ConfigError, match="frames"):
        next(rt_lidar.simulate("VLP-16", scans=0))


def test_read_gives_back_every_format_written(tmp_path: Path) -> None:
    out = tmp_path / "run"
    rc = main(
        [
            "demo",
            "--in-process",
            "--preset",
            "VLP-16",
            "--frames",
            "2",
            "--quiet",
            "--out",
            str(out),
            "--sink",
            f"las:{tmp_path / 'las'}",
        ]
    )
    assert rc == 0
    pcd = rt_lidar.read(out / "scans" / "000001.pcd")
    first = next(iter(rt_lidar.simulate("VLP-16", scans=2)))
    assert pcd.dtype == rt_lidar.POINT_DTYPE and pcd.size > 0
    kitti = rt_lidar.read(out / "scans" / "000001.bin")
    np.testing.assert_allclose(kitti["x"], pcd["x"], atol=1e-6)
    # the command line's in-process demo is simulate() with files written: the same points
    pcd0 = rt_lidar.read(out / "scans" / "000000.pcd")
    assert pcd0.tobytes() == first.points.tobytes()
    las = rt_lidar.read(sorted((tmp_path / "las").glob("*.las"))[0])
    assert las.size == first.points.size
    np.testing.assert_allclose(las["x"], first.points["x"], atol=2e-4)
    np.testing.assert_array_equal(las["ring"], first.points["ring"])
    folder = rt_lidar.read(out / "scans")
    assert len(folder) == 2
    assert [p.size for p in folder][1] == pcd.size
    with pytest.raises(ConfigError, match=r"vendor.s decoder|velodyne-decoder"):
        (tmp_path / "x.pcap").write_bytes(b"")
        rt_lidar.read(tmp_path / "x.pcap")


def test_a_non_empty_out_is_refused_and_overwrite_clears_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["demo", "--in-process", "--frames", "2", "--quiet", "--out", str(out)]
    assert main([*args, "--preset", "HDL-64E", "--frames", "3"]) == 0
    capsys.readouterr()
    assert main([*args, "--preset", "VLP-16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not empty" in err[0] and "--overwrite" in err[0]
    assert main([*args, "--preset", "VLP-16", "--overwrite"]) == 0
    assert sorted(p.name for p in (out / "scans").glob("*.pcd")) == ["000000.pcd", "000001.pcd"]
    assert json.loads((out / "config.json").read_text())["config"]["preset"] == "VLP-16"


def test_an_early_error_leaves_no_folder(tmp_path: Path) -> None:
    out = tmp_path / "never"
    assert (
        main(["demo", "--in-process", "--frames", "2", "--quiet", "--out", str(out), "--preset", "NOPE"]) == 2
    )
    assert not out.exists()


def test_a_run_prints_a_few_lines(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "rt_lidar.cli.main",
            "demo",
            "--in-process",
            "--preset",
            "VLP-16",
            "--frames",
            "2",
            "--quiet",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = res.stdout.strip().splitlines()
    assert 1 <= len(lines) <= 3, res.stdout
    assert str(tmp_path / "o") in lines[0] and "real time" in res.stdout


def test_version_and_help_from_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"rt-lidar {rt_lidar.__version__}"
    res = subprocess.run(
        [sys.executable, "-m", "rt_lidar.cli.main", "demo", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    flat = " ".join(res.stdout.split()).replace("- ", "-")
    for kind in SINK_FACTORIES:
        assert kind in flat, kind


def test_the_preset_is_checked_against_the_servers_lidar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with served("VLP-16") as (_sim, server):
        address = f"127.0.0.1:{server.port}"
        run = ["run", "--airsim", address, "--lockstep", "--frames", "2", "--quiet"]
        assert main([*run, "--preset", "HDL-64E", "--out", str(tmp_path / "a")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        assert "HDL-64E" in err[0] and "16 channels" in err[0] and "'VLP-16'" in err[0]
        assert not (tmp_path / "a").exists()
        assert main([*run, "--preset", "server", "--out", str(tmp_path / "b")]) == 0
        assert "adopted as preset VLP-16" in capsys.readouterr().err
        assert json.loads((tmp_path / "b" / "summary.json").read_text())["preset"] == "VLP-16"


def test_a_partial_first_scan_against_a_running_server_is_dropped_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with served("VLP-16") as (_sim, server):
        with AirSimClient(port=server.port) as client:
            client.sim_continue_for_time(0.37)  # the simulator ran before the controller came
        out = tmp_path / "late"
        run = ["run", "--airsim", f"127.0.0.1:{server.port}", "--preset", "VLP-16", "--lockstep"]
        assert main([*run, "--frames", "2", "--quiet", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "first scan" in err and "partial" in err
    summary = json.loads((out / "summary.json").read_text())
    partial = summary["partial_first_scan"]
    assert partial["fired"] < summary["rays_per_scan"]
    fired_per_scan = summary["rays_per_scan"]
    scans = [rt_lidar.read(p) for p in sorted((out / "scans").glob("*.pcd"))]
    assert len(scans) == 2
    assert all(s.size > 0.85 * fired_per_scan for s in scans)


def test_stock_path_says_what_got_which_material_and_lists_materials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with served("VLP-16") as (_sim, server):
        run = ["run", "--airsim", f"127.0.0.1:{server.port}", "--preset", "VLP-16", "--lockstep"]
        run += ["--no-extension", "--frames", "1", "--quiet"]
        assert main([*run, "--out", str(tmp_path / "a")]) == 0
        err = capsys.readouterr().err
        # 157 objects since issue 40 drew each street car's paint and glazing (156 before: the draws
        # after the cars moved, one more parked car fits)
        assert "materials by name rules: 157 objects" in err and "asphalt" in err
        assert "on the default (concrete)" in err
        bad = tmp_path / "bad.toml"
        bad.write_text('[segments]\n"1" = "tarmac"\n')
        assert main([*run, "--out", str(tmp_path / "b"), "--material-map", str(bad)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "tarmac" in err[0] and "asphalt" in err[0] and "car_paint_red" in err[0]


def test_attach_without_rules_says_every_surface_is_concrete(capsys: pytest.CaptureFixture[str]) -> None:
    with served("VLP-16") as (_sim, server):
        scans = list(rt_lidar.attach(f"127.0.0.1:{server.port}", "VLP-16", scans=1, stock=True, rules=False))
    assert scans[0].points.size > 0
    err = capsys.readouterr().err
    assert "every surface is taken as concrete" in err


def test_a_packet_sink_that_drops_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hil"
    sink = "velodyne-udp:127.0.0.1:2399,late_ms=0,latency_ms=0"
    rc = main(
        [
            "demo",
            "--in-process",
            "--preset",
            "VLP-16",
            "--frames",
            "3",
            "--quiet",
            "--out",
            str(out),
            "--sink",
            sink,
        ]
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    (report,) = summary["sinks"]
    assert report["sink"] == sink
    assert report["sent"] + report["dropped_late"] + report["dropped_full"] > 0
    err = capsys.readouterr().err
    if report["dropped_late"] or report["dropped_full"]:
        assert "packets or frames dropped" in err
    else:
        assert "dropped" not in err


def test_the_demo_summary_says_the_server_it_used(tmp_path: Path) -> None:
    out = tmp_path / "bridged"
    assert main(["demo", "--preset", "VLP-16", "--frames", "2", "--quiet", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    bridge = summary["scenario"]["demo"]["bridge"]
    assert bridge["lockstep"] is True
    assert bridge["airsim"] == summary["bridge"]["server"]
    assert (
        main(
            [
                "demo",
                "--in-process",
                "--preset",
                "VLP-16",
                "--frames",
                "1",
                "--quiet",
                "--out",
                str(tmp_path / "ip"),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "ip" / "summary.json").read_text())["scenario"]["demo"]["bridge"] is None


def test_simulate_takes_faults_as_tables_or_a_file(tmp_path: Path) -> None:
    dead = [{"kind": "dead_channel", "rings": [3, 7]}]
    (scan,) = rt_lidar.simulate("VLP-16", scans=1, faults=dead)
    assert scan.points.size > 0 and not np.isin(scan.points["ring"], [3, 7]).any()
    (clean,) = rt_lidar.simulate("VLP-16", scans=1)
    assert np.isin(clean.points["ring"], [3, 7]).any()
    path = tmp_path / "f.toml"
    path.write_text('[[fault]]\nkind = "dead_channel"\nrings = [3, 7]\n')
    (again,) = rt_lidar.simulate("VLP-16", scans=1, faults=path)
    assert again.points.tobytes() == scan.points.tobytes()


def test_packet_sinks_report_sent_and_dropped_live() -> None:
    import time

    from rt_lidar.sinks.base import SinkContext, make_sink
    from rt_lidar.sinks.stats import live_sink_figures

    spec = "velodyne-udp:127.0.0.1:2398,late_ms=0"
    sink = make_sink(spec)
    scans = list(rt_lidar.simulate("VLP-16", scans=2))
    sink.open(SinkContext(preset=rt_lidar.load_preset("VLP-16")))
    try:
        assert live_sink_figures([spec], [sink]) == {}
        for scan in scans:
            sink.write(scan)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not live_sink_figures([spec], [sink]):
            time.sleep(0.1)
        figure = live_sink_figures([spec], [sink])["velodyne-udp"]
        assert figure.startswith("sent ")
    finally:
        sink.close()
    final = sink.stats
    assert final is not None and final.sent + final.dropped_late + final.dropped_full > 0


def test_a_rig_applies_the_beam_options_and_sunlight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rig = Path(__file__).parents[2] / "docs" / "rigs" / "roof-and-corners.toml"
    argv = [
        "demo",
        "--rig",
        str(rig),
        "--frames",
        "1",
        "--quiet",
        "--no-rosbag",
        "--out",
        str(tmp_path / "r"),
    ]
    assert main([*argv, "--sub-rays", "3", "--return-mode", "dual", "--sun-lux", "1000"]) == 0
    err = capsys.readouterr().err
    assert "not applied" not in err and "--sub-rays" not in err
    assert main([*argv[:-1], str(tmp_path / "plain")]) == 0
    assert "not applied" not in capsys.readouterr().err
