"""A real scan from a ROS bag: a ROS 1 ``.bag``, or a ROS 2 bag (its folder with ``metadata.yaml``, or its
``.mcap`` / ``.db3`` file alone), of ``sensor_msgs/PointCloud2`` as the sensors' ROS drivers publish them
(velodyne_pointcloud, ouster-ros, nebula, hesai_ros_driver): one cloud a scan, read with rosbags; or,
where the bag holds no clouds, the velodyne driver's raw packets (``velodyne_msgs/VelodyneScan``) or
ouster-ros's (``PacketMsg``, with the sensor's metadata topic or a ``.json`` beside the bag).

Which cloud is said in the grid's note: of the bag's first cloud topic (the others named), the fullest of
its first :data:`FIRST_CLOUDS` clouds (a recording started mid-sweep can begin with a partial one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import RecordingError
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sinks.recording import cloud_table
from rt_lidar.validation.real_formats import scan_from_table
from rt_lidar.validation.realism_grid import ScanGrid

__all__ = [
    "CLOUD_TYPES",
    "FIRST_CLOUDS",
    "OUSTER_PACKETS",
    "OUSTER_PACKET_TYPES",
    "PACKET_DEFINITIONS",
    "PACKET_TYPES",
    "SCAN_MESSAGES",
    "read_bag_scan",
]

CLOUD_TYPES = ("sensor_msgs/msg/PointCloud2",)
"""The message types read (rosbags names ROS 1's ``sensor_msgs/PointCloud2`` the same)."""
FIRST_CLOUDS = 5
"""Clouds of the topic looked at; the one with the most points is read."""
PACKET_TYPES = ("velodyne_msgs/msg/VelodyneScan",)
"""Raw Velodyne packets as the velodyne driver records them (a message a rotation, its 1206-byte
packets), read as a pcap's packets are."""
SCAN_MESSAGES = 3
"""VelodyneScan messages read (a rotation each): the most complete rotation among them is measured."""


OUSTER_PACKET_TYPES = ("ouster_sensor_msgs/msg/PacketMsg", "ouster_ros/msg/PacketMsg")
"""Raw Ouster packets as ouster-ros records them (``buf``: one lidar or IMU packet a message)."""
OUSTER_PACKETS = 512
"""Lidar packets read from an Ouster bag: at least two frames of a 2048-column sensor."""


def _decoded(path: Path, reader: Any, conns: list[Any], limit: int, what: str) -> list[tuple[int, Any]]:
    """(index, message) of the first ``limit`` messages of ``conns``, deserialised; one its own type
    cannot decode (a damaged bag) is a :class:`RecordingError` naming it as ``what`` and its topic."""
    out: list[tuple[int, Any]] = []
    for k, (conn, _stamp, raw) in enumerate(reader.messages(connections=conns)):
        if k >= limit:
            break
        try:
            out.append((k, reader.deserialize(raw, conn.msgtype)))
        except Exception as exc:  # rosbags raises its own error types for each kind of bad message
            raise RecordingError(f"{path}: {what} {k} of {conn.topic} cannot be decoded ({exc})") from None
    return out


def _ouster_packets(path: Path, reader: Any, conns: list[Any]) -> ScanGrid:
    """The most complete frame among the first :data:`OUSTER_PACKETS` lidar packets (the topics named
    ``lidar`` where there are such, else every packet topic; IMU packets are told apart by size), with the
    sensor's metadata from the bag's ``.../metadata`` String topic, else a ``.json`` beside the bag."""
    from rt_lidar.validation.real_ouster import ouster_layout, ouster_scan

    lidar = [c for c in conns if "lidar" in c.topic] or conns
    meta_conns = [
        c for c in reader.connections if c.msgtype == "std_msgs/msg/String" and c.topic.endswith("metadata")
    ]
    if meta_conns:
        _conn, _stamp, raw = next(iter(reader.messages(connections=meta_conns[:1])))
        text = reader.deserialize(raw, meta_conns[0].msgtype).data
        lay = ouster_layout(f"{path} ({meta_conns[0].topic})", text)
    else:
        from rt_lidar.validation.real_formats import ouster_metadata_beside

        lay = ouster_layout(ouster_metadata_beside(path, "Ouster packets without a .../metadata topic"))
    packets = _decoded(path, reader, lidar, OUSTER_PACKETS, "packet")
    payloads = [bytes(msg.buf) for _k, msg in packets]
    grid = ouster_scan(path, payloads, lay)
    grid.note += f"; packets of {', '.join(sorted({c.topic for c in lidar}))}"
    return grid


def _velodyne_packets(path: Path, reader: Any, conns: list[Any], preset: SensorPreset) -> ScanGrid:
    """The first packet topic's first :data:`SCAN_MESSAGES` rotations, read by
    :func:`~rt_lidar.validation.real_velodyne.velodyne_scan`."""
    from rt_lidar.validation.real_velodyne import PRESET_OF_PRODUCT, velodyne_scan

    topic = sorted({c.topic for c in conns})[0]
    chosen = [c for c in conns if c.topic == topic]
    msgs = _decoded(path, reader, chosen, SCAN_MESSAGES, "scan")
    scans = len(msgs)
    payloads = [bytes(pkt.data) for _k, msg in msgs for pkt in msg.packets if len(pkt.data) == 1206]
    if not payloads:
        raise RecordingError(f"{path}: the topic {topic} holds no 1206-byte Velodyne packets")
    hdl64 = preset.name.upper().startswith("HDL-64")
    model = preset if hdl64 or payloads[0][-1] not in PRESET_OF_PRODUCT else None
    return velodyne_scan(path, payloads, model, f"; packets of {topic} (its first {scans} scans)")


PACKET_DEFINITIONS = {
    "velodyne_msgs/msg/VelodynePacket": "builtin_interfaces/Time stamp\nuint8[1206] data\n",
    "velodyne_msgs/msg/VelodyneScan": "std_msgs/Header header\nvelodyne_msgs/VelodynePacket[] packets\n",
    "ouster_ros/msg/PacketMsg": "uint8[] buf\n",
    "ouster_sensor_msgs/msg/PacketMsg": "uint8[] buf\n",
}
"""The packet messages' ROS 2 definitions (ros-drivers/velodyne ``velodyne_msgs/msg``, ouster-ros
``PacketMsg``), for ROS 2 bags that store no type definitions (sqlite3 bags before ROS 2 Iron, e.g.
tier4/nebula's test recordings): bags that store them are read with their own."""


def _packet_typestore() -> Any:
    """ROS 2 Humble's message types with :data:`PACKET_DEFINITIONS` added."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    for name, text in PACKET_DEFINITIONS.items():
        store.register(get_types_from_msg(text, name))
    return store


def read_bag_scan(path: str | Path, preset: SensorPreset) -> ScanGrid:
    """One cloud of the bag at ``path`` on its firing grid (fields as :func:`scan_from_table` reads
    them). A bag rosbags cannot open, one without a cloud topic, or whose clouds cannot be decoded is a
    :class:`~rt_lidar.errors.RecordingError` naming it."""
    from rosbags.highlevel import AnyReader

    path = Path(path)
    try:
        reader = AnyReader([path], default_typestore=_packet_typestore())
        reader.open()
    except Exception as exc:  # rosbags raises its own error types for every kind of bad bag
        raise RecordingError(f"{path}: not a readable ROS bag ({exc})") from None
    try:
        conns = [c for c in reader.connections if c.msgtype in CLOUD_TYPES]
        if not conns:
            packets = [c for c in reader.connections if c.msgtype in PACKET_TYPES]
            if packets:
                return _velodyne_packets(path, reader, packets, preset)
            ouster = [c for c in reader.connections if c.msgtype in OUSTER_PACKET_TYPES]
            if ouster:
                return _ouster_packets(path, reader, ouster)
            types = sorted({f"{c.topic} ({c.msgtype})" for c in reader.connections}) or ["none"]
            raise RecordingError(
                f"{path}: no sensor_msgs/PointCloud2 topic (nor Velodyne or Ouster packets) in the bag "
                f"(topics: {', '.join(types)})"
            )
        topics = sorted({c.topic for c in conns})
        topic = topics[0]
        chosen = [c for c in conns if c.topic == topic]
        total = sum(int(c.msgcount) for c in chosen)
        clouds = _decoded(path, reader, chosen, FIRST_CLOUDS, "cloud")
        if not clouds:
            raise RecordingError(f"{path}: the topic {topic} holds no clouds")
        sizes = [int(m.width) * int(m.height) for _k, m in clouds]
        k, msg = clouds[int(np.argmax(sizes))]
        try:
            table = cloud_table(msg)
        except Exception as exc:  # a cloud whose fields or data do not add up
            raise RecordingError(f"{path}: cloud {k} of {topic}: {exc}") from None
    finally:
        reader.close()
    grid = scan_from_table(path, path.name, np.asarray(table), preset, "PointCloud2")
    others = f"; other cloud topics left out: {', '.join(topics[1:])}" if len(topics) > 1 else ""
    which = (
        f"topic {topic}, cloud {k} of {total} (the fullest of the first {len(clouds)}: {max(sizes):,} points)"
        f"{others}"
    )
    grid.note = f"{which}; {grid.note}" if grid.note else which
    return grid
