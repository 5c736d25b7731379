"""The crosstalk echoes from the compiled step (``rt_lidar.rig._crosstalk``) are the NumPy code's bytes, in
its order: on a facing pair of VLP-16s (direct and scattered paths) and on the example rig (an HDL-64E
and two VLP-16s on a street), pair of sensors by pair, frame by frame; and a rig's scans are the same
with the step on and off."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from crosstalk_twins import echoes_both_ways

from rt_lidar.pipeline.builder import build_world
from rt_lidar.rig import crosstalk, crosstalk_fused
from rt_lidar.rig.experiment import _ground, facing_pair
from rt_lidar.rig.loop import RigLoop
from rt_lidar.rig.model import load_rig

needs_compiled = pytest.mark.skipif(not crosstalk_fused.available(), reason="_crosstalk was not built")
RIG = Path(__file__).resolve().parents[3] / "docs" / "rigs" / "roof-and-corners.toml"


def _held_to_numpy(loop: RigLoop, frames: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Step ``loop``; every pair of sensors' echoes computed both ways and compared; the echoes found."""
    numpy_echoes = crosstalk._echoes
    found = [0]

    def both(*args: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        fast = numpy_echoes(*args)  # type: ignore[arg-type]
        crosstalk_fused.enabled = False
        try:
            want = numpy_echoes(*args)  # type: ignore[arg-type]
        finally:
            crosstalk_fused.enabled = True
        for g, w in zip(fast, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()
        found[0] += int(fast[0].size)
        return fast

    monkeypatch.setattr(crosstalk, "_echoes", both)
    for _ in range(frames):
        loop.step()
    return found[0]


@needs_compiled
def test_a_facing_pair_s_echoes_are_numpy_s(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = RigLoop(facing_pair("VLP-16"), _ground(), sim_hz=20.0, crosstalk=True)
    assert _held_to_numpy(loop, 4, monkeypatch) > 0


@needs_compiled
def test_the_example_rig_s_echoes_are_numpy_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its sensors face apart: every pair of pulses is tried, none is seen (the demo's 0 false points)."""
    loop = RigLoop(load_rig(RIG), build_world("street", seed=3), sim_hz=20.0, seed=3, crosstalk=True)
    assert _held_to_numpy(loop, 2, monkeypatch) == 0


@needs_compiled
def test_scans_are_the_same_with_the_step_off() -> None:
    def scans() -> list[bytes]:
        loop = RigLoop(facing_pair("VLP-16"), _ground(), sim_hz=20.0, crosstalk=True)
        out = []
        for _ in range(3):
            for _name, got in sorted(loop.step().items()):
                out.extend(s.points.tobytes() for s in got)
        return out

    fast = scans()
    crosstalk_fused.enabled = False
    try:
        assert scans() == fast
    finally:
        crosstalk_fused.enabled = True


def test_einsum_adds_the_first_and_third_products_then_the_second() -> None:
    """The order of the dot products the compiled step copies (NumPy's einsum on rows of three)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((100_000, 3)), rng.standard_normal((100_000, 3))
    p = a * b
    assert np.einsum("ij,ij->i", a, b).tobytes() == ((p[:, 0] + p[:, 2]) + p[:, 1]).tobytes()


@needs_compiled
def test_world_directions_are_numpy_s() -> None:
    rng = np.random.default_rng(1)
    q = rng.standard_normal((20_000, 4))
    q /= np.linalg.norm(q, axis=1)[:, None]
    d = rng.standard_normal((20_000, 3)).astype(np.float32)
    d /= np.linalg.norm(d, axis=1)[:, None]
    got = crosstalk_fused.world_directions(q, d)
    want = crosstalk._rotate(q, d.astype(np.float64))
    want /= np.linalg.norm(want, axis=1)[:, None]
    assert got is not None and got.tobytes() == want.tobytes()


@needs_compiled
@pytest.mark.parametrize("n", [1, 3, 255, 256, 257, 513])
@pytest.mark.parametrize("one", [False, True])
def test_world_directions_in_blocks_are_numpy_s(n: int, one: bool) -> None:
    """The compiled rotation runs in blocks of 256 directions: sizes around a block, one orientation
    for all (read in place) or one each, and a zero direction (its NaNs) give NumPy's bits."""
    rng = np.random.default_rng(n)
    q = rng.standard_normal((1 if one else n, 4))
    q /= np.linalg.norm(q, axis=1)[:, None]
    quat = np.broadcast_to(q, (n, 4)) if one else q
    d = rng.standard_normal((n, 3)).astype(np.float32)
    d[n // 2] = 0.0
    got = crosstalk_fused.world_directions(quat, d)
    with np.errstate(invalid="ignore"):
        want = crosstalk._rotate(np.ascontiguousarray(quat), d.astype(np.float64))
        want /= np.linalg.norm(want, axis=1)[:, None]
    assert got is not None and got.tobytes() == want.tobytes()


@needs_compiled
@pytest.mark.parametrize("in_order", [True, False])
def test_pair_bounds_are_searchsorted_s(in_order: bool) -> None:
    rng = np.random.default_rng(2)
    t_a = rng.integers(0, 50_000_000, 30_000)
    t_b = np.sort(rng.integers(0, 50_000_000, 20_000))
    t_b[100:110] = t_b[100]  # equal times
    if in_order:
        t_a.sort()
    lo, hi = np.empty(t_a.size, np.int64), np.empty(t_a.size, np.int64)
    assert crosstalk_fused._c is not None
    total = crosstalk_fused._c.pair_bounds(t_a, t_b, t_a.size, t_b.size, 1600.5, 800.0, lo, hi)
    want_lo = np.searchsorted(t_b, t_a - 1600.5, "left")
    want_hi = np.searchsorted(t_b, t_a + 800.0, "right")
    assert np.array_equal(lo, want_lo) and np.array_equal(hi, want_hi)
    assert total == int((want_hi - want_lo).sum())


def _boundary_pulses(n: int, seed: int) -> tuple[crosstalk._Pulses, crosstalk._Pulses, float, float]:
    """A's pulses along +x from the origin and B's spots (scattered) and origins (direct) each at an
    angle from A's beam within a few parts in 1e9 of the cone's edge, on either side, all in time."""
    rng = np.random.default_rng(seed)
    th_a, th_b = 1.5e-3, 1.5e-3
    t_a = np.sort(rng.integers(0, 1_000, n)).astype(np.int64)
    d_a = np.tile([1.0, 0.0, 0.0], (n, 1))
    o_a = np.zeros((n, 3))
    # scattered: B at (0, 0.5, 0) hitting a spot at distance D from A, at the angle limit * (1 + eps)
    dist = rng.uniform(5.0, 60.0, n)
    r_b = rng.uniform(5.0, 60.0, n)
    limit = th_a + th_b * r_b / dist
    ang = limit * (1.0 + rng.choice([-1.0, 1.0], n) * rng.uniform(0.0, 4e-9, n))
    spot = np.stack([dist * np.cos(ang), dist * np.sin(ang), np.zeros(n)], axis=1)
    o_b = np.tile([0.0, 0.5, 0.0], (n, 1))
    # half of B's pulses instead sit in A's beam, looking back at A (the direct path's edge)
    direct = rng.random(n) < 0.5
    length = rng.uniform(2.0, 80.0, n)
    beam_ang = th_b + 0.5 * 0.025 / length  # VLP-16: 25 mm aperture
    tilt = beam_ang * (1.0 + rng.choice([-1.0, 1.0], n) * rng.uniform(0.0, 4e-9, n))
    o_b[direct] = np.stack([length, np.zeros(n), np.zeros(n)], axis=1)[direct]
    d_dir = spot - o_b
    d_dir /= np.linalg.norm(d_dir, axis=1)[:, None]
    back = np.stack([-np.cos(tilt), np.sin(tilt), np.zeros(n)], axis=1)
    d_dir[direct] = back[direct]
    rb = np.where(direct, 1e3, np.linalg.norm(spot - o_b, axis=1))
    ring = np.zeros(n, np.uint16)

    def pulses(t: np.ndarray, o: np.ndarray, d: np.ndarray, r: np.ndarray) -> crosstalk._Pulses:
        return crosstalk._Pulses(
            t, ring, o, d, d.astype(np.float32), r, np.full(n, 0.9), np.zeros(n, np.int64)
        )

    pa = pulses(t_a, o_a, d_a, np.full(n, 1e3))
    pb = pulses(np.sort(rng.integers(0, 1_000, n)).astype(np.int64), o_b, d_dir, rb)
    return pa, pb, th_a, th_b


@needs_compiled
@pytest.mark.parametrize("seed", [3, 4])
def test_pairs_at_the_cone_s_edge_are_numpy_s(seed: int) -> None:
    """The compiled step takes the cone's cosine only where a pair may be inside it: pairs within a few
    parts in 1e9 of the edge (of A's receiver cone and of B's beam) are seen as the NumPy code sees
    them, on both sides of it."""
    loop = RigLoop(facing_pair("VLP-16"), _ground(), sim_hz=20.0, crosstalk=True)
    a, b = (u.sensor for u in loop.units.values())
    a = dataclasses.replace(a, receiver_fov_mrad=3.0)
    pa, pb, _, _ = _boundary_pulses(600, seed)
    want = echoes_both_ways(a, pa, b, pb)
    assert want[0].size > 100  # pairs inside the cones were found, and (by the angles) as many outside


@needs_compiled
@pytest.mark.parametrize("seed", [5, 6, 7])
def test_random_pairs_near_and_far_are_numpy_s(seed: int) -> None:
    """Pulses from origins a few metres apart in every direction, spots near and far and missing, wide
    and narrow cones: the pairs the compiled step rejects without a square root (behind A's beam,
    beyond A's reach, A looking away from B) are the pairs the NumPy code rejects."""
    rng = np.random.default_rng(seed)
    loop = RigLoop(facing_pair("VLP-16"), _ground(), sim_hz=20.0, crosstalk=True)
    a, b = (u.sensor for u in loop.units.values())
    a = dataclasses.replace(a, receiver_fov_mrad=float(rng.choice([3.0, 200.0, 900.0])))
    n = 700

    def pulses() -> crosstalk._Pulses:
        d = rng.standard_normal((n, 3))
        d /= np.linalg.norm(d, axis=1)[:, None]
        r = rng.choice([0.5, 3.0, 30.0], n) * rng.random(n)
        r[rng.random(n) < 0.1] = np.inf
        return crosstalk._Pulses(
            np.sort(rng.integers(0, 600, n)).astype(np.int64),
            np.zeros(n, np.uint16),
            rng.uniform(-2.0, 2.0, (n, 3)),
            d,
            d.astype(np.float32),
            r,
            rng.uniform(0.0, 1.0, n),
            rng.integers(0, 3, n).astype(np.int64),
        )

    pa, pb = pulses(), pulses()
    want = echoes_both_ways(a, pa, b, pb)
    assert want[0].size > 0
