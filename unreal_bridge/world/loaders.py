"""Mesh files (glTF/GLB, OBJ, PLY) into MeshObjects, through trimesh."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .errors import WorldError
from .pose import Pose
from .scene import MATERIAL_NAMES, MeshObject, stable_segment_id
from .trajectory import StaticTrajectory

__all__ = ["MESH_SUFFIXES", "load_mesh_file"]

MESH_SUFFIXES = (".glb", ".gltf", ".obj", ".ply")
#: Rotation taking glTF's y-up convention into z-up (x stays, +y -> +z, +z -> -y).
_Y_UP_TO_Z_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])


def _material_name(geom: object) -> str | None:
    material = getattr(getattr(geom, "visual", None), "material", None)
    name = getattr(material, "name", None)
    return name if isinstance(name, str) else None


def load_mesh_file(
    path: str | Path,
    *,
    name: str | None = None,
    material: str = "concrete",
    pose: Pose | None = None,
    segment_id: int | None = None,
    material_names: Sequence[str] = MATERIAL_NAMES,
    y_up: bool = False,
) -> list[MeshObject]:
    """Load a glTF/GLB, OBJ or PLY file as static MeshObjects placed at ``pose`` in the world.

    One object per mesh node of the file (named ``name``, or ``name/<node>`` when there are several;
    ``name`` defaults to the file stem); vertices keep the file's node transforms. A face whose
    material name equals one of ``material_names`` (case-insensitive) keeps that material, every other
    face gets ``material``. ``segment_id`` defaults to :func:`stable_segment_id` of the name. With
    ``y_up`` the file's y-up coordinates (the glTF convention) are turned into z-up.
    Raises WorldError naming the file when it is missing, of an unknown format or unreadable.
    """
    import trimesh

    p = Path(path)
    lookup = {m.lower(): i for i, m in enumerate(material_names)}
    if material.lower() not in lookup:
        raise WorldError(f"{p}: default material {material!r} is not one of {', '.join(material_names)}")
    if p.suffix.lower() not in MESH_SUFFIXES:
        raise WorldError(f"{p}: unknown mesh format {p.suffix!r}; supported: {', '.join(MESH_SUFFIXES)}")
    if not p.is_file():
        raise WorldError(f"{p}: no such mesh file")
    try:
        loaded = trimesh.load_scene(str(p))
        nodes = [(node, *loaded.graph[node]) for node in loaded.graph.nodes_geometry]
    except Exception as exc:  # trimesh raises many types for bad files
        raise WorldError(f"{p}: cannot read mesh file: {type(exc).__name__}: {exc}") from exc
    base = name if name is not None else p.stem
    parts: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []
    for node, transform, geom_name in sorted(nodes, key=lambda n: str(n[0])):
        geom = loaded.geometry.get(geom_name)
        if not isinstance(geom, trimesh.Trimesh) or len(geom.faces) == 0:
            continue
        v = np.asarray(geom.vertices, dtype=np.float64) @ np.asarray(transform)[:3, :3].T
        v = v + np.asarray(transform)[:3, 3]
        if y_up:
            v = v @ _Y_UP_TO_Z_UP.T
        mat = lookup.get((_material_name(geom) or "").lower(), lookup[material.lower()])
        faces = np.asarray(geom.faces, dtype=np.int64)
        parts.append((str(node), v, faces, np.full(len(faces), mat, dtype=np.int16)))
    if not parts:
        raise WorldError(f"{p}: the file holds no triangle mesh")
    if not all(np.all(np.isfinite(v)) for _, v, _, _ in parts):
        raise WorldError(f"{p}: vertices contain NaN or inf")
    sid = stable_segment_id(base) if segment_id is None else segment_id
    trajectory = StaticTrajectory(pose if pose is not None else Pose.identity())
    return [
        MeshObject(
            name=base if len(parts) == 1 else f"{base}/{node}",
            vertices=v.astype(np.float32),
            faces=f.astype(np.int32),
            face_material=m,
            segment_id=sid,
            trajectory=trajectory,
        )
        for node, v, f, m in parts
    ]
