"""Network faults on the ROS 2 sink: a node in another process gets each scan twice (``duplicate``)
and the scans a ``packet_loss`` fault drops never arrive."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cyclonedds", reason="the ros2 extra (pip install -e '.[ros2]')")

from rt_lidar.config import RunConfig
from rt_lidar.faults.spec import faults_from_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.session.demo import run_demo

READER = Path(__file__).parents[1] / "sinks" / "ros2_reader.py"
LOOPBACK = (
    "<CycloneDDS><Domain Id='any'><General>"
    "<Interfaces><NetworkInterface name='lo' multicast='false'/></Interfaces>"
    "<AllowMulticast>false</AllowMulticast><MaxMessageSize>65500B</MaxMessageSize></General>"
    "<Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>20</MaxAutoParticipantIndex>"
    "<Peers><Peer address='127.0.0.1'/></Peers></Discovery>"
    "<Internal><SocketReceiveBufferSize max='8MB'/></Internal></Domain></CycloneDDS>"
)


def test_a_ros2_node_gets_duplicated_scans_and_misses_lost_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("CYCLONEDDS_URI", LOOPBACK)
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    domain = random.SystemRandom().randrange(1, 233)
    faults = faults_from_table(
        {
            "fault": [
                {"kind": "duplicate", "rate": 1.0, "sink": "ros2"},
                {"kind": "packet_loss", "rate": 1.0, "sink": "ros2", "start_s": 0.1, "end_s": 0.2},
            ]
        },
        "test",
    )
    frames, want = 3, 4  # scans 0 and 2, twice each; scan 1 lost
    out = tmp_path / "received"
    out.mkdir()
    reader = subprocess.Popen(
        [sys.executable, str(READER), str(domain), "/lidar/points", str(want), "60", str(out)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
        summary = run_demo(
            RunConfig(
                preset="VLP-16",
                frames=frames,
                out=str(tmp_path / "demo"),
                progress=False,
                in_process=True,
                sinks=(f"ros2:/lidar/points,domain={domain},frame=velodyne",),
                faults=faults,
            )
        )
        line = reader.stdout.readline()
        assert reader.wait(timeout=30) == 0
    finally:
        reader.kill()
    stamps = [c["stamp_ns"] for c in json.loads(line)["clouds"]]
    period = scan_period_ns(load_preset("VLP-16"))
    assert stamps == [0, 0, 2 * period, 2 * period]
    injected = {f["kind"]: f["injected"]["packets"] for f in summary["faults"]}
    assert injected == {"duplicate": {"ros2.duplicated": 2}, "packet_loss": {"ros2.lost": 1}}
