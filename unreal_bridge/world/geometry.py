"""Low-poly primitives and a builder that merges them into one MeshObject with per-face materials."""

from __future__ import annotations

from functools import cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import WorldError
from .pose import Pose
from .scene import MATERIAL_NAMES, MeshObject
from .trajectory import StaticTrajectory, Trajectory

__all__ = ["MeshBuilder", "unit_box", "unit_cylinder", "unit_sphere"]

Mesh = tuple[NDArray[np.float64], NDArray[np.int32]]


@cache
def unit_box() -> Mesh:
    """Axis-aligned box spanning -0.5..0.5 on each axis, outward winding (12 triangles)."""
    v = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)], dtype=np.float64)
    f = np.array(
        [
            [0, 1, 3],
            [0, 3, 2],
            [4, 6, 7],
            [4, 7, 5],  # -x, +x
            [0, 4, 5],
            [0, 5, 1],
            [2, 3, 7],
            [2, 7, 6],  # -y, +y
            [0, 2, 6],
            [0, 6, 4],
            [1, 5, 7],
            [1, 7, 3],  # -z, +z
        ],
        dtype=np.int32,
    )
    return v, f


@cache
def unit_cylinder(sections: int = 16) -> Mesh:
    """Closed cylinder of radius 1 along +z from z = 0 to z = 1."""
    a = np.linspace(0.0, 2 * np.pi, sections, endpoint=False)
    ring = np.stack([np.cos(a), np.sin(a)], axis=-1)
    v = np.concatenate(
        [np.c_[ring, np.zeros(sections)], np.c_[ring, np.ones(sections)], [[0, 0, 0], [0, 0, 1]]]
    ).astype(np.float64)
    i = np.arange(sections)
    j = (i + 1) % sections
    bottom_c, top_c = 2 * sections, 2 * sections + 1
    side = np.concatenate([np.stack([i, j, j + sections], 1), np.stack([i, j + sections, i + sections], 1)])
    caps = np.concatenate(
        [
            np.stack([np.full(sections, bottom_c), j, i], 1),
            np.stack([np.full(sections, top_c), i + sections, j + sections], 1),
        ]
    )
    return v, np.concatenate([side, caps]).astype(np.int32)


@cache
def unit_sphere(subdivisions: int = 1) -> Mesh:
    """Icosphere of radius 1 (20 * 4**subdivisions triangles)."""
    t = (1.0 + 5**0.5) / 2
    v = np.array(
        [
            [-1, t, 0],
            [1, t, 0],
            [-1, -t, 0],
            [1, -t, 0],
            [0, -1, t],
            [0, 1, t],
            [0, -1, -t],
            [0, 1, -t],
            [t, 0, -1],
            [t, 0, 1],
            [-t, 0, -1],
            [-t, 0, 1],
        ],
        dtype=np.float64,
    )
    f = np.array(
        [
            [0, 11, 5],
            [0, 5, 1],
            [0, 1, 7],
            [0, 7, 10],
            [0, 10, 11],
            [1, 5, 9],
            [5, 11, 4],
            [11, 10, 2],
            [10, 7, 6],
            [7, 1, 8],
            [3, 9, 4],
            [3, 4, 2],
            [3, 2, 6],
            [3, 6, 8],
            [3, 8, 9],
            [4, 9, 5],
            [2, 4, 11],
            [6, 2, 10],
            [8, 6, 7],
            [9, 8, 1],
        ],
        dtype=np.int64,
    )
    for _ in range(subdivisions):
        edges = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
        uniq, inv = np.unique(edges, axis=0, return_inverse=True)
        mids = 0.5 * (v[uniq[:, 0]] + v[uniq[:, 1]])
        m = inv.reshape(3, -1).T + len(v)
        v = np.concatenate([v, mids])
        a, b, c = f[:, 0], f[:, 1], f[:, 2]
        ab, bc, ca = m[:, 0], m[:, 1], m[:, 2]
        f = np.concatenate([np.stack(x, 1) for x in ([a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca])])
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    return v, f.astype(np.int32)


def _rot(roll: float, pitch: float, yaw: float) -> NDArray[np.float64]:
    return Pose.from_xyz_rpy(0.0, 0.0, 0.0, roll, pitch, yaw).rotation_matrix()


class MeshBuilder:
    """Accumulates transformed primitives, each with one material, into a single mesh."""

    def __init__(self, material_names: tuple[str, ...] | list[str] = MATERIAL_NAMES) -> None:
        self._material_index = {m: i for i, m in enumerate(material_names)}
        self._verts: list[NDArray[np.float64]] = []
        self._faces: list[NDArray[np.int32]] = []
        self._mats: list[NDArray[np.int16]] = []
        self._n = 0

    def _material(self, name: str) -> int:
        try:
            return self._material_index[name]
        except KeyError:
            raise WorldError(f"MeshBuilder: unknown material {name!r}") from None

    def add(self, vertices: ArrayLike, faces: ArrayLike, material: str) -> None:
        """Append a mesh given in the builder's frame."""
        v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
        f = np.asarray(faces, dtype=np.int32).reshape(-1, 3)
        self._verts.append(v)
        self._faces.append(f + self._n)
        self._mats.append(np.full(f.shape[0], self._material(material), dtype=np.int16))
        self._n += v.shape[0]

    def _add_unit(
        self, mesh: Mesh, scale: ArrayLike, center: ArrayLike, rpy: tuple[float, float, float], material: str
    ) -> None:
        v, f = mesh
        pts = (v * np.asarray(scale, dtype=np.float64)) @ _rot(*rpy).T + np.asarray(center, dtype=np.float64)
        self.add(pts, f, material)

    def box(
        self,
        center: ArrayLike,
        size: ArrayLike,
        material: str,
        yaw: float = 0.0,
        pitch: float = 0.0,
        roll: float = 0.0,
    ) -> None:
        """A box of ``size`` (x, y, z extents) centred at ``center``, rotated by roll/pitch/yaw."""
        self._add_unit(unit_box(), size, center, (roll, pitch, yaw), material)

    def cylinder(
        self,
        base: ArrayLike,
        radius: float,
        height: float,
        material: str,
        sections: int = 16,
        roll: float = 0.0,
        pitch: float = 0.0,
        yaw: float = 0.0,
    ) -> None:
        """A closed cylinder whose axis starts at ``base`` and runs ``height`` along the rotated +z."""
        self._add_unit(unit_cylinder(sections), (radius, radius, height), base, (roll, pitch, yaw), material)

    def sphere(
        self,
        center: ArrayLike,
        radii: ArrayLike,
        material: str,
        subdivisions: int = 1,
        jitter: float = 0.0,
        rng: np.random.Generator | None = None,
    ) -> None:
        """An ellipsoid (icosphere scaled by ``radii``); ``jitter`` > 0 roughens it radially (needs rng)."""
        v, f = unit_sphere(subdivisions)
        if jitter > 0.0:
            if rng is None:
                raise WorldError("MeshBuilder.sphere: jitter needs an rng")
            v = v * (1.0 + jitter * rng.uniform(-1.0, 1.0, size=(v.shape[0], 1)))
        self._add_unit((v, f), radii, center, (0.0, 0.0, 0.0), material)

    def quad(self, corners: ArrayLike, material: str) -> None:
        """A planar quad from 4 corners in counter-clockwise order seen from the front."""
        c = np.asarray(corners, dtype=np.float64).reshape(4, 3)
        self.add(c, [[0, 1, 2], [0, 2, 3]], material)

    def grid(self, x0: float, x1: float, y0: float, y1: float, z: float, step: float, material: str) -> None:
        """An upward-facing tessellated rectangle at height z, cells about ``step`` metres."""
        nx = max(1, round((x1 - x0) / step))
        ny = max(1, round((y1 - y0) / step))
        xs, ys = np.linspace(x0, x1, nx + 1), np.linspace(y0, y1, ny + 1)
        gx, gy = np.meshgrid(xs, ys, indexing="ij")
        v = np.stack([gx.ravel(), gy.ravel(), np.full(gx.size, z)], axis=-1)
        i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
        a = (i * (ny + 1) + j).ravel()
        b, c, d = a + (ny + 1), a + (ny + 2), a + 1
        self.add(v, np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)]), material)

    @property
    def triangle_count(self) -> int:
        """Faces added so far."""
        return sum(f.shape[0] for f in self._faces)

    def build(self, name: str, segment_id: int, trajectory: Trajectory | None = None) -> MeshObject:
        """The merged MeshObject (vertices in the builder's frame, which is the object frame)."""
        if not self._faces:
            raise WorldError(f"MeshBuilder: object {name!r} has no geometry")
        return MeshObject(
            name=name,
            vertices=np.concatenate(self._verts).astype(np.float32),
            faces=np.concatenate(self._faces),
            face_material=np.concatenate(self._mats),
            segment_id=segment_id,
            trajectory=trajectory if trajectory is not None else StaticTrajectory(),
        )
