"""A rig run repeats byte for byte (docs/determinism.md): the same configuration and seed, run twice, write
the same files, the rig's rosbag2 included, although each sensor's scans reach the bag from its own
writer thread. The bag's order is the frame loop's (by frame, then stamp, then the sensor's place in the
rig: ``rt_lidar.rig.bag_order``), not the threads'. ``summary.json`` differs only in its wall-clock
figures."""

from __future__ import annotations

import json
import threading
from datetime import date
from pathlib import Path

import laspy
import pytest
from mcap.reader import make_reader

from rt_lidar.cli.main import main
from rt_lidar.pipeline.builder import build_world
from rt_lidar.rig.bag import RigBag
from rt_lidar.rig.bag_order import FrameOrder
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.model import load_rig

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "rigs" / "roof-and-corners.toml"
WALL_CLOCK_KEYS = ("wall_time_s", "realtime_factor")
"""summary.json's figures of the wall clock: the only bytes a rig run may change from run to run."""


def _rig_with_file_sinks(folder: Path) -> Path:
    """The example rig with file sinks of its own on each sensor (pcap, LAS, a rosbag2 per sensor)."""
    text = EXAMPLE.read_text()
    own = [
        '["velodyne-pcap:out/top.pcap"]',
        '["las:out/front_left_las", "rosbag2:out/front_left_bag"]',
        '["velodyne-pcap:out/front_right.pcap,mode=dual"]',
    ]
    for sinks in own:
        text = text.replace("sinks = []", f"sinks = {sinks}", 1)
    path = folder / "rig.toml"
    path.write_text(text)
    return path


def _run(folder: Path, rig: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> Path:
    folder.mkdir()
    monkeypatch.chdir(folder)  # relative outputs: rig.json and config.json name the same paths
    args = ["demo", "--rig", str(rig), "--frames", "3", "--seed", "5", "--out", "out", "--quiet", *extra]
    assert main(args) == 0
    return folder / "out"


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _bag_order(mcap: Path) -> list[tuple[str, int]]:
    """(topic, log time) of every message in the order it lies in the file."""
    with mcap.open("rb") as f:
        return [(ch.topic, m.log_time) for _s, ch, m in make_reader(f).iter_messages(log_time_order=False)]


@pytest.mark.parametrize("extra", [(), ("--crosstalk",)], ids=["plain", "crosstalk"])
def test_a_rig_run_twice_writes_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: tuple[str, ...]
) -> None:
    rig = _rig_with_file_sinks(tmp_path)
    first = _files(_run(tmp_path / "a", rig, monkeypatch, *extra))
    second = _files(_run(tmp_path / "b", rig, monkeypatch, *extra))
    assert sorted(first) == sorted(second)
    for must in ("rosbag/rosbag.mcap", "top.pcap", "front_left_bag/metadata.yaml", "top/scans/000002.pcd"):
        assert must in first
    differ = [name for name in first if first[name] != second[name]]
    assert differ in ([], ["summary.json"]), f"not the same bytes: {differ}"
    summaries = [json.loads(files["summary.json"]) for files in (first, second)]
    for s in summaries:
        for key in WALL_CLOCK_KEYS:
            s.pop(key)
    assert summaries[0] == summaries[1]
    # no day of the wall clock in a LAS header: the day of the scan's stamp on the sim clock
    las = laspy.read(tmp_path / "a" / "out" / "front_left_las" / "000000.las")
    assert las.header.creation_date == date(1970, 1, 1)
    # the bag's order is the frame loop's: by stamp, then the sensor's place in the rig
    order = _bag_order(tmp_path / "a" / "out" / "rosbag" / "rosbag.mcap")
    names = load_rig(rig).names
    place = {f"/{n}/points": i for i, n in enumerate(names)}
    clouds = [(stamp, place[topic]) for topic, stamp in order if topic != "/tf_static"]
    assert order[0][0] == "/tf_static"
    assert clouds == sorted(clouds) and len(clouds) == 3 * len(names)


def test_the_bag_is_the_same_whatever_order_the_sensors_writers_finish_in(tmp_path: Path) -> None:
    """Scans handed in by the sensors' threads in the reverse of the rig's order, the last frame's
    before the frame loop has closed it, give the file of scans written one by one in the frame
    loop's order; a frame comes out only once its last scan is in."""
    rig = load_rig(EXAMPLE)
    loop = RigLoop(rig, build_world("street", seed=3), seed=3)
    frames = [loop.step() for _ in range(6)]  # 20 Hz sim frames: three 10 Hz scans a sensor
    loop.close()
    full = sum(1 for frame in frames if any(frame.values()))

    (tmp_path / "want").mkdir()
    (tmp_path / "got").mkdir()
    want = RigBag(tmp_path / "want" / "bag", rig)  # one name: the file holds it
    want.open()
    for frame in frames:
        for name in rig.names:
            for scan in frame[name]:
                want.write(name, scan)  # not expected: written at once, in this order
    want.close()

    got = RigBag(tmp_path / "got" / "bag", rig)
    got.open()
    handed = [(name, scan) for frame in frames for name in rig.names for scan in frame[name]]
    assert len(handed) == 3 * len(rig.names)
    turn = [threading.Event() for _ in rig.names]
    threads = []
    for k, name in enumerate(reversed(rig.names)):  # the last sensor's writer goes first

        def writer(k: int = k, name: str = name) -> None:
            turn[k].wait(timeout=60)
            for who, scan in handed:
                if who == name:
                    got.write(who, scan)
            if k + 1 < len(turn):
                turn[k + 1].set()

        threads.append(threading.Thread(target=writer))
    for i, frame in enumerate(frames):
        for name in rig.names:
            for scan in frame[name]:
                got.expect(name, scan)
        if i < len(frames) - 1:
            got.end_frame()
    for t in threads:
        t.start()
    turn[0].set()
    for t in threads:
        t.join(timeout=60)
    # every scan waited for the first sensor's, which came last: all but its own in frames 1 and 2
    assert got.held_most == (len(rig.names) - 1) * full + 1
    got.end_frame()  # the last frame, closed after its scans came
    got.close()
    assert (tmp_path / "got/bag/bag.mcap").read_bytes() == (tmp_path / "want/bag/bag.mcap").read_bytes()


def test_the_reorder_buffer_holds_a_frame_until_its_last_message() -> None:
    order: FrameOrder[str] = FrameOrder()
    order.expect("b0", (0, 1))
    order.expect("a0", (0, 0))
    assert order.put("b0", "B0") == []  # frame still open
    assert order.end_frame() == []  # a0 not in yet
    order.expect("a1", (1, 0))
    assert order.put("a1", "A1") == []  # frame 1 waits for frame 0
    assert order.held == 2
    assert order.put("a0", "A0") == ["A0", "B0"]  # frame 0 out, in rank order; frame 1 still open
    assert order.put("zz", "Z") is None  # never expected: its writer writes it at once
    order.expect("b1", (1, 1))
    assert order.drain() == (["A1"], 1)  # a failed run: what came, and how many never did
    order.expect("c", (0,))
    with pytest.raises(ValueError, match="expected twice"):
        order.expect("c", (0,))


def test_a_bridged_rig_writes_the_in_process_bag_byte_for_byte(tmp_path: Path) -> None:
    """``run --rig`` over the bridge drives the same frame loop, so its bag orders the same way: the
    in-process run's bag, byte for byte (metadata.yaml included)."""
    from rt_lidar.server.serve import ServeOptions, start_embedded_server

    served = start_embedded_server(ServeOptions(port=0, rig=str(EXAMPLE), paused=True, seed=0))
    try:
        bridged = tmp_path / "bridged"
        argv = ["run", "--rig", str(EXAMPLE), "--airsim", f"127.0.0.1:{served.port}", "--lockstep"]
        assert main([*argv, "--frames", "2", "--out", str(bridged), "--quiet"]) == 0
    finally:
        served.close()
    local = tmp_path / "local"
    assert main(["demo", "--rig", str(EXAMPLE), "--frames", "2", "--out", str(local), "--quiet"]) == 0
    for name in ("rosbag.mcap", "metadata.yaml"):
        assert (bridged / "rosbag" / name).read_bytes() == (local / "rosbag" / name).read_bytes()
    assert len(_bag_order(local / "rosbag" / "rosbag.mcap")) == 1 + 2 * 3
