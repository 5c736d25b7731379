"""``rt-lidar demo --faults``: the faults ride in config.json, a re-run gives the same bytes, and
summary.json says what was injected and when."""

from __future__ import annotations

import json
from pathlib import Path

from rt_lidar.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
FAULTS = ROOT / "docs" / "examples" / "faults_vlp16.toml"


def _files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.suffix in (".pcd", ".bin", ".pcap")
    }


def test_a_faulty_demo_re_runs_to_the_same_bytes(tmp_path, capsys):
    out = tmp_path / "faulty"
    args = ["demo", "--in-process", "--quiet", "--preset", "VLP-16", "--frames", "3", "--out", str(out)]
    sink = ["--sink", f"velodyne-pcap:{out / 'v.pcap'}"]
    assert main([*args, *sink, "--faults", str(FAULTS)]) == 0
    capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    recorded = json.loads((out / "config.json").read_text())["config"]["faults"]
    assert [f["kind"] for f in recorded] == ["dirt", "weak_channel", "reboot", "packet_loss", "reorder"]
    faults = {f["kind"]: f for f in summary["faults"]}
    assert faults["reboot"]["injected"]["scans_dropped"] == 1 and summary["scans_suppressed"] == 1
    assert summary["frames"] == 2  # scan 0 lost to the reboot (0.05-0.1 s), scans 1 and 2 written
    assert faults["dirt"]["injected"]["scans"] == 2 and faults["dirt"]["injected"]["points_added"] > 0
    assert faults["packet_loss"]["injected"]["packets"]["velodyne-pcap.lost"] > 0
    again = tmp_path / "again"
    assert (
        main(
            [
                "demo",
                "--config",
                str(out / "config.json"),
                "--out",
                str(again),
                "--quiet",
                "--sink",
                f"velodyne-pcap:{again / 'v.pcap'}",
            ]
        )
        == 0
    )
    capsys.readouterr()
    first, second = _files(out), _files(again)
    assert set(first) == set(second) and len(first) == 5
    assert first == second
