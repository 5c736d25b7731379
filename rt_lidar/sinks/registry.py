"""The sink registry: every ``--sink`` kind and where its factory lives, imported on first use.

A new sink is a module in ``rt_lidar/sinks/`` with a factory ``(target, options) -> sink`` (parse its
options with :class:`~rt_lidar.sinks.base.SinkOptions`) and one line here.
"""

from __future__ import annotations

__all__ = ["SINK_FACTORIES"]

SINK_FACTORIES: dict[str, str] = {
    "pcd": "rt_lidar.sinks.files:PcdFolderSink",
    "kitti": "rt_lidar.sinks.files:KittiFolderSink",
    "las": "rt_lidar.sinks.las:LasFolderSink",
    "rosbag2": "rt_lidar.sinks.rosbag:rosbag_sink",
    "zmq": "rt_lidar.sinks.stream:_make_zmq_sink",
    "velodyne-pcap": "rt_lidar.sinks.velodyne:velodyne_pcap_sink",
    "velodyne-udp": "rt_lidar.sinks.velodyne:velodyne_udp_sink",
    "ouster-pcap": "rt_lidar.sinks.ouster:ouster_pcap_sink",
    "ouster-udp": "rt_lidar.sinks.ouster:ouster_udp_sink",
    "ouster-sensor": "rt_lidar.sinks.ouster_sensor:ouster_sensor_sink",
    "ros2": "rt_lidar.sinks.ros2:ros2_sink",
    "osi-sensorview": "rt_lidar.sinks.osi:osi_sensorview_sink",
    "osi-sensordata": "rt_lidar.sinks.osi:osi_sensordata_sink",
    "hesai-pcap": "rt_lidar.sinks.hesai:hesai_pcap_sink",
    "hesai-udp": "rt_lidar.sinks.hesai:hesai_udp_sink",
    "robosense-pcap": "rt_lidar.sinks.robosense:robosense_pcap_sink",
    "robosense-udp": "rt_lidar.sinks.robosense:robosense_udp_sink",
}
"""``kind -> "module:factory"``."""
