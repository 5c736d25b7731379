"""The embedded world: meshes with materials, moving actors, a ray caster and a camera renderer.

It stands in for Unreal when none is running. Frames: x forward, y left, z up, metres, seconds;
quaternions are (w, x, y, z) float64.
"""

from .camera import CameraImages, CameraSpec
from .errors import WorldError
from .loaders import load_mesh_file
from .pose import Pose
from .raycast import RAY_CASTERS, RayCaster
from .scene import MATERIAL_COLORS, MATERIAL_NAMES, MeshObject, Scene, stable_segment_id
from .scenes import SCENES, glass_scene, plane_scene, targets_scene, wall_scene
from .street import street_scene
from .trajectory import ConstantVelocity, Looping, StaticTrajectory, Trajectory, WaypointTrajectory
from .world import RayHits, World

__all__ = [
    "MATERIAL_COLORS",
    "MATERIAL_NAMES",
    "RAY_CASTERS",
    "SCENES",
    "CameraImages",
    "CameraSpec",
    "ConstantVelocity",
    "Looping",
    "MeshObject",
    "Pose",
    "RayCaster",
    "RayHits",
    "Scene",
    "StaticTrajectory",
    "Trajectory",
    "WaypointTrajectory",
    "World",
    "WorldError",
    "glass_scene",
    "load_mesh_file",
    "plane_scene",
    "stable_segment_id",
    "street_scene",
    "targets_scene",
    "wall_scene",
]
