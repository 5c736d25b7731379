"""One sim frame of the pipeline (:class:`~rt_lidar.pipeline.frame_loop.Sensed`) as OSI messages: the
``SensorView`` an environment simulator would send (ground truth and the ``LidarSensorView`` of our
firing schedule) and the ``SensorData`` our model returns for it (what the ``osi-sensorview`` and
``osi-sensordata`` sinks write)."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, cast

import numpy as np

from rt_lidar.osi.detections import fill_detections
from rt_lidar.osi.frames import NO_ID, interface_version, set_mounting, set_timestamp
from rt_lidar.osi.ground_truth import (
    EGO_DIMENSION_M,
    HOST_VEHICLE_ID,
    fill_ground_truth,
    moving_segment_velocities,
)
from rt_lidar.osi.model import StepResult
from rt_lidar.osi.reflections import fill_lidar_view, read_view, sensor_velocity
from rt_lidar.pipeline.frame_loop import Pipeline, Sensed
from rt_lidar.pipeline.sources import WorldTruthSource
from rt_lidar.unreal_bridge.world.pose import quat_conjugate, quat_multiply, quat_rotate

__all__ = ["FrameEncoder"]


class FrameEncoder:
    """Turns a pipeline's sensed frames into ``SensorView`` / ``SensorData`` messages.

    ``mount`` is the sensor on the vehicle (x, y, z, qw, qx, qy, qz); with a world source the world's
    own mount is used. ``static`` puts the static objects into every frame's ground truth.
    """

    def __init__(
        self, pipeline: Pipeline, mount: tuple[float, ...], sensor_id: int = 0, static: bool = True
    ) -> None:
        self.pipeline = pipeline
        self.sensor_id = int(sensor_id)
        self.static = static
        self.world = None
        if pipeline.source.capabilities.world_truth:
            source = cast(WorldTruthSource, pipeline.source)
            self.world = source.world
            source.keep_normals = True
            length, width, height = EGO_DIMENSION_M
            warnings.warn(
                "OSI ground truth: the ego has no mesh in the world; its box is a nominal "
                f"{length} x {width} x {height} m car standing on the vehicle origin (docs/osi.md)",
                stacklevel=3,
            )
            m = source.mount if source.mount is not None else source.world.scene.sensor_mount
            mount = (*(float(v) for v in m.position), *(float(v) for v in m.rotation))
        else:
            warnings.warn(
                "OSI over the bridge: the ground truth holds the ego only (the server's objects are not "
                "known here) and reflections have no surface normals (taken as facing the ray)",
                stacklevel=3,
            )
        self.mount = tuple(mount)
        self._mount_p = np.asarray(self.mount[:3], np.float64)
        self._mount_q = np.asarray(self.mount[3:7], np.float64)

    def sensor_view(self, sensed: Sensed) -> Any:
        """The ``SensorView`` of one sim frame."""
        from osi3.osi_sensorview_pb2 import SensorView

        hits = sensed.hits
        t0 = sensed.t0_ns
        sv = SensorView()
        interface_version(sv)
        set_timestamp(sv.timestamp, t0)
        sv.sensor_id.value = self.sensor_id
        set_mounting(sv.mounting_position, self.mount)
        sv.host_vehicle_id.value = HOST_VEHICLE_ID
        physics = self.pipeline.physics
        weather = hits.weather
        if weather is None and physics.config.weather is not None:
            weather = {k: v for k, v in dataclasses.asdict(physics.config.weather).items() if v is not None}
        if hits.pose_start is not None:
            s_pos, s_quat = (np.asarray(v, np.float64) for v in hits.pose_start)
        else:
            s_pos, s_quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        # the vehicle's pose from the sensor's: vehicle * mount = sensor
        v_quat = quat_multiply(s_quat, quat_conjugate(self._mount_q))
        v_pos = s_pos - quat_rotate(v_quat, self._mount_p)
        fill_ground_truth(
            sv.global_ground_truth,
            self.world,
            t0,
            (v_pos, v_quat),
            sensor_velocity(hits, t0, sensed.t1_ns),
            weather,
            physics.config.sun_illuminance_lux,
            static=self.static,
        )
        seg_v = moving_segment_velocities(self.world, t0 * 1e-9) if self.world is not None else None
        fill_lidar_view(
            sv.lidar_sensor_view.add(),
            hits,
            physics.echo,
            t0,
            sensed.t1_ns,
            self.mount,
            self.sensor_id,
            seg_v,
        )
        return sv

    def sensor_data(self, sensed: Sensed, sensor_view: Any) -> Any:
        """The ``SensorData`` of one sim frame: the pipeline's own returns, as the OSI model writes them."""
        from osi3.osi_sensordata_pb2 import SensorData

        out = SensorData()
        interface_version(out)
        out.timestamp.CopyFrom(sensor_view.timestamp)
        out.last_measurement_time.CopyFrom(sensor_view.timestamp)
        out.sensor_id.CopyFrom(sensor_view.sensor_id)
        out.mounting_position.CopyFrom(sensor_view.mounting_position)
        interface_version(out.feature_data)
        lidar = out.feature_data.lidar_sensor.add()
        seg = sensed.result.points["segment"]
        top = int(seg.max()) if seg.size else 0
        ids = np.arange(top + 1, dtype=np.uint64)
        ids[0] = np.uint64(NO_ID)
        done = StepResult(
            sensed.frame,
            sensed.t0_ns,
            sensed.hits,
            sensed.result,
            read_view(sensor_view.lidar_sensor_view[0]),
            True,
            ids,
        )
        fill_detections(lidar, done, self.pipeline.physics, sensor_view)
        return out
