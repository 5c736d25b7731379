"""What a rig run writes: OUT/<sensor>/scans, one rosbag2 (read back with rosbags) with a topic per
sensor and every mount in /tf_static, and a settings.json with every lidar block."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rt_lidar.bridge.airsim_settings import preset_from_airsim_settings
from rt_lidar.cli.main import main
from rt_lidar.rig import load_rig

EXAMPLE = Path(__file__).parents[3] / "docs" / "rigs" / "roof-and-corners.toml"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rig") / "run"
    assert main(["demo", "--rig", str(EXAMPLE), "--frames", "1", "--out", str(out), "--quiet"]) == 0
    return out


def test_each_sensor_writes_its_own_scans(out: Path) -> None:
    summary = json.loads((out / "summary.json").read_text())
    for name in ("top", "front_left", "front_right"):
        scans = out / name / "scans"
        assert (scans / "000000.pcd").is_file() and (scans / "000000.bin").is_file()
        assert summary["sensors"][name]["scans_written"] == 1
        key, *values = (out / name / "calib.txt").read_text().split()
        matrix = np.array(values, float).reshape(3, 4)
        assert key == "Tr_lidar_to_base_link:"
        assert np.allclose(matrix, load_rig(EXAMPLE).sensor(name).mount.matrix()[:3], atol=1e-12)
        assert (scans / "000000.bin").stat().st_size == 16 * summary["sensors"][name]["points_per_scan_mean"]
    assert json.loads((out / "rig.json").read_text())["rig"]["sensor"][0]["name"] == "top"


def test_rosbag_has_a_topic_per_sensor_and_the_mounts_in_tf_static(out: Path) -> None:
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    rig = load_rig(EXAMPLE)
    with AnyReader([out / "rosbag"], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
        topics = {c.topic: c for c in reader.connections}
        assert set(topics) == {"/tf_static", "/top/points", "/front_left/points", "/front_right/points"}
        ext: Any = topics["/tf_static"].ext
        assert "transient_local" in str(ext.offered_qos_profiles).lower()
        statics: list[Any] = [
            reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages([topics["/tf_static"]])
        ]
        assert len(statics) == 1
        tfs = {t.child_frame_id: t for t in statics[0].transforms}
        assert set(tfs) == set(rig.names)
        for s in rig.sensors:
            tf = tfs[s.name]
            assert tf.header.frame_id == "base_link"
            tr, q = tf.transform.translation, tf.transform.rotation
            assert [tr.x, tr.y, tr.z] == list(s.entry.mount.xyz)  # as written, exactly
            yaw = 2.0 * math.atan2(q.z, q.w)
            assert (q.x, q.y) == (0.0, 0.0) and math.degrees(yaw) == pytest.approx(s.entry.mount.rpy_deg[2])
        for s in rig.sensors:
            msgs = list(reader.messages([topics[f"/{s.name}/points"]]))
            assert len(msgs) == 1
            cloud: Any = reader.deserialize(msgs[0][2], msgs[0][0].msgtype)
            assert cloud.header.frame_id == s.name
            kitti = np.fromfile(out / s.name / "scans" / "000000.bin", np.float32).reshape(-1, 4)
            assert cloud.width == kitti.shape[0] > 1000
            xyz = np.frombuffer(cloud.data.tobytes(), np.float32).reshape(cloud.width, -1)[:, :3]
            assert np.array_equal(xyz, kitti[:, :3])


def test_airsim_settings_carries_every_lidar_at_its_mount(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    assert main(["presets", "airsim-settings", "--rig", str(EXAMPLE), "--out", str(path)]) == 0
    settings = json.loads(path.read_text())
    sensors = settings["Vehicles"]["PhysXCar"]["Sensors"]
    rig = load_rig(EXAMPLE)
    assert list(sensors) == rig.names
    for s in rig.sensors:
        block = sensors[s.name]
        x, y, z = s.entry.mount.xyz
        assert (block["X"], block["Y"], block["Z"]) == (x, -y, -z)  # NED body frame
        assert block["Yaw"] == -s.entry.mount.rpy_deg[2]
        assert preset_from_airsim_settings(settings, s.name).name == s.preset.name
    assert main(["presets", "airsim-settings"]) == 2


def test_the_stream_publishes_every_sensor(tmp_path: Path) -> None:
    import threading

    import zmq

    from rt_lidar.sinks.stream import decode_frame

    address = f"ipc://{tmp_path}/rig.sock"
    sock = zmq.Context.instance().socket(zmq.SUB)
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    sock.setsockopt(zmq.RCVTIMEO, 20_000)
    sock.setsockopt(zmq.RECONNECT_IVL, 10)  # find the publisher soon after it binds
    sock.connect(address)  # before the publisher binds: no frame is missed
    headers: list[dict] = []

    def read() -> None:
        while len(headers) < 6:
            try:
                frame = decode_frame(sock.recv_multipart(copy=False))
            except zmq.Again:
                return
            assert frame.points is not None
            headers.append({**frame.header, "got": int(frame.points.size)})

    reader = threading.Thread(target=read)
    reader.start()
    out = tmp_path / "run"
    # two scans a sensor: a live stream may lose what it publishes before the subscription reaches it
    # (ZeroMQ's slow joiner), so the second round is the one every sensor must be heard in
    argv = ["demo", "--rig", str(EXAMPLE), "--frames", "2", "--out", str(out), "--quiet", "--no-rosbag"]
    assert main([*argv, "--sink", f"zmq:{address}"]) == 0
    reader.join()
    sock.close()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stream"]["sent"] == 6 and summary["stream"]["dropped"] == 0, summary["stream"]
    assert len(headers) >= 4, headers  # at most the first round lost to the slow joiner
    assert sorted({h["sensor"] for h in headers}) == sorted(["top", "front_left", "front_right"])
    mounts = {"top": [0.0, 0.0, 1.9], "front_left": [2.2, 0.9, 0.7], "front_right": [2.2, -0.9, 0.7]}
    for h in headers:
        assert h["frame_id"] == h["sensor"] and h["kind"] == "scan"
        # where the viewer puts each sensor's points on the vehicle
        assert h["sensor_index"] == list(mounts).index(h["sensor"]) and h["sensors"] == 3
        assert h["mount"]["xyz"] == mounts[h["sensor"]]
        assert h["mount"]["rpy_deg"] == [
            0.0,
            0.0,
            {"top": 0.0, "front_left": 45.0, "front_right": -45.0}[h["sensor"]],
        ]
        assert h["got"] == h["n"] > 0
    assert not (out / "rosbag").exists()
    assert main([*argv, "--sink", f"pcd:{tmp_path}/x"]) == 2  # other sinks belong in the rig file


def test_a_sensor_s_own_sinks(tmp_path: Path) -> None:
    from rt_lidar.rig.run import RigRunOptions, run_rig_demo

    rig = tmp_path / "rig.toml"
    rig.write_text(
        f'[[sensor]]\nname = "solo"\npreset = "VLP-16"\nsinks = ["las:{tmp_path}/las"]\n'
        "mount = { xyz = [0.0, 0.0, 1.8] }\n"
    )
    summary = run_rig_demo(RigRunOptions(rig=str(rig), frames=1, out=str(tmp_path / "out"), progress=False))
    assert summary["sensors"]["solo"]["scans_written"] == 1
    assert len(list((tmp_path / "las").glob("*.la[sz]"))) == 1


def test_no_scans_leaves_the_bag_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["demo", "--rig", str(EXAMPLE), "--frames", "1", "--quiet", "--no-scans"]
    assert main([*argv, "--out", str(tmp_path / "bag")]) == 0
    assert (tmp_path / "bag" / "rosbag").is_dir()
    assert not any((tmp_path / "bag").glob("*/scans"))
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "none"), "--no-rosbag"]) == 2
    assert "--no-scans: the rig has no other output" in capsys.readouterr().err


def test_a_rig_demo_re_runs_from_its_config_json(tmp_path: Path) -> None:
    argv = ["demo", "--rig", str(EXAMPLE), "--frames", "1", "--quiet", "--no-rosbag", "--crosstalk"]
    assert main([*argv, "--seed", "5", "--out", str(tmp_path / "a")]) == 0
    recorded = json.loads((tmp_path / "a" / "config.json").read_text())["config"]
    assert recorded["rig"] == str(EXAMPLE) and recorded["crosstalk"] is True and recorded["seed"] == 5
    config = str(tmp_path / "a" / "config.json")
    assert main(["demo", "--config", config, "--quiet", "--no-rosbag", "--out", str(tmp_path / "b")]) == 0
    for name in ("top", "front_left", "front_right"):
        a, b = (tmp_path / run / name / "scans" / "000000.bin" for run in ("a", "b"))
        assert a.read_bytes() == b.read_bytes()
