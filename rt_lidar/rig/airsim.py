"""A settings.json carrying every lidar of a rig (``rt-lidar presets airsim-settings --rig``).

Each block is the preset's (:func:`~rt_lidar.bridge.airsim_settings.airsim_lidar_settings`), keyed by
the sensor's name, placed at its mount converted once from the rig's vehicle frame (x forward, y left,
z up) to AirSim's NED body frame: ``X, Y, Z = x, -y, -z`` and ``Roll, Pitch, Yaw = roll, -pitch, -yaw``.
"""

from __future__ import annotations

from typing import Any

from rt_lidar.bridge.airsim_settings import airsim_lidar_settings
from rt_lidar.rig.model import Rig

__all__ = ["rig_airsim_settings"]


def rig_airsim_settings(rig: Rig, vehicle: str = "PhysXCar") -> dict[str, Any]:
    """A whole minimal settings.json: one PhysX car carrying every lidar of ``rig``."""
    sensors: dict[str, Any] = {}
    for s in rig.sensors:
        x, y, z = (float(v) for v in s.entry.mount.xyz)
        roll, pitch, yaw = (float(v) for v in s.entry.mount.rpy_deg)
        block = airsim_lidar_settings(s.preset, s.name, x, -y if y else 0.0, -z if z else 0.0)
        block.update(Roll=roll, Pitch=-pitch if pitch else 0.0, Yaw=-yaw if yaw else 0.0)
        sensors[s.name] = block
    return {
        "SettingsVersion": 1.2,
        "SimMode": "Car",
        "Vehicles": {vehicle: {"VehicleType": "PhysXCar", "AutoCreate": True, "Sensors": sensors}},
    }
