"""The embedded world's objects under the names an Unreal level gives its actors.

An Unreal level names an actor after its class or asset with a number (``Tree_3``, ``BP_Car_C_2``,
``StaticMeshActor_12``); AirSim's ``simListSceneObjects`` and ``simSetSegmentationObjectID`` use those
names. ``rt-lidar serve`` answers with them, so the name rules a controller applies to a real level
(:mod:`rt_lidar.bridge.material_rules`) meet the same kind of names here; objects of the analytic test
scenes are plain ``StaticMeshActor_N``, as a level's unnamed meshes are (no rule knows them: they stay
on the default material, as they would in Unreal).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["UNREAL_BASES", "unreal_actor_names"]

UNREAL_BASES: tuple[tuple[str, str], ...] = (
    ("lane_markings", "RoadLines"),
    ("road", "Road_Straight"),
    ("sidewalk_", "Sidewalk"),
    ("ground", "Ground"),
    ("building_", "BP_Building_C"),
    ("car_", "BP_Car_C"),
    ("street_light_", "StreetLight"),
    ("sign_", "StreetSign"),
    ("tree_", "Tree"),
    ("rock_", "Rock"),
    ("wall", "Wall"),
)
"""(prefix of an embedded object's name, the Unreal actor base name it is listed under), first match."""
FALLBACK_BASE = "StaticMeshActor"


def unreal_actor_names(objects: Sequence[str]) -> dict[str, str]:
    """Each embedded object's Unreal actor name, numbered per base name from 1 in scene order."""
    counts: dict[str, int] = {}
    out: dict[str, str] = {}
    for name in objects:
        base = next((b for prefix, b in UNREAL_BASES if name.startswith(prefix)), FALLBACK_BASE)
        counts[base] = counts.get(base, 0) + 1
        out[name] = f"{base}_{counts[base]}"
    return out
