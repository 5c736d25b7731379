"""The ROS 2 message types the ``ros2`` sink publishes, as Cyclone DDS IDL structs.

ROS 2 maps ``pkg/msg/Name`` to the DDS type ``pkg::msg::dds_::Name_`` (rosidl_typesupport's naming, which
every RMW uses); the members are the ``.msg`` fields in order, serialised as XCDR1 (plain CDR), so a
sample's bytes are what rosbag2 stores for the same message. (No ``from __future__ import annotations``
here: Cyclone DDS resolves the member types from the annotations themselves.)
"""

from dataclasses import dataclass, field

from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import float64, int32, sequence, uint8, uint32

__all__ = [
    "Clock",
    "Header",
    "PointCloud2",
    "PointField",
    "Quaternion",
    "TFMessage",
    "Time",
    "Transform",
    "TransformStamped",
    "Vector3",
]


@dataclass
class Time(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32 = 0
    nanosec: uint32 = 0

    @classmethod
    def from_ns(cls, ns: int) -> "Time":
        """``ns`` since the epoch (sim or Unix) -> ``Time``."""
        return cls(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


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
    data: sequence[uint8] = b""  # a uint8 sequence goes as bytes
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
