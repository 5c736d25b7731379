"""Imports every sink module so that its ``@register_sink`` runs; ``make_sink`` imports this."""

from rt_lidar.sinks import (
    files,  # noqa: F401
    las,  # noqa: F401
    ouster,  # noqa: F401
    ros2,  # noqa: F401
    rosbag,  # noqa: F401
    stream,  # noqa: F401
    udp,  # noqa: F401
    velodyne,  # noqa: F401
)

__all__: list[str] = []
