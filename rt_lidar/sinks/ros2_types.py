"""The ROS 2 message types the ``ros2`` sink publishes, as Cyclone DDS IDL structs.

ROS 2 maps ``pkg/msg/Name`` to the DDS type ``pkg::msg::dds_::Name_`` (rosidl_typesupport's naming, which
every RMW uses); the members are the ``.msg`` fields in order, serialised as XCDR1 (plain CDR), so a
sample's bytes are what rosbag2 stores for the same message. (No ``from __future__ import annotations``
here: Cyclone DDS resolves the member types from the annotations themselves.)
"""

import dataclasses
import struct
from dataclasses import dataclass, field
from typing import Any, cast

from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import float64, int32, sequence, uint8, uint32

_CDR_LE = b"\x00\x01\x00\x00"
"""The encapsulation header of plain CDR, little endian (what ROS 2 nodes send)."""

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

    def serialize(
        self, buffer: Any = None, endianness: Any = None, use_version_2: bool | None = None
    ) -> bytes:
        """XCDR1 little endian, with ``data`` spliced in: Cyclone's generic path packs a uint8 sequence
        item by item (0.8 s for a 4 MB cloud). In CDR ``data`` is a uint32 length and the bytes, then
        ``is_dense`` one byte, so the message serialized without its data, cut before that length,
        takes them as they are (pinned byte for byte against rosbags by the tests)."""
        if buffer is not None or endianness is not None or use_version_2:
            return super().serialize(buffer=buffer, endianness=endianness, use_version_2=use_version_2)
        head = super(PointCloud2, dataclasses.replace(self, data=b"")).serialize(use_version_2=use_version_2)
        if head[:4] != _CDR_LE:  # not the little-endian XCDR1 this splice is written for
            return super().serialize(use_version_2=use_version_2)
        data = memoryview(cast(bytes, self.data)).cast("B")  # bytes, or any buffer (a NumPy array)
        return b"".join((head[:-5], struct.pack("<I", data.nbytes), data, head[-1:]))


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
