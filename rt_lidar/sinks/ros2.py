"""``--sink ros2:TOPIC[,domain=N][,frame=ID][,base=ID][,fields=all|driver]``: live ROS 2 topics with no
ROS install, over DDS (Eclipse Cyclone DDS's ``cyclonedds`` package; ROS 2 nodes on any RMW talk to it
over RTPS).

Published, with ROS 2's conventions (DDS topic ``rt/`` + name, type ``pkg::msg::dds_::Name_``, XCDR1):

- ``TOPIC`` (default ``/points``): ``sensor_msgs/PointCloud2`` in ``frame`` (default ``lidar``), the
  layout of the preset's ROS driver (the Velodyne driver's, ouster-ros's for Ouster presets) then our
  fields (``fields=driver``: the driver's alone; :func:`~rt_lidar.sinks.rosbag.cloud_layout`), with
  the sensor-data QoS (best effort, keep last 5);
- ``/tf_static``: the mount, ``base`` (default ``base_link``) -> ``frame``, reliable and transient-local
  as ``tf2_ros::StaticTransformBroadcaster`` publishes it, so a node that starts later still gets it;
- ``/clock``: ``rosgraph_msgs/Clock``, the sim time at the end of every scan (for ``use_sim_time``).

Each writer's USER_DATA carries its type's ROS 2 hash (``typehash=RIHS01_...;``) and the participant's
``enclave=/;``, as rmw_cyclonedds_cpp sets them (:mod:`rt_lidar.sinks.ros2_hash`), so ``ros2 topic info
-v`` shows the type hash and Iron/Jazzy nodes see matching types.

Cloud stamps follow the run's ``--stamp`` clock (:meth:`~rt_lidar.sinks.base.SinkContext.stamp_offset_ns`):
sim time since 0, as ``/clock`` counts it, or the wall clock. The domain is ``domain=`` or else
``ROS_DOMAIN_ID`` (0 when unset); which network interfaces DDS uses is Cyclone DDS's configuration
(``CYCLONEDDS_URI``), as for any ROS 2 node on rmw_cyclonedds_cpp.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext, SinkOptions, register_sink
from rt_lidar.sinks.rosbag import cloud_bytes, cloud_fields, cloud_layout

__all__ = ["Ros2Sink", "cloud_message", "dds_topic", "mount_message"]

_TOPIC = re.compile(r"/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")
"""A ROS 2 topic name (absolute or relative; no ``~``, substitutions or doubled slashes)."""
_OPTIONS = frozenset({"domain", "frame", "base", "fields"})


def dds_topic(name: str) -> str:
    """A ROS 2 topic name -> its DDS topic (``/points`` -> ``rt/points``)."""
    return "rt/" + name.lstrip("/")


def cloud_message(scan: Scan, layout: np.dtype, frame: str, stamp_ns: int) -> Any:
    """The ``sensor_msgs/PointCloud2`` of ``scan`` (one row, little endian, dense)."""
    from rt_lidar.sinks.ros2_types import Header, PointCloud2, PointField, Time

    n = int(scan.points.size)
    return PointCloud2(
        header=Header(stamp=Time.from_ns(stamp_ns), frame_id=frame),
        height=1,
        width=n,
        fields=[PointField(name=nm, offset=o, datatype=d, count=1) for nm, o, d in cloud_fields(layout)],
        is_bigendian=False,
        point_step=layout.itemsize,
        row_step=layout.itemsize * n,
        data=cloud_bytes(scan.points, layout, scan.extras.get("ambient_w")).tobytes(),
        is_dense=True,
    )


def mount_message(mount: tuple[float, ...], base: str, frame: str, stamp_ns: int) -> Any:
    """``tf2_msgs/TFMessage`` of the mount ``(x, y, z, qw, qx, qy, qz)``: ``base`` -> ``frame``."""
    from rt_lidar.sinks.ros2_types import (
        Header,
        Quaternion,
        TFMessage,
        Time,
        Transform,
        TransformStamped,
        Vector3,
    )

    x, y, z, qw, qx, qy, qz = (float(v) for v in mount)
    tf = TransformStamped(
        header=Header(stamp=Time.from_ns(stamp_ns), frame_id=base),
        child_frame_id=frame,
        transform=Transform(translation=Vector3(x, y, z), rotation=Quaternion(qx, qy, qz, qw)),
    )
    return TFMessage(transforms=[tf])


class Ros2Sink:
    """Publishes every scan as a PointCloud2, the mount on ``/tf_static`` and the sim time on ``/clock``."""

    def __init__(self, target: str, options: dict[str, str]) -> None:
        # the domain defaults to ROS_DOMAIN_ID, checked as if it had been given
        opts = SinkOptions("ros2", {"domain": os.environ.get("ROS_DOMAIN_ID", "0"), **options}, _OPTIONS)
        self.topic = target or "/points"
        if not _TOPIC.fullmatch(self.topic):
            raise ConfigError(f"ros2 sink: '{target}' is not a ROS 2 topic name (e.g. /points, /lidar/top)")
        self.domain = opts.integer("domain", 0, 0, 232)  # DDS domain ids
        if importlib.util.find_spec("cyclonedds") is None:
            raise ConfigError("ros2 sink: needs Cyclone DDS: pip install 'rt-lidar[ros2]'")
        self.frame = opts.text("frame", "lidar")
        self.base = opts.text("base", "base_link")
        self.fields = opts.text("fields", "all")
        self.published = 0
        self._writers: dict[str, Any] = {}
        self._participant: Any = None
        self._context: SinkContext | None = None

    def open(self, context: SinkContext) -> None:
        """Join the DDS domain, create the three writers and publish the mount on ``/tf_static``."""
        from cyclonedds.domain import DomainParticipant
        from cyclonedds.pub import DataWriter
        from cyclonedds.qos import Policy, Qos
        from cyclonedds.topic import Topic

        from rt_lidar.sinks.ros2_hash import endpoint_user_data, participant_user_data
        from rt_lidar.sinks.ros2_types import Clock, PointCloud2, TFMessage

        self.layout = cloud_layout(context.preset, self.fields)
        self._context = context
        self._period_ns = scan_period_ns(context.preset)
        xcdr1 = Policy.DataRepresentation(use_cdrv0_representation=True)
        sensor_data = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(5), xcdr1)
        static = Qos(
            Policy.Reliability.Reliable(max_blocking_time=100_000_000),
            Policy.Durability.TransientLocal,
            Policy.History.KeepLast(1),
            xcdr1,
        )
        clock = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(1), xcdr1)
        dp = DomainParticipant(self.domain, qos=Qos(Policy.Userdata(participant_user_data())))
        self._participant = dp
        for key, name, kind, qos in (
            ("cloud", self.topic, PointCloud2, sensor_data),
            ("tf_static", "/tf_static", TFMessage, static),
            ("clock", "/clock", Clock, clock),
        ):
            topic = Topic(dp, dds_topic(name), kind, qos=qos)
            # rmw_cyclonedds_cpp announces the REP-2011 type hash in each endpoint's USER_DATA
            wqos = Qos(*qos, Policy.Userdata(endpoint_user_data(kind)))
            self._writers[key] = DataWriter(dp, topic, qos=wqos)
        stamp0 = 0 if context.stamp == "sim" else time.time_ns()
        self._writers["tf_static"].write(mount_message(context.mount, self.base, self.frame, stamp0))

    def write(self, scan: Scan) -> None:
        """Publish the scan's cloud, then the sim time at its end on ``/clock`` (best effort: no waiting)."""
        from rt_lidar.sinks.ros2_types import Clock, Time

        context = self._context
        assert context is not None, "open() first"
        stamp = int(scan.start_ns) + context.stamp_offset_ns(scan)
        self._writers["cloud"].write(cloud_message(scan, self.layout, self.frame, stamp))
        self._writers["clock"].write(Clock(clock=Time.from_ns(int(scan.start_ns) + self._period_ns)))
        self.published += 1

    def close(self) -> None:
        """Leave the domain (readers see the writers go; ``/tf_static`` goes with them). With a reader
        matched, first wait :data:`LINGER_S`: a reader that learns the writer has gone while it is still
        putting the last cloud's fragments together drops that cloud (best effort)."""
        cloud = self._writers.get("cloud")
        try:
            if cloud is not None and self.published and cloud.get_matched_subscriptions():
                time.sleep(LINGER_S)
        except Exception:  # a DDS error while asking must not keep the domain joined
            pass
        self._writers.clear()
        self._participant = None


LINGER_S = 0.25
"""How long :meth:`Ros2Sink.close` lets the last cloud reach matched readers before leaving the domain."""


@register_sink("ros2")
def ros2_sink(target: str, options: dict[str, str]) -> Ros2Sink:
    """Factory for ``--sink ros2:TOPIC``."""
    return Ros2Sink(target, options)
