"""``--beam full``'s retro reason: the edge of retro-reflective sheeting calls for the bundle, the edge of a
road marking does not (its beads keep it below a white target at a road's grazing incidence: an albedo
step, :data:`rt_lidar.pipeline.beam_full.RETRO_GAIN_MIN`)."""

from __future__ import annotations

import numpy as np
from beam_setup import full_beam_source, world_arrays

from rt_lidar.pipeline.beam_full import central_rays, neighbour_marks
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge.world import MeshObject, Pose, Scene, StaticTrajectory, World

_GROUND_Z = -1.73


def _quad(name: str, corners: list[list[float]], material: int, seg: int) -> MeshObject:
    v = np.asarray(corners, np.float32)
    f = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    return MeshObject(name, v, f, np.full(2, material, np.int16), seg)


def _road_with_a_marking_and_a_sign() -> Scene:
    """A road of asphalt ahead (x > 0) with a lane marking along it (|y| < 0.15 m, the same surface) and a
    sign of retro-reflective sheeting standing on the left (y 4-5 m, 12 m ahead)."""
    names = list(Scene(objects=[]).material_names)
    asphalt, paint, sheeting = (names.index(n) for n in ("asphalt", "lane_paint", "sign_sheeting"))
    z = _GROUND_Z
    objs = [
        _quad("road_right", [[0, -20, z], [60, -20, z], [60, -0.15, z], [0, -0.15, z]], asphalt, 1),
        _quad("marking", [[0, -0.15, z], [60, -0.15, z], [60, 0.15, z], [0, 0.15, z]], paint, 1),
        _quad("road_left", [[0, 0.15, z], [60, 0.15, z], [60, 20, z], [0, 20, z]], asphalt, 1),
        _quad("sign", [[12, 4, -0.5], [12, 5, -0.5], [12, 5, 0.5], [12, 4, 0.5]], sheeting, 2),
    ]
    return Scene(objects=objs, ego=StaticTrajectory(Pose.identity()), sensor_mount=Pose.identity())


def test_a_marking_edge_is_no_retro_reason_but_a_signs_edge_is() -> None:
    preset = load_preset("HDL-64E")
    world = World(_road_with_a_marking_and_a_sign())
    source, plan = full_beam_source(preset, world)
    names = list(world.material_names)
    paint, sheeting = names.index("lane_paint"), names.index("sign_sheeting")
    assert world_arrays(preset, world).retro_gain[paint] > 1.0  # the beads do have a retro lobe
    assert plan.retro[sheeting] and not plan.retro[paint]

    f = firings_between(preset, 0, 100_000_000)
    central = source.hits(f, 0, 100_000_000)
    marks = neighbour_marks(f, *central_rays(central, plan), plan)
    hit = np.isfinite(central.range_m)
    on_paint = hit & (central.material == paint)
    on_sign = hit & (central.material == sheeting)
    assert on_paint.sum() > 20 and on_sign.sum() > 5  # the rays do meet both
    assert marks["retro"][on_sign].any()  # the sign's rim pulses: a retro-reflector's edge
    assert not marks["retro"][on_paint].any()  # the marking's edge: an albedo step, no bundle for it
