"""Issue 40, items 3 and 6: raydrop in the right places. A car's cabin (``car_interior``) behind its
glazing returns the rays that enter a parked car's windows, as the typical KITTI frame's near cars do
(change 55; fitted to frame 000008 before, changes 21-24, they came back weak or not at all); red brick
is fired clay, bright in the near infrared (docs/realism.md, changes 20-21)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_street_cars import MOUNT_Z, _car_points

from rt_lidar.api import in_process_pipeline
from rt_lidar.config import RunConfig
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.receiver_focus import hard_target_share, receiver_focus_gain
from rt_lidar.physics.receiver_range import range_exponent, receiver_range_gain
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.unreal_bridge.world import Pose, Scene
from rt_lidar.unreal_bridge.world.geometry import MeshBuilder
from rt_lidar.unreal_bridge.world.props import add_car
from rt_lidar.validation.real_formats import read_real_scan
from rt_lidar.validation.real_frames import shared_real_dir


def _diffuse_905(*names: str) -> np.ndarray:
    return np.asarray(load_material_table().arrays(list(names), 905.0).diffuse)


def test_red_brick_is_bright_in_the_near_infrared() -> None:
    """Fired red clay reflects 0.3-0.5 at 905 nm (was an asphalt shingle's 0.07), darker than plaster
    (hemispherical reflectance: brick and render take Hapke's rough-surface lobes from it, change 32)."""
    table = load_material_table()
    brick, plaster, shingle_like = (
        table.reflectance(n, 905.0) for n in ("brick", "building_plaster", "asphalt")
    )
    assert 0.3 < brick < 0.5
    assert brick < plaster
    assert brick > shingle_like


def test_the_cabin_is_the_fitted_average_trim_brighter_than_black_paint() -> None:
    """Seats, dashboard and floor are ``car_interior``: 0.3, fitted to the typical KITTI frame (change 55),
    between black paint's carbon-black base (PPG's 6 % of white) and white paint, darker than the
    rooms behind building windows (``interior``, 0.5 since change 76)."""
    cabin, black, rooms, white = _diffuse_905(
        "car_interior", "car_paint_black", "interior", "car_paint_white"
    )
    assert black < cabin < rooms < white
    names = list(Scene(objects=[]).material_names)
    b = MeshBuilder(names)
    add_car(b, "car_paint_white")
    used = {names[m] for m in np.unique(b.build("car", 1).face_material)}
    assert "car_interior" in used and "interior" not in used


@pytest.mark.parametrize("ahead_m", [10.0, 14.0])
def test_a_parked_cars_cabin_returns_through_its_glazing_beyond_ten_metres(ahead_m: float) -> None:
    """A white car parked 3 m aside: its body and what lies inside its cabin return with intensity, as
    the typical KITTI frame's near cars do (thirteen frames' near objects drop a median 1.7 % of their
    rays, change 55). Fitted to frame 000008 (cabin 0.02, glazing 0.5 one way), the cabin returned 14-116
    points here, 86-100 % of them reading 0; now 374 and 177, 1-2 % zeros."""
    pose = Pose.from_xyz_rpy(ahead_m, -3.0, 0.0)
    p = _car_points("car_paint_white", pose)
    z = p["z"] + MOUNT_Z
    cabin = (z > 0.97) & (z < 1.36) & (np.abs(p["y"] + 3.0) < 0.78) & (np.abs(p["x"] - ahead_m) < 1.9)
    body = (z > 0.35) & (z < 0.9)
    assert body.sum() > 300 and np.mean(p["intensity"][body] == 0) < 0.1
    assert cabin.sum() > 150
    assert np.mean(p["intensity"][cabin] == 0) < 0.2


def test_the_s2s_receiver_loses_near_echoes_out_of_its_focus() -> None:
    """The HDL-64E's receiver lens is focused at 15 m (its S3 calibration's upper block): a near echo
    blurs on the detector and its image moves off it (the rain receiver's field and baseline, change 57:
    the share traced in ``test_receiver_field_focus.py``); nothing changes beyond ~8.5 m, so the
    datasheet's 50 m and 120 m figures hold; presets without a focus or a near field keep their bytes."""
    preset = load_preset("HDL-64E")
    r = np.array([4.0, 6.0, 8.0, 10.0, 15.0, 50.0, 120.0], np.float32)
    eta = receiver_focus_gain(preset, r)
    assert eta is not None
    assert np.all(np.diff(eta) >= 0.0) and 0.15 < eta[0] < 0.3 and eta[2] > 0.9 and np.all(eta[4:] == 1.0)
    g = receiver_range_gain(preset, r)
    assert g is not None
    n = range_exponent(preset)
    np.testing.assert_allclose(g / eta, (r / 50.0) ** (2.0 - n), rtol=1e-5)
    assert receiver_focus_gain(load_preset("AT128"), r) is None  # neither a focus nor a near field
    assert receiver_range_gain(load_preset("AT128"), r) is None


def test_calibrated_reflectivity_divides_the_focus_out_and_detection_keeps_it() -> None:
    """A white target at 6 m reads the same calibrated reflectivity with and without the focus (the
    drivers' focal compensation), while its echo is the receiver's share of the unfocused one (0.63)."""
    preset = load_preset("HDL-64E")
    unfocused = dataclasses.replace(preset, optics=dataclasses.replace(preset.optics, receiver_focus_m=None))
    arrays = load_material_table().arrays(["car_paint_white"], 905.0)
    r, cos, mat, t = (
        np.array([v], dtype)
        for v, dtype in ((6.0, np.float32), (1.0, np.float32), (0, np.int16), (1.0, np.float32))
    )
    p_f, _ = EchoModel(preset, arrays).power(r, cos, mat, t)
    p_u, _ = EchoModel(unfocused, arrays).power(r, cos, mat, t)
    assert p_f[0] / p_u[0] == pytest.approx(
        float(hard_target_share(preset, 15.0, np.array([6.0]))[0]), rel=1e-3
    )
    refl_f = EchoModel(preset, arrays).measured_reflectivity(p_f, r)
    refl_u = EchoModel(unfocused, arrays).measured_reflectivity(p_u, r)
    assert refl_f[0] == pytest.approx(refl_u[0], rel=1e-5)


def test_the_device_frame_carries_the_focus_as_the_host_does() -> None:
    """``--device`` (its CPU twin here, CuPy where a GPU is) applies the focus in its own path factor: an
    HDL-64E street scan has the host's points within 0.5 % (without it, 8 % more near returns)."""
    counts = []
    for device in ("cpu", "cuda-source-on-cpu"):
        config = RunConfig(preset="HDL-64E", seed=1, in_process=True, device=device)
        built = in_process_pipeline(config, load_preset("HDL-64E"))
        try:
            counts.append(built.pipeline.scans(1)[0].points.size)
        finally:
            built.pipeline.close()
    assert counts[1] == pytest.approx(counts[0], rel=0.005)


def test_kittis_s2_reads_zero_inside_near_cars_not_on_the_near_road() -> None:
    """What change 24 is checked against (KITTI frame 000008, ring by ring): the upper block's returns
    within 7.5 m (car windows and cabins) read 0 for most of them, beyond 10 m almost none do, and the
    lower block's road at 4-10 m reads values."""
    root = shared_real_dir()
    path = None if root is None else root / "kitti_000008" / "velodyne_000008.bin"
    if path is None or not path.exists():
        pytest.skip("no KITTI frame in ../shared/reference/real")
    g = read_real_scan(path, "HDL-64E")
    ret = g.returned & g.in_view
    elev = np.degrees(np.arcsin(np.clip(g.direction[..., 2], -1.0, 1.0)))
    upper = elev > -8.7
    zero = g.intensity == 0
    z = g.range_m * g.direction[..., 2]
    near_upper = ret & upper & (g.range_m < 7.5)
    far_upper = ret & upper & (g.range_m >= 10.0) & (g.range_m < 15.0)
    near_road = ret & ~upper & (g.range_m >= 4.0) & (g.range_m < 10.0) & (z < -1.5)
    assert near_upper.sum() > 1000 and zero[near_upper].mean() > 0.7
    assert zero[far_upper].mean() < 0.1
    assert near_road.sum() > 1000 and zero[near_road].mean() < 0.02
