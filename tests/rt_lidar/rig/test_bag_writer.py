"""The rig bag's MCAP writer (``rt_lidar.rig.bag_writer``) writes rosbags' file byte for byte with fewer
copies: the same messages through rosbags' ``Writer`` and ``LeanWriter`` give equal files (messages
small and large, chunks closed by size, several topics, the summary), which rosbags reads back."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from rt_lidar.pipeline.builder import build_world
from rt_lidar.rig.bag import RigBag
from rt_lidar.rig.bag_writer import LeanWriter
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.model import load_rig

RIG = Path(__file__).resolve().parents[3] / "docs" / "rigs" / "roof-and-corners.toml"


def _write(cls: type[Writer], path: Path, sizes: list[int], seed: int) -> bytes:
    ts = get_typestore(Stores.ROS2_HUMBLE)
    rng = np.random.default_rng(seed)
    with cls(path, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = [writer.add_connection(f"/s{i}/raw", "std_msgs/msg/String", typestore=ts) for i in range(3)]
        for k, n in enumerate(sizes):
            data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
            # bytes, a read-only memoryview (what serialize_cdr gives) and a bytearray
            payload = (data, memoryview(bytearray(data)).toreadonly(), bytearray(data))[k % 3]
            writer.write(conns[k % 3], 1_000 + 37 * k - (k % 5), payload)
    return (path / f"{path.name}.mcap").read_bytes()


@pytest.mark.parametrize(
    "sizes",
    [
        [10, 20, 30],  # one chunk, closed at the end
        [5_000_000, 12, 3_000_000, 700_000, 700_000, 1, 2**20 - 60, 2**20 + 5, 0],  # chunks closed by size
        [400_000] * 9,
        # around the size a message is kept by reference at (2**16), small ones between: one chunk of both
        [65_535, 65_536, 10, 65_537, 7, 2**20 - 200_000, 3, 131_072, 1],
    ],
)
def test_the_lean_writer_s_file_is_rosbags_s(tmp_path: Path, sizes: list[int]) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    want = _write(Writer, tmp_path / "a" / "bag", sizes, 1)  # the same name: the file lists it
    got = _write(LeanWriter, tmp_path / "b" / "bag", sizes, 1)
    assert got == want
    with Reader(tmp_path / "b" / "bag") as reader:
        assert [len(raw) for _c, _t, raw in reader.messages()] == [n for n in sizes]


def test_a_rig_bag_reads_back_with_every_scan(tmp_path: Path) -> None:
    rig = load_rig(RIG)
    loop = RigLoop(rig, build_world("street", seed=3), seed=3)
    bag = RigBag(tmp_path / "bag", rig)
    bag.open()
    written = []
    for _ in range(3):
        for name, scans in loop.step().items():
            for scan in scans:
                bag.write(name, scan)
                written.append((f"/{name}/points", scan.points.size))
    bag.close()
    ts = get_typestore(Stores.ROS2_HUMBLE)
    with Reader(tmp_path / "bag") as reader:
        got = [
            (c.topic, ts.deserialize_cdr(raw, c.msgtype).width)  # type: ignore[attr-defined]
            for c, _t, raw in reader.messages()
            if c.topic != "/tf_static"
        ]
    assert got == written and written


def test_a_cloud_packed_into_its_message_is_rosbags_serialization(tmp_path: Path) -> None:
    """RigBag packs each scan straight into its CDR message: the bytes rosbags' serialize_cdr gives for
    the PointCloud2 with the cloud as its data, for every sensor of the rig (and an empty scan)."""
    rig = load_rig(RIG)
    loop = RigLoop(rig, build_world("street", seed=3), seed=3)
    bag = RigBag(tmp_path / "bag", rig)
    bag.open()
    seen = 0
    for _ in range(3):
        for name, scans in loop.step().items():
            for scan in scans:
                fast, want = bag.message(name, scan), bag.message(name, scan, in_place=False)
                assert bytes(fast) == bytes(want)
                empty = dataclasses.replace(scan, points=scan.points[:0])
                assert bytes(bag.message(name, empty)) == bytes(bag.message(name, empty, in_place=False))
                seen += 1
    bag.close()
    assert seen == 3
