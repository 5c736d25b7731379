"""Mesh files as scenes: the embedded world's refusal of a file becomes a :class:`SceneError` (one line
at the CLI, exit 2) instead of the bridge package's ``WorldError`` traceback."""

from __future__ import annotations

from typing import Any

from rt_lidar.errors import SceneError
from rt_lidar.unreal_bridge.world import MeshObject, load_mesh_file
from rt_lidar.unreal_bridge.world.errors import WorldError

__all__ = ["read_mesh_scene"]


def read_mesh_scene(path: str, label: str = "--scene", **options: Any) -> list[MeshObject]:
    """The objects of the mesh file ``path`` (:func:`load_mesh_file` with ``options``); a file that is
    missing, unreadable or holds no triangles is a :class:`SceneError` naming it (after ``label``, where
    the user gave the path: an option, a field)."""
    try:
        return load_mesh_file(path, **options)
    except WorldError as exc:
        raise SceneError(f"{label} {exc}") from None
