"""Assembling a whole pipeline from names: preset + scene -> world, source, physics, pipeline."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from rt_lidar.backend import PhysicsBackend
from rt_lidar.errors import ConfigError
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.pipeline.beam_full import SPARSE_SUB_RAYS, FullBeamSource, bundle_that_runs, use_full_beam
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.pipeline.scene_files import read_mesh_scene
from rt_lidar.pipeline.sources import HitSource, WorldSource, sun_unit
from rt_lidar.sensor.beam import BeamConfig, exit_m_per_rad, subray_pattern
from rt_lidar.sensor.materials import MaterialTable, load_material_table
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.unreal_bridge.beam_call import SCENE_SUN, SunArg
from rt_lidar.unreal_bridge.world import SCENES, Pose, Scene, StaticTrajectory, World

if TYPE_CHECKING:
    from rt_lidar.config import SceneSetup

__all__ = ["BuiltPipeline", "build_pipeline", "build_world", "negotiate"]


@dataclass
class BuiltPipeline:
    """A pipeline with the parts it was built from."""

    pipeline: Pipeline
    world: World
    preset: SensorPreset
    materials: MaterialTable


MESH_SUFFIXES = (".glb", ".gltf", ".obj", ".ply")


def build_world(
    scene: str | Scene = "street", seed: int = 0, caster: str = "embree", setup: SceneSetup | None = None
) -> World:
    """The embedded world of a named scene (``SCENES``), of a mesh file (glTF/GLB, OBJ, PLY: its meshes
    are the static scene, the sensor starts at the origin 1.8 m up), or of a ready :class:`Scene`;
    ``setup`` sets more of a named or mesh scene (:func:`~rt_lidar.pipeline.scene_setup.setup_scene`)."""
    if isinstance(scene, str) and setup is not None:
        from rt_lidar.pipeline.scene_setup import setup_scene

        scene = setup_scene(scene, seed, setup)
    if isinstance(scene, str):
        if scene.lower().endswith(MESH_SUFFIXES):
            objects = read_mesh_scene(scene)
            scene = Scene(objects=objects, ego=StaticTrajectory(Pose.identity()))
        elif scene not in SCENES:
            known = ", ".join(sorted(SCENES))
            raise ConfigError(f"unknown scene '{scene}'; known: {known}, or a {'/'.join(MESH_SUFFIXES)} file")
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
    backend: PhysicsBackend | None = None,
) -> BuiltPipeline:
    """Everything the frame loop needs for ``preset`` in ``scene`` (``prefetch``: frames cast ahead,
    see :attr:`Pipeline.prefetch`; ``backend``: where the physics' array work runs, None =
    :func:`~rt_lidar.backend.select_backend`'s choice)."""
    sensor = preset if isinstance(preset, SensorPreset) else load_preset(preset)
    world = scene if isinstance(scene, World) else build_world(scene, seed=seed)
    table = materials or load_material_table()
    arrays = table.arrays(world.material_names, sensor.optics.wavelength_nm)
    from rt_lidar.pipeline.device_world import BvhWorld

    source: WorldSource
    if isinstance(world, BvhWorld):  # --device: the frame on the device where it can run there
        from rt_lidar.pipeline.device_frame import device_frame_parts, warn_host_physics

        source, phys, why = device_frame_parts(world, sensor, arrays, physics or PhysicsConfig())
        if why is not None:
            warn_host_physics(why)
    else:
        source = WorldSource(world, sensor.range.max_m, arrays.transmission, exit_m_per_rad(sensor))
        source.retro_gain, source.volume = arrays.retro_gain, arrays.volume
        phys = SensorPhysics(sensor, arrays, negotiate(source, sensor, physics or PhysicsConfig()), backend)
    return BuiltPipeline(
        Pipeline(sensor, source, phys, sim_hz=sim_hz, seed=seed, prefetch=prefetch), world, sensor, table
    )


def negotiate(source: HitSource, preset: SensorPreset, config: PhysicsConfig) -> PhysicsConfig:
    """Ask ``source`` for what ``config`` needs (sub-ray bundles, sun cosines, a wet road's mirror rays
    and spray: ``use_wet_road``, where the source has it) once, before the first
    frame, and return the configuration that will run: what was asked, less what the source refused
    (one ray a pulse, no sunlight; each with a warning), with the beam resolved against the preset
    (``beam`` names the sub-rays, return mode and echo pulse width that run)."""
    beam = config.beam or BeamConfig()
    sub_rays, mode = beam.resolve(preset)
    want_sun: SunArg = None
    if config.sun_illuminance_lux > 0:
        want_sun = SCENE_SUN if config.sun_direction is None else sun_unit(config.sun_direction)
    full = beam.full and source.capabilities.full_beam
    if beam.full and not full:
        warnings.warn(
            f"--beam full needs a source that chooses the pulses from the world (in-process, or our "
            f"rt-lidar serve with the extension): this one casts every pulse as the {sub_rays}-sub-ray "
            "bundle instead (the same physics, slower)",
            stacklevel=3,
        )
    bundle = bundle_that_runs(sub_rays, beam.bundle) if full else beam.bundle
    if full and bundle != beam.bundle:
        warnings.warn(
            f"--beam full: the sparse bundle thins a bundle of {', '.join(map(str, SPARSE_SUB_RAYS))} "
            f"sub-rays; the {sub_rays}-sub-ray bundle is cast whole (as --beam full-dense)",
            stacklevel=3,
        )
    if full:
        grant = use_full_beam(cast(FullBeamSource, source), preset, sub_rays, want_sun, bundle)
        if not grant.full and grant.sub_rays > 1:
            warnings.warn(
                f"--beam full: the server does not choose the pulses itself (an rt-lidar serve older than "
                f"the 'full' entry of rtLidarGetBeamHits): every pulse is cast as the {sub_rays}-sub-ray "
                "bundle instead (the same physics, slower)",
                stacklevel=3,
            )
        full = grant.full
        if not full and grant.sub_rays > 1 and bundle == "sparse":  # every pulse as the dense bundle
            bundle = "dense"
            grant = source.use_beam(subray_pattern(preset, sub_rays), want_sun)
        if full:  # a sparse bundle casts fewer sub-rays than the dense bundle it stands for
            grant = dataclasses.replace(grant, sub_rays=sub_rays)
    else:
        grant = source.use_beam(subray_pattern(preset, sub_rays), want_sun)
    if grant.sub_rays < sub_rays:
        warnings.warn(
            f"the AirSim server offers no rtLidarGetBeamHits (stock AirSim, an older server, or "
            f"--no-extension), so it sends one ray per pulse: {sub_rays} sub-rays (--sub-rays / "
            "the preset's) are not applied (return modes and echo pulse width are)",
            stacklevel=3,
        )
    lux = config.sun_illuminance_lux
    if want_sun is not None and not grant.sun:
        warnings.warn(
            "sunlight needs every ray's sun cosines, which this AirSim server does not send (stock "
            "AirSim, an older server, or --no-extension: our rt-lidar serve answers rtLidarGetBeamHits "
            "with a sun): --sun-lux is not applied over this bridge (or use rt-lidar demo --in-process)",
            stacklevel=3,
        )
        lux = 0.0
    wetness = config.weather.road_wetness if config.weather is not None else 0.0
    use_wet = getattr(source, "use_wet_road", None)
    if wetness > 0 and (use_wet is None or not use_wet(wetness)):
        warnings.warn(
            "a wet road needs the server to mark the road and cast its mirror rays and spray (our "
            "rt-lidar serve, with the extension): --road-wetness is not applied over this bridge",
            stacklevel=3,
        )
    ran = BeamConfig(sub_rays=grant.sub_rays, return_mode=mode, epw=beam.epw, full=full, bundle=bundle)
    return dataclasses.replace(config, beam=ran, sun_illuminance_lux=lux)
