"""The street's residential layout (issue 40, docs/realism.md change 30): cars parked nose to tail close
to the lane on both sides, where KITTI's frame 000008 has them; the demo's street unchanged."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from rt_lidar.unreal_bridge.world import WorldError
from rt_lidar.unreal_bridge.world.props import CAR_LENGTH, CAR_WIDTH
from rt_lidar.unreal_bridge.world.scene import Scene
from rt_lidar.unreal_bridge.world.street import RESIDENTIAL, street_scene

DEMO_DIGESTS = {
    0: "e5d07c93a635797eda15a77211df7cb77941da6d6206f11ebdf10a75d22f56f2",
    1: "3d8d5b299aa71641dd77a44f09a7d0034a60af56907d1fb5bbbcb99310937aab",
}
"""The default street's layout as built by main 1b98db3 (before the layouts), by :func:`_digest`. The
scans' bytes are checked by ``tools/scan_hashes.py compare``; this checks the layout alone, so that new
props' shapes or paints (issue 40's other changes) do not move it."""


def _digest(scene: Scene) -> str:
    """Names and poses (t = 0 and 0.7 s, to the micrometre) of every object but the trees and rocks
    (whose shapes draw from the street's generator before their poses), and the ego's."""
    h = hashlib.sha256()
    for o in scene.objects:
        if o.name.startswith(("tree_", "rock_")):
            continue
        h.update(o.name.encode())
        for t in (0.0, 0.7):
            h.update(np.round(o.trajectory.pose_at(t).matrix(), 6).tobytes())
    for t in (0.0, 0.7):
        h.update(np.round(scene.ego.pose_at(t).matrix(), 6).tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("seed", [0, 1])
def test_the_demo_street_is_unchanged(seed: int) -> None:
    assert _digest(street_scene(seed=seed)) == DEMO_DIGESTS[seed]
    assert _digest(street_scene(seed=seed, layout="demo")) == DEMO_DIGESTS[seed]


def _parked(scene: Scene, side: str) -> list[np.ndarray]:
    objs = [o for o in scene.objects if o.name.startswith(f"car_parked_{side}_")]
    return [o.trajectory.pose_at(0.0).position for o in objs]


def test_residential_cars_are_parked_nose_to_tail_where_kitti_has_them() -> None:
    scene = street_scene(seed=1, layout="residential")
    ego = scene.ego.pose_at(0.0).position
    assert ego[1] == pytest.approx(RESIDENTIAL.ego_y)
    for side, gap, sign in (("left", 2.0, 1.0), ("right", 3.3, -1.0)):
        pos = np.array(_parked(scene, side))
        assert len(pos) > 40  # a row along the whole street
        # the inner side of every car lies `gap` beside the sensor's path (KITTI: 2.06 m left, 3.32 m right)
        inner = np.abs(pos[:, 1] - ego[1]) - CAR_WIDTH / 2
        np.testing.assert_allclose(inner, gap, atol=1e-6)
        assert np.all(np.sign(pos[:, 1] - ego[1]) == sign)
        bumpers = np.diff(np.sort(pos[:, 0])) - CAR_LENGTH
        assert bumpers.min() >= 0.5 and bumpers.max() <= 1.2
    # both rows along the kerbs (0.2 m inside them), which close the narrower street; no lane markings
    for side in ("left", "right"):
        outer = np.abs(np.array(_parked(scene, side))[:, 1]) + CAR_WIDTH / 2
        np.testing.assert_allclose(outer, RESIDENTIAL.kerb_y - 0.2, atol=1e-6)
        kerb = next(o for o in scene.objects if o.name == f"sidewalk_{side}")
        assert np.abs(kerb.vertices[:, 1]).min() == pytest.approx(RESIDENTIAL.kerb_y, abs=1e-4)
    assert not any(o.name == "lane_markings" for o in scene.objects)
    # no pulling-out or oncoming car; one car ahead in the lane, 14 m on, keeping the ego's pace
    moving = [o for o in scene.objects if o.name.startswith("car_moving_")]
    assert [o.name for o in moving] == ["car_moving_0"]
    for t in (0.0, 1.0):
        ahead = moving[0].trajectory.pose_at(t).position - scene.ego.pose_at(t).position
        np.testing.assert_allclose(ahead, (14.0, 0.0, 0.0), atol=1e-9)


def test_residential_view_is_filled_by_near_cars() -> None:
    """Rays straight to the left at the body's height, every 0.5 m over 30 m of the ego's path (behind
    the car ahead), meet a parked car 2 m off wherever no bumper gap is (at least 4.5 of every 5.7 m) on
    the residential street, and none within 2.5 m on the demo street (its left row is 5.45 m off)."""
    from rt_lidar.unreal_bridge.world import World

    for layout, near in (("residential", True), ("demo", False)):
        scene = street_scene(seed=1, layout=layout)
        world = World(scene)
        origin = scene.ego.pose_at(0.0).position + np.array([0.0, 0.0, 0.6])
        origins = origin + np.stack([np.arange(-20.0, 10.0, 0.5), np.zeros(60), np.zeros(60)], -1)
        r = np.asarray(world.cast(origins, np.tile([0.0, 1.0, 0.0], (60, 1)), 0.0).distance)
        share = np.count_nonzero(r < 2.5) / r.size
        if near:
            assert share >= 0.75
            np.testing.assert_allclose(np.min(r), 2.0, atol=0.02)  # the chrome strip: 1 cm proud
        else:
            assert share == 0.0


def test_unknown_layout_is_refused() -> None:
    with pytest.raises(WorldError, match="residential"):
        street_scene(layout="suburb")
