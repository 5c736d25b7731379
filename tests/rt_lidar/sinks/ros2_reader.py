"""A ROS 2 subscriber in its own process, as a ROS node would be: plain Cyclone DDS, no rt_lidar imports.

``python ros2_reader.py DOMAIN TOPIC COUNT TIMEOUT_S OUT_DIR`` subscribes ``rt/TOPIC`` (PointCloud2, best
effort), ``rt/tf_static`` (reliable, transient local) and ``rt/clock``, prints ``ready`` once its readers
exist, then one JSON line when COUNT clouds and a transform came or TIMEOUT_S passed: per cloud the
stamp, width, fields and the wall time it arrived; the ``/tf_static`` transforms and the ``/clock`` times
it saw. Each cloud's serialized sample, exactly as it arrived (encapsulation header included), goes to
``OUT_DIR/cloud_N.cdr``. Its types are its own IDL, not the sink's.
"""

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cyclonedds._clayer import ddspy_take
from cyclonedds.core import InstanceState, SampleState, ViewState
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import float64, int32, sequence, uint8, uint32
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic


@dataclass
class Time(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32 = 0
    nanosec: uint32 = 0


@dataclass
class Header(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time = field(default_factory=Time)
    frame_id: str = ""


@dataclass
class PointField(IdlStruct, typename="sensor_msgs::msg::dds_::PointField_"):
    name: str = ""
    offset: uint32 = 0
    datatype: uint8 = 0
    count: uint32 = 1


@dataclass
class PointCloud2(IdlStruct, typename="sensor_msgs::msg::dds_::PointCloud2_"):
    header: Header = field(default_factory=Header)
    height: uint32 = 1
    width: uint32 = 0
    fields: sequence[PointField] = field(default_factory=list)
    is_bigendian: bool = False
    point_step: uint32 = 0
    row_step: uint32 = 0
    data: sequence[uint8] = b""
    is_dense: bool = True


@dataclass
class Vector3(IdlStruct, typename="geometry_msgs::msg::dds_::Vector3_"):
    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0


@dataclass
class Quaternion(IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0
    w: float64 = 1.0


@dataclass
class Transform(IdlStruct, typename="geometry_msgs::msg::dds_::Transform_"):
    translation: Vector3 = field(default_factory=Vector3)
    rotation: Quaternion = field(default_factory=Quaternion)


@dataclass
class TransformStamped(IdlStruct, typename="geometry_msgs::msg::dds_::TransformStamped_"):
    header: Header = field(default_factory=Header)
    child_frame_id: str = ""
    transform: Transform = field(default_factory=Transform)


@dataclass
class TFMessage(IdlStruct, typename="tf2_msgs::msg::dds_::TFMessage_"):
    transforms: sequence[TransformStamped] = field(default_factory=list)


@dataclass
class Clock(IdlStruct, typename="rosgraph_msgs::msg::dds_::Clock_"):
    clock: Time = field(default_factory=Time)


_ANY = SampleState.Any | ViewState.Any | InstanceState.Any


def _transforms(reader: DataReader) -> list[dict]:
    out = []
    for m in reader.take(16):
        if not isinstance(m, TFMessage):  # the writer went away (an InvalidSample)
            continue
        for t in m.transforms:
            tr, q = t.transform.translation, t.transform.rotation
            out.append(
                {
                    "parent": t.header.frame_id,
                    "child": t.child_frame_id,
                    "xyz": [tr.x, tr.y, tr.z],
                    "xyzw": [q.x, q.y, q.z, q.w],
                }
            )
    return out


def main() -> None:
    domain, topic, count, timeout_s = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    out_dir = Path(sys.argv[5])
    dp = DomainParticipant(domain)
    # what rclcpp's SensorDataQoS, StaticBroadcasterQoS and ClockQoS ask for
    sensor = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(50))
    static = Qos(
        Policy.Reliability.Reliable(0), Policy.Durability.TransientLocal, Policy.History.KeepLast(10)
    )
    clocks = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(100))
    cloud_r = DataReader(dp, Topic(dp, "rt/" + topic.lstrip("/"), PointCloud2), qos=sensor)
    tf_r = DataReader(dp, Topic(dp, "rt/tf_static", TFMessage), qos=static)
    clock_r = DataReader(dp, Topic(dp, "rt/clock", Clock), qos=clocks)
    print("ready", flush=True)
    clouds: list[dict] = []
    tfs: list[dict] = []
    clock_ns: list[int] = []
    deadline = time.monotonic() + timeout_s
    while (len(clouds) < count or not tfs) and time.monotonic() < deadline:
        got = ddspy_take(cloud_r._ref, _ANY, 16)  # the raw samples, as they came off the wire
        for raw, info in got:
            if not info.valid_data:
                continue
            msg = PointCloud2.deserialize(raw)
            (out_dir / f"cloud_{len(clouds)}.cdr").write_bytes(raw)
            clouds.append(
                {
                    "stamp_ns": msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec,
                    "frame_id": msg.header.frame_id,
                    "width": msg.width,
                    "point_step": msg.point_step,
                    "fields": [[f.name, f.offset, f.datatype] for f in msg.fields],
                    "sha256": hashlib.sha256(raw).hexdigest(),
                    "received_ns": time.time_ns(),
                }
            )
        tfs += _transforms(tf_r)
        clock_ns += [c.clock.sec * 10**9 + c.clock.nanosec for c in clock_r.take(64) if isinstance(c, Clock)]
        if not got:
            time.sleep(0.005)
    tfs += _transforms(tf_r)
    print(json.dumps({"clouds": clouds, "tf_static": tfs, "clock_ns": clock_ns}), flush=True)


if __name__ == "__main__":
    main()
