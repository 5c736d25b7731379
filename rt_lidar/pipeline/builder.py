"""Assembling a whole pipeline from names: preset + scene -> world, source, physics, pipeline."""

from __future__ import annotations

from dataclasses import dataclass

from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.sensor.beam import exit_m_per_rad
from rt_lidar.sensor.materials import MaterialTable, load_material_table
from rt_lidar.sensor.presets import SensorPreset, load_preset
from unreal_bridge.world import SCENES, Pose, Scene, StaticTrajectory, World, load_mesh_file

__all__ = ["BuiltPipeline", "build_pipeline", "build_world"]


@dataclass
class BuiltPipeline:
    """A pipeline with the parts it was built from."""

    pipeline: Pipeline
    world: World
    preset: SensorPreset
    materials: MaterialTable


MESH_SUFFIXES = (".glb", ".gltf", ".obj", ".ply")


def build_world(scene: str | Scene = "street", seed: int = 0, caster: str = "embree") -> World:
    """The embedded world of a named scene (``SCENES``), of a mesh file (glTF/GLB, OBJ, PLY: its meshes
    are the static scene, the sensor starts at the origin 1.8 m up), or of a ready :class:`Scene`."""
    if isinstance(scene, str):
        if scene.lower().endswith(MESH_SUFFIXES):
            objects = load_mesh_file(scene)
            scene = Scene(objects=objects, ego=StaticTrajectory(Pose.identity()))
        elif scene not in SCENES:
            known = ", ".join(sorted(SCENES))
            raise ValueError(f"unknown scene '{scene}'; known: {known}, or a {'/'.join(MESH_SUFFIXES)} file")
        else:
            scene = SCENES[scene](seed=seed)
    return World(scene, caster=caster)


def build_pipeline(
    preset: str | SensorPreset,
    scene: str | Scene | World = "street",
    *,
    seed: int = 0,
    sim_hz: float = 20.0,
    physics: PhysicsConfig | None = None,
    materials: MaterialTable | None = None,
    prefetch: bool | int = False,
) -> BuiltPipeline:
    """Everything the frame loop needs for ``preset`` in ``scene`` (``prefetch``: frames cast ahead,
    see :attr:`Pipeline.prefetch`)."""
    sensor = preset if isinstance(preset, SensorPreset) else load_preset(preset)
    world = scene if isinstance(scene, World) else build_world(scene, seed=seed)
    table = materials or load_material_table()
    phys = SensorPhysics.from_preset(sensor, world.material_names, table, physics)
    source = WorldSource(world, sensor.range.max_m, phys.materials.transmission, exit_m_per_rad(sensor))
    return BuiltPipeline(
        Pipeline(sensor, source, phys, sim_hz=sim_hz, seed=seed, prefetch=prefetch), world, sensor, table
    )
