"""Recordings read back by other people's readers: rosbags (bit-exact PointCloud2), laspy."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from rt_lidar.errors import ConfigError
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.base import SinkContext, make_sink

_PF_NUMPY = {2: "u1", 4: "<u2", 6: "<u4", 7: "<f4"}  # sensor_msgs/PointField datatypes we write


@pytest.mark.parametrize(
    ("storage", "fields", "names", "step"),
    [
        (
            "mcap",
            None,
            ["x", "y", "z", "intensity", "ring", "time", "reflectivity", "return_id", "flags", "segment"],
            36,
        ),
        ("sqlite3", "velodyne", ["x", "y", "z", "intensity", "ring", "time"], 22),
    ],
)
def test_rosbag2_reads_back_bit_exact(tmp_path, pipeline_scans, storage, fields, names, step):
    from rosbags.highlevel import AnyReader

    scans = pipeline_scans("VLP-16", 2)
    assert scans[0].points["flags"].any() or scans[0].points["segment"].any()  # fields worth carrying
    opts = f",fields={fields}" if fields else ""
    sink = make_sink(f"rosbag2:{tmp_path / 'bag'},storage={storage}{opts}")
    sink.open(SinkContext(load_preset("VLP-16")))
    for s in scans:
        sink.write(s)
    sink.close()
    with AnyReader([tmp_path / "bag"]) as reader:
        clouds = [c for c in reader.connections if c.topic == "/points"]
        msgs = [reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages(connections=clouds)]
        tfs = [c for c in reader.connections if c.topic == "/tf"]
        assert len(list(reader.messages(connections=tfs))) == len(scans)
    assert len(msgs) == len(scans)
    for msg, scan in zip(msgs, scans, strict=True):
        assert [f.name for f in msg.fields] == names
        assert msg.width == scan.points.size and msg.point_step == step
        # decoded from the message's own field table, not from our layout
        fmt = [_PF_NUMPY[f.datatype] for f in msg.fields]
        offsets = [f.offset for f in msg.fields]
        layout = np.dtype({"names": names, "formats": fmt, "offsets": offsets, "itemsize": msg.point_step})
        got = np.frombuffer(np.asarray(msg.data).tobytes(), layout)
        for name in names:
            want = scan.points["t"] * 1e-9 if name == "time" else scan.points[name]
            np.testing.assert_array_equal(got[name], want.astype(layout[name]), err_msg=name)
    assert (tmp_path / "bag_config" / "rt_lidar_config.json").exists()
    with pytest.raises(ConfigError, match="sink rosbag2: option fields='xyz': must be one of all, velodyne"):
        make_sink(f"rosbag2:{tmp_path / 'other'},fields=xyz")


_KILLED_WRITER = r"""
import sys, time
from rt_lidar.points import empty_points
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.base import SinkContext, make_sink
from rt_lidar.pipeline.assembler import Scan
sink = make_sink(sys.argv[1])
sink.open(SinkContext(load_preset("VLP-16")))
for i in range(100_000):
    p = empty_points(500)
    p["x"] = i
    sink.write(Scan(i, i * 100_000_000, p, 500, 0))
    print(i, flush=True)
    time.sleep(0.02)
"""


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_killed_rosbag2_recording_reads_up_to_its_last_finished_segment(tmp_path, storage):
    import os
    import signal
    import subprocess
    import sys

    from rosbags.highlevel import AnyReader

    bag = tmp_path / "bag"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, f"rosbag2:{bag},storage={storage},segment=2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    written = [int(proc.stdout.readline()) for _ in range(7)]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with AnyReader([bag]) as reader:
        clouds = [c for c in reader.connections if c.topic == "/points"]
        xs = [
            float(np.frombuffer(bytes(reader.deserialize(raw, c.msgtype).data[:4]), "<f4")[0])
            for c, _, raw in reader.messages(connections=clouds)
        ]
    # 7 scans were written when it died; segments of 2 finished at scans 2, 4 and 6 (maybe 8)
    assert written == list(range(7))
    assert xs[:6] == [0, 1, 2, 3, 4, 5]
    assert len(xs) in (6, 8)


def test_las_reads_back(tmp_path, pipeline_scans):
    import laspy

    scan = pipeline_scans("VLP-16", 1)[0]
    sink = make_sink(f"las:{tmp_path}")
    sink.open(SinkContext(load_preset("VLP-16")))
    sink.write(scan)
    sink.close()
    las = laspy.read(tmp_path / "000000.las")
    assert las.header.version.major == 1 and las.header.version.minor == 4
    np.testing.assert_allclose(las.x, scan.points["x"], atol=1e-4)
    np.testing.assert_allclose(las.z, scan.points["z"], atol=1e-4)
    for name in ("ring", "t", "segment"):
        np.testing.assert_array_equal(las[name], scan.points[name])


def test_replay_resends_a_pcap_on_schedule(tmp_path, pipeline_scans):
    import socket

    from rt_lidar.sinks.replay import replay_pcap

    sink = make_sink(f"velodyne-pcap:{tmp_path / 'v.pcap'}")
    sink.open(SinkContext(load_preset("VLP-16")))
    sink.write(pipeline_scans("VLP-16", 1)[0])
    sink.close()
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    rx.bind(("127.0.0.1", 0))
    stats = replay_pcap(tmp_path / "v.pcap", "127.0.0.1", rx.getsockname()[1])
    rx.settimeout(0.5)
    got = 0
    with contextlib.suppress(TimeoutError):
        while True:
            rx.recv(2048)
            got += 1
    # 75 whole data packets, the padded last one, and a position packet every 14 data packets' time
    # (18.6 ms: 0, 18.6, ..., 92.9 ms within the rotation's 100 ms)
    assert stats.sent == got == 76 + 6
