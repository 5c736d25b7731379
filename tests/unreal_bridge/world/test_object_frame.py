"""The compiled moving-object ray transform (``_object_frame.c``) gives the NumPy version's bits: the
same rays kept, the same float32 origins and directions in the object frame."""

from __future__ import annotations

import numpy as np
import pytest

from unreal_bridge.world import world as world_module
from unreal_bridge.world.pose import quat_from_yaw, quat_multiply
from unreal_bridge.world.world import _object_frame_rays

needs_compiled = pytest.mark.skipif(
    world_module._compiled_object_frame_rays is None, reason="the _object_frame extension was not built"
)


def _case(rng: np.random.Generator, n: int, k: int) -> tuple[np.ndarray, ...]:
    o = (rng.normal(0.0, 0.3, (n, 3)) + np.array([2.0, -1.0, 1.7])).astype(np.float32)
    d = rng.normal(0.0, 1.0, (n, 3))
    d /= np.linalg.norm(d, axis=1)[:, None]
    d = d.astype(np.float32)
    d[rng.integers(0, n, 5), rng.integers(0, 3, 5)] = 0.0  # rays in a slab's plane: inf and NaN slabs
    d[rng.integers(0, n, 2)] = [1.0, 0.0, 0.0]
    cand = np.sort(rng.choice(n, k, replace=False)).astype(np.intp)
    yaw = rng.uniform(-np.pi, np.pi, k)
    tilt = quat_multiply(quat_from_yaw(yaw), [np.cos(0.01), np.sin(0.01), 0.0, 0.0])
    p = rng.normal(0.0, 4.0, (k, 3)) + np.array([9.0, 0.0, 0.0])
    return o, d, cand, p, tilt


@needs_compiled
@pytest.mark.parametrize("seed", range(6))
def test_compiled_and_numpy_give_the_same_bits(seed: int) -> None:
    rng = np.random.default_rng(seed)
    o, d, cand, p, q = _case(rng, 4000, 1500)
    box = (np.array([-2.4, -1.0, 0.0], np.float32), np.array([2.4, 1.0, 1.6], np.float32))
    c_keep, c_ol, c_dl = _object_frame_rays(o, d, cand, p, q, box, compiled=True)
    n_keep, n_ol, n_dl = _object_frame_rays(o, d, cand, p, q, box, compiled=False)
    assert 10 < c_keep.size < cand.size  # some rays meet the box, some miss it
    assert c_keep.tolist() == n_keep.tolist()
    assert c_ol.tobytes() == n_ol.tobytes() and c_dl.tobytes() == n_dl.tobytes()


@needs_compiled
def test_compiled_edge_cases() -> None:
    """No candidates; a ray from inside the box; a zero direction; a row that is not one is refused."""
    box = (np.array([-1.0, -1.0, -1.0], np.float32), np.array([1.0, 1.0, 1.0], np.float32))
    o = np.array([[0.0, 0.0, 0.0], [5.0, 0.0, 0.0], [5.0, 0.0, 0.0]], np.float32)
    d = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    q = np.tile([1.0, 0.0, 0.0, 0.0], (3, 1))
    p = np.zeros((3, 3))
    for cand in (np.arange(0), np.arange(3)):
        got = _object_frame_rays(o, d, cand, p[: cand.size], q[: cand.size], box, compiled=True)
        want = _object_frame_rays(o, d, cand, p[: cand.size], q[: cand.size], box, compiled=False)
        assert got[0].tolist() == want[0].tolist()
        assert got[1].tobytes() == want[1].tobytes() and got[2].tobytes() == want[2].tobytes()
    with pytest.raises(IndexError, match="cand"):
        _object_frame_rays(o, d, np.array([0, 7]), p[:2], q[:2], box, compiled=True)
    with pytest.raises(ValueError, match="q must be"):
        _object_frame_rays(o, d, np.arange(3), p, q[:2], box, compiled=True)
