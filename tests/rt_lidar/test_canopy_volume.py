"""Issue 40: tree crowns are volumes of leaves (unreal_bridge.world.canopy): beams enter a crown and return
from leaves at many depths, pass through its gaps as Beer-Lambert's gap probability says, and in dual mode
a pulse's footprint meets leaves at two depths."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.unreal_bridge.world import Pose, Scene, StaticTrajectory, World
from rt_lidar.unreal_bridge.world.canopy import G_SPHERICAL, LEAF_AREA_DENSITY, crown_leaves, gap_probability
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.props import add_tree

R_CROWN = 2.0
CENTER = (12.0, 0.0, 0.0)


def _crown_world(seed: int = 3) -> World:
    names = list(Scene(objects=[]).material_names)
    b = MeshBuilder()
    v, f = crown_leaves(CENTER, (R_CROWN,) * 3, np.random.default_rng(seed))
    b.add(v, f, "vegetation")
    scene = Scene(objects=[b.build("crown", 9)], material_names=names, ego=StaticTrajectory(Pose.identity()))
    return World(scene)


def _parallel_rays(n_side: int = 160) -> tuple[np.ndarray, np.ndarray]:
    """Rays along +x through the crown's disc, on a square grid of offsets (y, z); their offsets."""
    s = np.linspace(-R_CROWN, R_CROWN, n_side)
    y, z = (a.ravel() for a in np.meshgrid(s, s))
    keep = y * y + z * z < (0.97 * R_CROWN) ** 2
    y, z = y[keep], z[keep]
    org = np.stack([np.zeros_like(y), y, z], 1).astype(np.float32)
    dirs = np.tile(np.array([[1.0, 0.0, 0.0]], np.float32), (len(y), 1))
    return org, dirs


def test_the_crown_passes_beams_as_beer_lambert_gap_probability_says() -> None:
    """Share of beams through a 2 m crown without meeting a leaf, by chord length, against
    exp(-G u s) with G = 0.5 and the leaf area density, over four crowns: within 0.03 in every band (one
    crown's leaves scatter its bands' shares by ~0.03); the middle passes ~0.14."""
    org, dirs = _parallel_rays()
    passed = np.mean(
        [~np.isfinite(_crown_world(s).cast(org, dirs, 0.0, 100.0).distance) for s in range(4)], 0
    )
    rho = np.hypot(org[:, 1], org[:, 2])
    chord = 2.0 * np.sqrt(R_CROWN**2 - rho**2)
    bands = np.quantile(chord, np.linspace(0.0, 1.0, 6))
    for lo, hi in itertools.pairwise(bands):
        sel = (chord >= lo) & (chord < hi)
        want = float(np.mean(gap_probability(chord[sel])))
        assert float(np.mean(passed[sel])) == pytest.approx(want, abs=0.03), (lo, hi)
    middle = chord > 3.8
    assert float(np.mean(passed[middle])) == pytest.approx(
        np.exp(-G_SPHERICAL * LEAF_AREA_DENSITY * 4.0), abs=0.04
    )


def test_returns_spread_through_the_crowns_depth() -> None:
    """The depth of the first leaf beyond the crown's surface is exponential with mean free path
    1 / (G u) = 2 m, cut at the chord: over four crowns, for beams through the middle third, the mean and
    spread of the depths are within 10 % of the truncated exponential's (a solid shell gives depth 0)."""
    org, dirs = _parallel_rays()
    rho = np.hypot(org[:, 1], org[:, 2])
    half = np.sqrt(R_CROWN**2 - rho**2)
    middle = rho < R_CROWN / 3
    depth = []
    for seed in range(4):
        d = _crown_world(seed).cast(org, dirs, 0.0, 100.0).distance
        ok = middle & np.isfinite(d)
        depth.append(d[ok] - (CENTER[0] - half[ok]))
    got = np.concatenate(depth)
    k = G_SPHERICAL * LEAF_AREA_DENSITY
    s = np.linspace(0.0, 2.0 * R_CROWN, 4001)[None, :]
    w = k * np.exp(-k * s) * (s <= 2.0 * half[middle][:, None])  # each beam's depth density up to its chord
    w = w.sum(0)
    mean = float(np.sum(s[0] * w) / np.sum(w))
    std = float(np.sqrt(np.sum((s[0] - mean) ** 2 * w) / np.sum(w)))
    assert float(np.mean(got)) == pytest.approx(mean, rel=0.1)
    assert float(np.std(got)) == pytest.approx(std, rel=0.1)
    assert std > 0.9 and np.quantile(got, 0.9) > 2.0  # one return in ten from beyond the crown's middle


def test_the_street_trees_crowns_are_leaves_at_the_street_trees_density() -> None:
    """add_tree's crown: about u V / a leaves in its ellipsoid, the same for the same draws, and it takes
    as many draws from the street's generator as the solid crown did (everything drawn after a tree stays
    where it was)."""
    b1, b2 = MeshBuilder(), MeshBuilder()
    rng1, rng2 = np.random.default_rng(7), np.random.default_rng(7)
    add_tree(b1, rng1)
    add_tree(b2, rng2)
    m1, m2 = b1.build("t", 1), b2.build("t", 1)
    assert np.array_equal(m1.vertices, m2.vertices)
    ref = np.random.default_rng(7)
    trunk_h, r = ref.uniform(2.2, 3.4), ref.uniform(1.4, 2.4)
    ref.uniform(0.14, 0.25)
    ref.uniform(-1.0, 1.0, size=(642, 1))  # the old crown's jitter draws
    assert rng1.uniform() == ref.uniform()
    leaf = m1.face_material == Scene(objects=[]).material_names.index("vegetation")
    leaves = int(np.sum(leaf))
    volume = 4.0 / 3.0 * np.pi * r * r * 1.1 * r
    assert leaves == pytest.approx(LEAF_AREA_DENSITY * volume / 0.01, rel=0.01)
    z = m1.vertices[m1.faces[leaf]].mean(axis=1)[:, 2]
    assert z.min() > trunk_h + 0.8 * r - 1.15 * 1.1 * r and z.max() < trunk_h + 0.8 * r + 1.15 * 1.1 * r


def _tree_scan(mode: str, sub_rays: int) -> np.ndarray:
    """One VLS-128 scan (1.8 m up) of a street tree 14 m aside with a plaster wall 8 m behind it."""
    names = list(Scene(objects=[]).material_names)
    tree = MeshBuilder()
    add_tree(tree, np.random.default_rng(11))
    wall = MeshBuilder()
    wall.box((0.0, 0.0, 6.0), (0.3, 30.0, 12.0), "building_plaster")
    scene = Scene(
        objects=[
            tree.build("tree", 4, StaticTrajectory(Pose.from_xyz_rpy(0.0, -14.0, 0.0))),
            wall.build("wall", 6, StaticTrajectory(Pose.from_xyz_rpy(0.0, -22.0, 0.0, yaw=np.pi / 2))),
        ],
        material_names=names,
        ego=StaticTrajectory(Pose.identity()),
        sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, 1.8),
    )
    cfg = PhysicsConfig(beam=BeamConfig(sub_rays=sub_rays, return_mode=mode))
    built = build_pipeline("VLS-128", scene, seed=4, physics=cfg)
    pts = built.pipeline.scans(1)[0].points
    built.pipeline.close()
    return pts


def test_dual_returns_inside_crowns() -> None:
    """With the beam's footprint sampled (7 sub-rays), dual mode reports second returns inside the crown:
    pulses whose two returns both come from leaves a pulse length or more apart, and many more that return
    from a leaf and from the wall through the crown's gaps; one ray a pulse gives neither."""
    pts = _tree_scan("dual", 7)
    first = pts[(pts["segment"] == 4) & (pts["return_id"] == 0)]
    leaf_leaf = pts[(pts["segment"] == 4) & (pts["return_id"] == 1)]
    leaf_wall = pts[(pts["segment"] == 6) & (pts["return_id"] == 1)]
    assert len(leaf_leaf) > 150 and len(leaf_wall) > 500
    assert (len(leaf_leaf) + len(leaf_wall)) / len(first) > 0.3
    r = np.hypot(first["x"], first["y"])
    assert np.quantile(r, 0.95) - np.quantile(r, 0.05) > 1.5  # returns through the crown's depth
    one = _tree_scan("dual", 1)
    assert not np.any(one["return_id"] == 1)
