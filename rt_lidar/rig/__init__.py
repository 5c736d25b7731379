"""Sensor rigs: several lidars on one vehicle in one frame loop, with mutual interference.

``model`` reads and validates the rig file, ``loop`` advances every sensor each sim frame from the
same world state, ``crosstalk`` gives each sensor the false points of the others' pulses, ``run``
writes every sensor's outputs (``OUT/<sensor>/scans``, one rosbag2 with a topic per sensor and the
mounts in ``/tf_static``), ``stream`` publishes every sensor, ``airsim`` writes every lidar block of a
settings.json, ``bridge`` runs a rig over the AirSim bridge (``serve --rig`` / ``run --rig``).
"""

from rt_lidar.rig.errors import RigError
from rt_lidar.rig.model import Mount, Rig, RigSensor, SensorEntry, load_rig, rig_from_dict

__all__ = ["Mount", "Rig", "RigError", "RigSensor", "SensorEntry", "load_rig", "rig_from_dict"]
