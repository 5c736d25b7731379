"""ASAM OSI (Open Simulation Interface): rt-lidar as an OSI lidar sensor model and its world as an OSI
environment (docs/osi.md).

- :mod:`rt_lidar.osi.model`: ``SensorView`` (its ``LidarSensorView`` reflections) -> our physics ->
  ``SensorData`` with ``feature_data.lidar_sensor`` (:class:`~rt_lidar.osi.model.OsiLidarModel`);
- :mod:`rt_lidar.osi.reflections`: our hits <-> ``LidarSensorView`` reflections (:mod:`rt_lidar.osi.wire`:
  their protobuf wire bytes with NumPy); :mod:`rt_lidar.osi.gt_cast`: reflections cast into a view's
  ground truth when it has none; :mod:`rt_lidar.osi.encode`: a pipeline frame as ``SensorView`` /
  ``SensorData`` (the sinks ``osi-sensorview`` / ``osi-sensordata``, :mod:`rt_lidar.sinks.osi`);
- :mod:`rt_lidar.osi.ground_truth`, :mod:`rt_lidar.osi.weather`: the world and its weather as
  ``GroundTruth`` / ``EnvironmentalConditions``;
- :mod:`rt_lidar.osi.trace`: trace files, ``.osi`` (each message after its 4-byte little-endian size) and
  ``.mcap`` (OSI's multi-channel format);
- :mod:`rt_lidar.osi.fmu`: the model as an FMI 2.0 co-simulation FMU following OSMP.

Needs the ``osi`` extra (``osi-python``, module ``osi3``); :func:`rt_lidar.osi.frames.require_osi` says so.
"""
