"""A bounding volume hierarchy over triangles, built on the host with NumPy and stored as flat arrays that a
GPU kernel (:mod:`kernels.bvh_cuda`) traverses.

The build is top-down and runs one tree level at a time over every node of that level at once (no
Python loop over nodes): each node's primitives are sorted along the longest axis of their centroids'
box, cut into :data:`SAH_CHUNKS` runs of equal count, and split at the run boundary with the lowest
surface-area cost (a binned SAH over equal-count bins). Below :data:`SAH_DEPTH` levels the split falls
back to the median, so the tree is never deeper than ``SAH_DEPTH + log2(primitives) + 1`` (the kernel's
traversal stack holds :data:`MAX_DEPTH`). The build depends on the input alone: the same triangles give
the same arrays.

Layout (what the kernel reads):

- ``node_box`` (nodes, 6) float32: the node's box, low corner then high corner;
- ``node_meta`` (nodes, 2) int32: an inner node holds (index of its left child, 0), the right child
  being the next node; a leaf holds (its first triangle in the leaf order, its triangle count >= 1);
- ``tri_vertices`` (triangles, 9) float32: each triangle's three corners, in leaf order;
- ``tri_index`` (triangles,) int32: each leaf-order triangle's index in the input faces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["LEAF_SIZE", "MAX_DEPTH", "SAH_CHUNKS", "SAH_DEPTH", "Bvh", "build_bvh"]

LEAF_SIZE = 4
"""Triangles a node holds at most without being split."""
SAH_CHUNKS = 12
"""Equal-count runs whose boundaries are the split candidates of the surface-area cost."""
SAH_DEPTH = 28
"""Levels split by the surface-area cost; deeper ones split at the median."""
MAX_DEPTH = 64
"""The kernel's traversal stack: larger than any tree this build makes (up to 2**35 triangles)."""


@dataclass(frozen=True)
class Bvh:
    """The flat arrays of one triangle mesh's hierarchy (see the module docstring)."""

    node_box: NDArray[np.float32]
    node_meta: NDArray[np.int32]
    tri_vertices: NDArray[np.float32]
    tri_index: NDArray[np.int32]
    depth: int
    """Levels below the root of the deepest leaf."""

    @property
    def node_count(self) -> int:
        """Nodes in the tree (0 for an empty mesh)."""
        return int(self.node_box.shape[0])

    @property
    def bounds(self) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """The root's box (low, high corners); an empty mesh's is inverted (low +inf, high -inf)."""
        if not self.node_count:
            return np.full(3, np.inf, np.float32), np.full(3, -np.inf, np.float32)
        return self.node_box[0, :3].copy(), self.node_box[0, 3:].copy()


def _segment_reduce(values: np.ndarray, starts: np.ndarray, ends: np.ndarray, op: np.ufunc) -> np.ndarray:
    """``op`` reduced over ``values[starts[i]:ends[i]]`` for each segment (every segment non-empty)."""
    padded = np.concatenate([values, values[:1]])  # an end equal to len(values) is a valid index
    idx = np.empty(2 * starts.shape[0], np.int64)
    idx[0::2], idx[1::2] = starts, ends
    return op.reduceat(padded, idx, axis=0)[0::2]


def _half_area(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    e = np.maximum(hi - lo, 0.0).astype(np.float64)
    return e[..., 0] * e[..., 1] + e[..., 1] * e[..., 2] + e[..., 2] * e[..., 0]


def _sah_splits(
    plo: np.ndarray, phi: np.ndarray, starts: np.ndarray, counts: np.ndarray
) -> NDArray[np.int64]:
    """The split position (absolute, in the sorted order) of each segment by the surface-area cost over
    :data:`SAH_CHUNKS` equal-count runs; ``plo`` / ``phi`` are the primitives' boxes in sorted order."""
    k, b = starts.shape[0], SAH_CHUNKS
    j = np.arange(b + 1, dtype=np.int64)
    bounds = starts[:, None] + (counts[:, None] * j[None, :]) // b  # (K, B + 1)
    run_start, run_end = bounds[:, :-1].reshape(-1), bounds[:, 1:].reshape(-1)
    empty = run_end <= run_start
    safe_start = np.where(empty, np.minimum(run_start, plo.shape[0] - 1), run_start)  # one row, masked below
    safe_end = np.where(empty, safe_start + 1, run_end)
    rlo = _segment_reduce(plo, safe_start, safe_end, np.minimum).reshape(k, b, 3)
    rhi = _segment_reduce(phi, safe_start, safe_end, np.maximum).reshape(k, b, 3)
    rlo[empty.reshape(k, b)] = np.inf
    rhi[empty.reshape(k, b)] = -np.inf
    left_lo, left_hi = np.minimum.accumulate(rlo, axis=1), np.maximum.accumulate(rhi, axis=1)
    right_lo = np.minimum.accumulate(rlo[:, ::-1], axis=1)[:, ::-1]
    right_hi = np.maximum.accumulate(rhi[:, ::-1], axis=1)[:, ::-1]
    n_left = (bounds[:, 1:b] - starts[:, None]).astype(np.float64)  # split after run 0 .. B-2
    n_right = counts[:, None].astype(np.float64) - n_left
    cost = _half_area(left_lo[:, :-1], left_hi[:, :-1]) * n_left
    cost += _half_area(right_lo[:, 1:], right_hi[:, 1:]) * n_right
    cost[(n_left <= 0) | (n_right <= 0)] = np.inf
    best = np.argmin(cost, axis=1)
    return np.asarray(bounds[np.arange(k), best + 1], np.int64)


def build_bvh(vertices: np.ndarray, faces: np.ndarray) -> Bvh:
    """The hierarchy of the triangles ``faces`` (F, 3) over ``vertices`` (V, 3)."""
    v = np.ascontiguousarray(vertices, np.float32).reshape(-1, 3)
    f = np.ascontiguousarray(faces, np.int64).reshape(-1, 3)
    n = f.shape[0]
    tri = v[f]  # (F, 3 corners, 3)
    if n == 0:
        return Bvh(
            np.zeros((0, 6), np.float32),
            np.zeros((0, 2), np.int32),
            np.zeros((0, 9), np.float32),
            np.zeros(0, np.int32),
            0,
        )
    plo_all, phi_all = tri.min(axis=1), tri.max(axis=1)
    cent_all = (0.5 * (plo_all.astype(np.float64) + phi_all)).astype(np.float64)
    perm = np.arange(n, dtype=np.int64)
    node_box = np.empty((2 * n, 6), np.float32)
    node_meta = np.zeros((2 * n, 2), np.int32)
    level_nodes = np.zeros(1, np.int64)
    starts, counts = np.zeros(1, np.int64), np.array([n], np.int64)
    n_nodes, depth = 1, 0
    while level_nodes.size:
        ends = starts + counts
        plo, phi = plo_all[perm], phi_all[perm]
        node_box[level_nodes, :3] = _segment_reduce(plo, starts, ends, np.minimum)
        node_box[level_nodes, 3:] = _segment_reduce(phi, starts, ends, np.maximum)
        leaf = counts <= LEAF_SIZE
        node_meta[level_nodes[leaf], 0] = starts[leaf]
        node_meta[level_nodes[leaf], 1] = counts[leaf]
        inner = ~leaf
        if not inner.any():
            break
        s, c, parents = starts[inner], counts[inner], level_nodes[inner]
        k = s.shape[0]
        # every element of the segments to split, and its segment
        seg = np.repeat(np.arange(k), c)
        elem = np.arange(seg.shape[0], dtype=np.int64) - np.repeat(np.cumsum(c) - c, c) + np.repeat(s, c)
        cent = cent_all[perm[elem]]
        clo = _segment_reduce(cent, np.cumsum(c) - c, np.cumsum(c), np.minimum)
        chi = _segment_reduce(cent, np.cumsum(c) - c, np.cumsum(c), np.maximum)
        axis = np.argmax(chi - clo, axis=1)
        key = cent[np.arange(seg.shape[0]), axis[seg]]
        order = np.lexsort((key, seg))
        perm[elem] = perm[elem][order]
        mid = _sah_splits(plo_all[perm], phi_all[perm], s, c) if depth < SAH_DEPTH else s + c // 2
        left = n_nodes + 2 * np.arange(k, dtype=np.int64)
        node_meta[parents, 0] = left
        node_meta[parents, 1] = 0
        n_nodes += 2 * k
        level_nodes = np.empty(2 * k, np.int64)
        level_nodes[0::2], level_nodes[1::2] = left, left + 1
        starts = np.empty(2 * k, np.int64)
        starts[0::2], starts[1::2] = s, mid
        counts = np.empty(2 * k, np.int64)
        counts[0::2], counts[1::2] = mid - s, s + c - mid
        depth += 1
    return Bvh(
        np.ascontiguousarray(node_box[:n_nodes]),
        np.ascontiguousarray(node_meta[:n_nodes]),
        np.ascontiguousarray(tri[perm].reshape(n, 9)),
        perm.astype(np.int32),
        depth,
    )
