"""Replaying cloud recordings (a PCD folder, a rosbag2 bag) into other sinks at the recorded rate."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from rt_lidar.cli.main import main
from rt_lidar.errors import ConfigError
from rt_lidar.sinks import read_kitti_bin
from rt_lidar.sinks.pcd import read_pcd_points
from rt_lidar.sinks.replay import recorded_scans, replay_clouds


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    out = tmp_path_factory.mktemp("rec")
    args = ["demo", "--preset", "VLP-16", "--frames", "3", "--quiet", "--in-process", "--out", str(out)]
    assert main([*args, "--sink", f"rosbag2:{out / 'bag'}"]) == 0
    return out


def test_pcd_folder_replays_into_kitti_with_the_same_points_at_the_scan_rate(recording, tmp_path):
    t0 = time.perf_counter()
    summary = replay_clouds(recording / "scans", [f"kitti:{tmp_path / 'k'}"])
    assert summary["scans"] == 3 and summary["preset"] == "VLP-16"
    assert time.perf_counter() - t0 >= 0.2  # three 10 Hz scans: the last leaves 0.2 s after the first
    for i in range(3):
        np.testing.assert_array_equal(
            read_kitti_bin(tmp_path / "k" / f"{i:06d}.bin"),
            read_kitti_bin(recording / "scans" / f"{i:06d}.bin"),
        )


def test_rosbag_replays_its_clouds(recording, tmp_path):
    preset, scans = recorded_scans(recording / "bag")
    assert preset.name == "VLP-16" and len(scans) == 3
    original = read_pcd_points(recording / "scans" / "000001.pcd")
    got = scans[1][1].points
    for f in ("x", "y", "z", "intensity", "ring", "reflectivity", "return_id", "flags", "segment"):
        np.testing.assert_array_equal(got[f], original[f])  # every field the viewer colours by
    assert scans[1][0] - scans[0][0] == 100_000_000  # the recorded stamps


def test_cli_replay_of_a_folder_and_bad_input(recording, tmp_path, capsys):
    assert main(["replay", str(recording / "scans"), "--rate", "10", "--sink", f"pcd:{tmp_path / 'p'}"]) == 0
    assert json.loads(capsys.readouterr().out)["scans"] == 3
    assert len(list((tmp_path / "p").glob("*.pcd"))) == 3
    with pytest.raises(ConfigError, match="not a recording"):
        recorded_scans(tmp_path / "p" / ".." / "p" / "..")
    assert main(["replay", str(recording / "scans"), "--sink", "nope:x"]) == 2
    assert "unknown kind 'nope'" in capsys.readouterr().err


def test_the_viewer_plays_a_bag_recording(recording):
    from rt_lidar.viewer.sources import RecordingSource

    src = RecordingSource(recording / "bag", speed=10.0)
    assert len(src) == 3 and src.recording.preset is not None and src.recording.preset.name == "VLP-16"
    frame = src.poll()["scan"]
    original = read_pcd_points(recording / "scans" / "000000.pcd")
    np.testing.assert_array_equal(frame.points["x"], original["x"])
    assert frame.header["preset"] == "VLP-16" and len(frame.header["elevations_deg"]) == 16
    # played at the recorded stamps (100 ms apart), ten times faster
    assert src.time_s(2) == pytest.approx(0.2)
    wall0, _ = src._anchor  # anchored when scan 0 was handed out
    assert [src._due_index(wall0 + dt) for dt in (0.005, 0.0105, 0.0195, 0.5)] == [0, 1, 1, 2]
    src.close()


def test_a_bag_opens_lazily_and_reads_any_scan(recording):
    import tracemalloc

    from rt_lidar.sinks.recording import CloudRecording

    originals = [read_pcd_points(recording / "scans" / f"{i:06d}.pcd") for i in range(3)]
    tracemalloc.start()
    try:
        rec = CloudRecording(recording / "bag")
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # opening keeps the index, not the clouds: less than one scan's points (~30k x 22 bytes in the bag)
    assert held < originals[0].size * 22 // 2, held
    assert len(rec) == 3 and np.all(np.diff(rec.stamps_ns) == 100_000_000)
    for i in (2, 0, 1):  # random access
        got = rec.points(i)
        for f in ("x", "y", "z", "intensity", "ring"):
            np.testing.assert_array_equal(got[f], originals[i][f])
    streamed = [scan.points.size for _stamp, scan in rec]
    assert streamed == [o.size for o in originals]
    with pytest.raises(IndexError):
        rec.points(3)
    rec.close()


def test_bad_recordings_say_what_is_wrong(recording, tmp_path):
    from rt_lidar.sinks.recording import CloudRecording

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "metadata.yaml").write_text("rosbag2_bagfile_information: [not, a, bag]\n")
    with pytest.raises(ConfigError, match="not a readable rosbag2 recording"):
        CloudRecording(bad)
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "000000.pcd").write_bytes((recording / "scans" / "000000.pcd").read_bytes())
    (tmp_path / "cfg" / "rt_lidar_config.json").write_text("{broken")
    with pytest.raises(ConfigError, match=r"rt_lidar_config.json: not a valid rt-lidar config"):
        CloudRecording(tmp_path / "cfg")
    # another tool's config.json beside the scans is passed over: the recording opens, sensor unknown
    (tmp_path / "cfg" / "rt_lidar_config.json").unlink()
    (tmp_path / "cfg" / "config.json").write_text('{"preset": {"name": "not ours"}}')
    assert CloudRecording(tmp_path / "cfg").preset is None


def test_a_kitti_sequence_plays_with_its_times_and_rings_from_the_beam_table(tmp_path):
    """The real KITTI HDL-64E frame laid out as a sequence: its velodyne/ folder opens as a recording
    of the HDL-64E, at the times of times.txt, each point on the beam nearest its elevation."""
    from pathlib import Path

    from rt_lidar.sensor.presets import load_preset
    from rt_lidar.sinks.recording import CloudRecording
    from rt_lidar.viewer.sources import RecordingSource

    real = Path(__file__).resolve().parents[4] / "shared" / "reference" / "real" / "kitti_000008"
    if not (real / "velodyne_000008.bin").is_file():
        pytest.skip("../shared/reference/real/kitti_000008 not present")
    velo = tmp_path / "sequences" / "08" / "velodyne"
    velo.mkdir(parents=True)
    for i in range(3):
        (velo / f"{i:06d}.bin").symlink_to(real / "velodyne_000008.bin")
    (velo.parent / "times.txt").write_text("0.000000e+00\n1.036290e-01\n2.072120e-01\n")
    kitti = read_kitti_bin(real / "velodyne_000008.bin")
    with CloudRecording(velo) as rec:
        assert rec.kind == "kitti" and rec.preset is not None and rec.preset.name == "HDL-64E"
        assert rec.stamps_ns.tolist() == [0, 103_629_000, 207_212_000]
        pts = rec.points(1)
    np.testing.assert_array_equal(pts["x"], kitti[:, 0])
    np.testing.assert_array_equal(pts["reflectivity"], kitti[:, 3])
    # rings: each point on its nearest beam (of the HDL-64E's table)
    beams = load_preset("HDL-64E").elevations_deg
    elev = np.degrees(np.arctan2(pts["z"], np.hypot(pts["x"], pts["y"])))
    err = np.abs(elev[:, None] - beams[None, :])
    assert np.array_equal(err.argmin(1), pts["ring"])
    assert len(np.unique(pts["ring"])) >= 40  # the frame is cropped to the camera: 44 beams see it
    assert np.median(err.min(1)) < 0.1  # KITTI's points lie close to the published beam elevations
    src = RecordingSource(velo)
    frame = src.poll()["scan"]
    assert frame.header["preset"] == "HDL-64E" and frame.points.size == kitti.shape[0]
    assert src.time_s(2) == pytest.approx(0.207212)
