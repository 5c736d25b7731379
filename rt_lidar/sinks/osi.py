"""ASAM OSI trace sinks (docs/osi.md), one message per sim frame into an OSI trace file (``.osi``, OSI's
single-channel format, or ``.mcap``, its multi-channel one, topic ``rt-lidar.OSMPSensorViewIn`` /
``rt-lidar.OSMPSensorDataOut``):

- ``osi-sensorview:FILE.osi``: ``osi3.SensorView``: the ground truth (the ego, moving and static objects,
  their poses, sizes and velocities, the environmental conditions) and the ``LidarSensorView``
  reflections of our firing schedule (so other OSI lidar models can run on our world);
- ``osi-sensordata:FILE.osi``: ``osi3.SensorData`` with our returns as ``feature_data.lidar_sensor``.

Options: ``sensor_id=N`` (the sensor's OSI id, default 0); ``static=0`` leaves the static objects out
of every frame's ground truth (sensorview only).
"""

from __future__ import annotations

import warnings
from typing import Any

from rt_lidar.osi.frames import require_osi
from rt_lidar.osi.trace import McapTraceWriter, OsiTraceWriter, open_trace_writer
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sinks.base import SinkContext, SinkOptions

__all__ = ["OsiTraceSink", "osi_sensordata_sink", "osi_sensorview_sink"]


class OsiTraceSink:
    """Writes each sim frame as a ``SensorView`` or ``SensorData`` to an ``.osi`` trace."""

    wants_sensed = True

    def __init__(self, kind: str, target: str, options: dict[str, str]) -> None:
        require_osi()
        allowed = ("sensor_id", "static") if kind == "osi-sensorview" else ("sensor_id",)
        opts = SinkOptions(kind, options, allowed)
        self.kind = kind
        self.sensor_id = opts.integer("sensor_id", 0, 0, 2**63 - 1)
        self.static = opts.flag("static", True)
        self.path = target
        self.writer: OsiTraceWriter | McapTraceWriter | None = None
        self.context: SinkContext | None = None
        self.encoder: Any = None
        self.frames = 0

    def open(self, context: SinkContext) -> None:
        """Create the trace file."""
        from osi3.osi_sensordata_pb2 import SensorData
        from osi3.osi_sensorview_pb2 import SensorView

        self.context = context
        view = self.kind == "osi-sensorview"
        self.writer = open_trace_writer(
            self.path,
            SensorView if view else SensorData,
            "rt-lidar.OSMPSensorViewIn" if view else "rt-lidar.OSMPSensorDataOut",
            f"rt-lidar {context.preset.name}: "
            + ("ground truth and lidar reflections" if view else "lidar detections"),
        )

    def attach(self, pipeline: Any) -> None:
        """Take the pipeline the frames come from (its world, mount and echo model)."""
        from rt_lidar.osi.encode import FrameEncoder

        mount = self.context.mount if self.context is not None else (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
        self.encoder = FrameEncoder(pipeline, mount, self.sensor_id, static=self.static)

    def write_sensed(self, sensed: Any) -> None:
        """One sim frame's message."""
        assert self.writer is not None and self.encoder is not None
        view = self.encoder.sensor_view(sensed)
        msg = view if self.kind == "osi-sensorview" else self.encoder.sensor_data(sensed, view)
        self.writer.write(msg)
        self.frames += 1

    def write(self, scan: Scan) -> None:
        """Scans are not written: the trace holds sim frames (:meth:`write_sensed`)."""

    def close(self) -> None:
        """Close the trace (complete after this); a run that never handed this sink its frames (a
        loop that does not, such as a rig's) says so."""
        if self.writer is not None:
            self.writer.close()
        if self.encoder is None and self.writer is not None:
            warnings.warn(
                f"sink {self.kind}:{self.path}: this run hands no sim frames to OSI sinks (rigs do not): "
                "the trace is empty",
                stacklevel=2,
            )


def osi_sensorview_sink(target: str, options: dict[str, str]) -> OsiTraceSink:
    """``osi-sensorview:FILE.osi|FILE.mcap``: ground truth and reflections, one ``SensorView`` a frame."""
    return OsiTraceSink("osi-sensorview", target, options)


def osi_sensordata_sink(target: str, options: dict[str, str]) -> OsiTraceSink:
    """``osi-sensordata:FILE.osi|FILE.mcap``: our returns, one ``SensorData`` a sim frame."""
    return OsiTraceSink("osi-sensordata", target, options)
