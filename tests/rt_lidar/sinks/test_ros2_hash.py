"""ROS 2 type hashes (REP-2011 RIHS01) of the ``ros2`` sink's types equal the ones ROS 2 generates, and the
sink announces them in its endpoints' DDS USER_DATA as rmw_cyclonedds_cpp does (read back through the
DCPSPublication / DCPSParticipant built-in topics of another participant, DDS held to loopback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("cyclonedds", reason="the ros2 extra (pip install -e '.[ros2]')")

from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import array, bounded_str, char, float64, int32, sequence
from rosbags.typesys import Stores, get_typestore

from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks import ros2_types as t
from rt_lidar.sinks.base import SinkContext, make_sink
from rt_lidar.sinks.ros2_hash import endpoint_user_data, type_description, type_hash
from tests.rt_lidar.sinks.test_ros2 import dds_domain  # noqa: F401  (fixture)

GOLDEN = {
    # rcl/test/rcl/test_type_hash.cpp and generated code (Jazzy): "Copied directly from generated code"
    t.PointCloud2: "RIHS01_9198cabf7da3796ae6fe19c4cb3bdd3525492988c70522628af5daa124bae2b5",
    t.PointField: "RIHS01_5c6a4750728c2bcfbbf7037225b20b02d4429634732146b742dee1726637ef01",
    t.Header: "RIHS01_f49fb3ae2cf070f793645ff749683ac6b06203e41c891e17701b1cb597ce6a01",
    t.TFMessage: "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087",
    t.Clock: "RIHS01_692f7a66e93a3c83e71765d033b60349ba68023a8c689a79e48078bcb5c58564",
}


@pytest.mark.parametrize("cls", list(GOLDEN), ids=lambda c: c.__name__)
def test_type_hash_equals_what_ros2_generates(cls):
    assert type_hash(cls) == GOLDEN[cls]


@pytest.mark.parametrize("name", ["PointCloud2", "TFMessage", "Clock", "TransformStamped", "Time"])
def test_type_hash_equals_rosbags_for_every_published_type(name):
    cls = getattr(t, name)
    store = get_typestore(Stores.ROS2_JAZZY)
    ros = type_description(cls)["type_description"]["type_name"]
    assert type_hash(cls) == store.hash_rihs01(ros)


@dataclass
class WrongClock(IdlStruct, typename="rosgraph_msgs::msg::dds_::Clock_"):
    clock: int32 = 0  # a plain integer where ROS has builtin_interfaces/Time


def test_a_member_off_the_msg_changes_the_hash():
    assert type_hash(WrongClock) != GOLDEN[t.Clock]


_PEER = """
import json, sys, time
from cyclonedds.domain import DomainParticipant
from cyclonedds.qos import Policy
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from rt_lidar.sinks import ros2_types as t
dp = DomainParticipant(int(sys.argv[1]))
readers = {n: DataReader(dp, Topic(dp, n, c)) for n, c in
           (("rt/points", t.PointCloud2), ("rt/tf_static", t.TFMessage), ("rt/clock", t.Clock))}
seen, deadline = {}, time.monotonic() + 30
while len(seen) < 3 and time.monotonic() < deadline:
    for n, r in readers.items():
        for h in r.get_matched_publications():
            d = r.get_matched_publication_data(h)
            ud = [bytes(p.data).decode() for p in d.qos if isinstance(p, Policy.Userdata)]
            seen[n] = [d.type_name, ud[0] if ud else ""]
    time.sleep(0.1)
print(json.dumps(seen))
"""
"""A DDS node in another process: per topic, the type name and USER_DATA of the writer it matched."""


def test_sink_announces_type_hashes_in_user_data(dds_domain):  # noqa: F811
    from cyclonedds.qos import Policy

    sink = make_sink(f"ros2:/points,domain={dds_domain}")
    sink.open(SinkContext(preset=load_preset("VLP-16")))
    try:
        out = subprocess.run(
            [sys.executable, "-c", _PEER, str(dds_domain)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])},
        )
        enclave = [bytes(p.data) for p in sink._participant.get_qos() if isinstance(p, Policy.Userdata)]
    finally:
        sink.close()
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["rt/points"] == ["sensor_msgs::msg::dds_::PointCloud2_", f"typehash={GOLDEN[t.PointCloud2]};"]
    assert seen["rt/tf_static"] == ["tf2_msgs::msg::dds_::TFMessage_", f"typehash={GOLDEN[t.TFMessage]};"]
    assert seen["rt/clock"] == ["rosgraph_msgs::msg::dds_::Clock_", f"typehash={GOLDEN[t.Clock]};"]
    assert endpoint_user_data(t.Clock) == f"typehash={GOLDEN[t.Clock]};".encode()
    assert enclave == [b"enclave=/;"]


# Types beyond the sink's, to check the algorithm on fixed arrays and bounded strings (ROS 2's own
# discovery types and sensor_msgs/Imu, whose covariances are float64[9]).
@dataclass
class Gid(IdlStruct, typename="rmw_dds_common::msg::dds_::Gid_"):
    data: array[char, 16] = field(default_factory=lambda: ["\0"] * 16)  # Jazzy: char[16]


@dataclass
class NodeEntitiesInfo(IdlStruct, typename="rmw_dds_common::msg::dds_::NodeEntitiesInfo_"):
    node_namespace: bounded_str[256] = ""
    node_name: bounded_str[256] = ""
    reader_gid_seq: sequence[Gid] = field(default_factory=list)
    writer_gid_seq: sequence[Gid] = field(default_factory=list)


@dataclass
class ParticipantEntitiesInfo(IdlStruct, typename="rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_"):
    gid: Gid = field(default_factory=Gid)
    node_entities_info_seq: sequence[NodeEntitiesInfo] = field(default_factory=list)


@dataclass
class Imu(IdlStruct, typename="sensor_msgs::msg::dds_::Imu_"):
    header: t.Header = field(default_factory=t.Header)
    orientation: t.Quaternion = field(default_factory=t.Quaternion)
    orientation_covariance: array[float64, 9] = field(default_factory=lambda: [0.0] * 9)
    angular_velocity: t.Vector3 = field(default_factory=t.Vector3)
    angular_velocity_covariance: array[float64, 9] = field(default_factory=lambda: [0.0] * 9)
    linear_acceleration: t.Vector3 = field(default_factory=t.Vector3)
    linear_acceleration_covariance: array[float64, 9] = field(default_factory=lambda: [0.0] * 9)


def test_fixed_arrays_and_bounded_strings_hash_as_ros2_does():
    # rcl's test_type_hash.cpp golden value for sensor_msgs/msg/Imu
    assert type_hash(Imu) == "RIHS01_7d9a00ff131080897a5ec7e26e315954b8eae3353c3f995c55faf71574000b5b"
    store = get_typestore(Stores.ROS2_JAZZY)
    for cls in (Gid, NodeEntitiesInfo, ParticipantEntitiesInfo):
        ros = type_description(cls)["type_description"]["type_name"]
        assert type_hash(cls) == store.hash_rihs01(ros), ros
