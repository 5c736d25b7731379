"""Where scans go: files (PCD, KITTI .bin, LAS, rosbag2, range-image PNG), the ZeroMQ stream to the
viewer, the sensors' native packets (UDP, pcap), reading recordings back and replaying them.

Every ``--sink`` kind is listed in :mod:`rt_lidar.sinks.registry`; this package exports the plain file
readers and writers."""

from rt_lidar.sinks.atomic import atomic_write
from rt_lidar.sinks.kitti import read_kitti_bin, to_kitti_array, write_kitti_bin
from rt_lidar.sinks.pcd import pcd_header, read_pcd, write_pcd
from rt_lidar.sinks.range_image import colormap, range_image, write_range_image_png

__all__ = [
    "atomic_write",
    "colormap",
    "pcd_header",
    "range_image",
    "read_kitti_bin",
    "read_pcd",
    "to_kitti_array",
    "write_kitti_bin",
    "write_pcd",
    "write_range_image_png",
]
