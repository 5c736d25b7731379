"""One receiver for hard targets and rain (docs/realism.md change 57): the HDL-64E's near-field share of a
hard target's echo is the rain receiver's (its fitted field, its baseline, its lens focused at 15 m)
averaged over the beam's spot, read from a table alike on NumPy, the compiled twin and CuPy."""

from __future__ import annotations

import dataclasses
import importlib.util
import math

import numpy as np
import pytest

from rt_lidar.physics import path_factor_fused
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.receiver_focus import (
    TABLE_POINTS,
    beam_focus_ratio,
    beam_focus_table,
    focus_gain,
    focus_parameters,
    hard_target_share,
    receiver_focus_gain,
)
from rt_lidar.physics.weather import receiver_optics
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset


def _traced_share(z: float, n_spot: int = 4000, n_aperture: int = 4000, seed: int = 5) -> float:
    """The HDL-64E's hard-target share at range ``z`` by tracing rays: points of the Gaussian spot (1/e^2
    diameter ``d0 + theta z``, cut at 1.6 of its radius as the tables' beam) a baseline off the receiver's
    axis, each to points of the aperture, carried on to the focus plane, kept inside the field's disc."""
    p = load_preset("HDL-64E")
    rx = receiver_optics(p)
    assert rx.focus_m is not None
    rng = np.random.default_rng(seed)
    w = (rx.exit_diameter_m + rx.divergence_h_rad * z) / 2.0  # 1/e^2 radius (the divergences are equal)
    sx, sy = rng.normal(0.0, w / 2.0, (2, n_spot * 3))
    keep = np.hypot(sx, sy) <= 1.6 * w
    sx, sy = sx[keep][:n_spot] + rx.baseline_m, sy[keep][:n_spot]
    rad = rx.aperture_m / 2.0 * np.sqrt(rng.uniform(0.0, 1.0, n_aperture))
    ang = rng.uniform(0.0, 2.0 * math.pi, n_aperture)
    ax, ay = rad * np.cos(ang), rad * np.sin(ang)
    k = rx.focus_m / z  # the ray from the spot point through the aperture point, at the focus distance
    qx = ax[None, :] + (sx[:, None] - ax[None, :]) * k
    qy = ay[None, :] + (sy[:, None] - ay[None, :]) * k
    return float(np.mean(np.hypot(qx, qy) <= rx.fov_rad * rx.focus_m / 2.0))


@pytest.mark.parametrize("z", [3.0, 4.0, 6.0, 7.0, 8.0])
def test_the_hard_target_share_is_what_traced_rays_through_the_rain_receiver_collect(z: float) -> None:
    eta = receiver_focus_gain(load_preset("HDL-64E"), np.array([z], np.float32))
    assert eta is not None
    assert float(eta[0]) == pytest.approx(_traced_share(z), abs=0.02)


def test_the_s2s_near_field_is_its_rain_receivers_not_a_detector_the_size_of_its_beam() -> None:
    """0.2 at 4 m, 0.6 at 6 m, 0.98 at 8.5 m, whole from ~10 m on (the 2 mrad detector of change 24:
    0.045, 0.14, and 0.59 at 10 m); nothing changes beyond, so the datasheet's 50 m and 120 m figures
    hold."""
    p = load_preset("HDL-64E")
    r = np.array([4.0, 6.0, 8.0, 8.5, 10.0, 15.0, 50.0, 120.0], np.float32)
    eta = receiver_focus_gain(p, r)
    assert eta is not None
    assert 0.15 < eta[0] < 0.3 and 0.5 < eta[1] < 0.75 and eta[2] > 0.9
    assert eta[3] > 0.98 and eta[4] > 0.999 and np.all(eta[5:] == 1.0)
    spot_sized = dataclasses.replace(p, optics=dataclasses.replace(p.optics, receiver_fov_mrad=2.0))
    narrow = hard_target_share(spot_sized, 15.0, np.array([6.0, 10.0]))
    assert narrow[0] < 0.1 * eta[1] and narrow[1] < 0.5  # one field decides both: narrower loses more


def test_a_near_dark_target_keeps_its_calibrated_reading_and_loses_echo_by_the_share() -> None:
    """Black paint (PPG's 6 %) at 4 / 6 / 10 m: the echo is the share of the unfocused receiver's
    (detection sees it), calibrated reflectivity divides it out (the drivers' focal compensation)."""
    p = load_preset("HDL-64E")
    unfocused = dataclasses.replace(p, optics=dataclasses.replace(p.optics, receiver_focus_m=None))
    arrays = load_material_table().arrays(["car_paint_black"], 905.0)
    r = np.array([4.0, 6.0, 10.0], np.float32)
    cos, mat, t = np.ones(3, np.float32), np.zeros(3, np.int16), np.ones(3, np.float32)
    p_f, _ = EchoModel(p, arrays).power(r, cos, mat, t)
    p_u, _ = EchoModel(unfocused, arrays).power(r, cos, mat, t)
    np.testing.assert_allclose(p_f / p_u, hard_target_share(p, 15.0, r.astype(float)), rtol=2e-3)
    assert p_f[2] == pytest.approx(p_u[2], rel=1e-3)  # whole at 10 m (0.9997)
    refl_f = EchoModel(p, arrays).measured_reflectivity(p_f, r)
    refl_u = EchoModel(unfocused, arrays).measured_reflectivity(p_u, r)
    np.testing.assert_allclose(refl_f, refl_u, rtol=1e-5)


_XPS = ["numpy"] + (["cupy"] if importlib.util.find_spec("cupy") is not None else [])


@pytest.mark.parametrize("xp_name", _XPS)
def test_every_backend_reads_the_tables_to_the_same_bits(xp_name: str) -> None:
    """NumPy and CuPy (the device frame's path, where a GPU is) give the bytes of the host's NumPy code,
    and the compiled twin gives them too (``test_path_factor_fused.py`` holds the whole path factor)."""
    if xp_name == "cupy":
        cp = pytest.importorskip("cupy")
        try:
            cp.cuda.runtime.getDeviceCount()
        except Exception:  # no CUDA device
            pytest.skip("CuPy with a CUDA device is not available")
        xp = cp
    else:
        xp = np
    p = load_preset("HDL-64E")
    rng = np.random.default_rng(2)
    r = np.concatenate([rng.uniform(0.0, 20.0, 5000), [0.0, -1.0, np.inf, np.nan, 1e30]]).astype(np.float32)
    ring = rng.integers(0, 64, r.size).astype(np.uint16)
    wide, beams = focus_parameters(p), beam_focus_table(p)
    assert wide is not None and beams is not None
    host = np.asarray(focus_gain(np, r, wide), np.float32)
    dev = focus_gain(xp, xp.asarray(r), wide, xp.asarray(wide.table)).astype(xp.float32)
    assert np.asarray(dev.get() if xp is not np else dev).tobytes() == host.tobytes()
    host_b = np.asarray(beam_focus_ratio(np, p, beams.table, ring, r), np.float32)
    dev_b = beam_focus_ratio(xp, p, xp.asarray(beams.table), xp.asarray(ring), xp.asarray(r)).astype(
        xp.float32
    )
    assert np.asarray(dev_b.get() if xp is not np else dev_b).tobytes() == host_b.tobytes()
    twin = path_factor_fused.beam_focus(p, beams.table, ring, r)
    if twin is not None:
        assert twin.tobytes() == host_b.tobytes()


def test_rain_sees_the_receiver_the_hard_targets_see() -> None:
    """The rain tables' receiver and the hard targets' are one: the share is whole from a little beyond
    the range where the rain receiver takes an on-axis point whole (7.34 m), the spot's edge last."""
    from rt_lidar.physics.weather import particle_full_overlap_m

    p = load_preset("HDL-64E")
    full = particle_full_overlap_m(receiver_optics(p))
    eta = hard_target_share(p, 15.0, np.array([0.8 * full, full, 1.2 * full, 1.5 * full]))
    assert eta[0] < 0.8 < eta[1] < eta[2] < 1.0 and eta[2] > 0.98 and eta[3] == 1.0


def test_the_physics_builds_the_focus_tables_before_its_first_frame() -> None:
    # the tables take ~1 s for the HDL-64E: built when the physics is made, not inside frame 0's budget
    from rt_lidar.physics.model import SensorPhysics

    preset = dataclasses.replace(load_preset("HDL-64E"), name="HDL-64E (focus tables test)")
    focus_parameters.cache_clear()
    beam_focus_table.cache_clear()
    SensorPhysics.from_preset(preset, ["asphalt"])
    assert focus_parameters.cache_info().currsize == 1
    assert beam_focus_table.cache_info().currsize == 1
    tables = focus_parameters(preset), beam_focus_table(preset)  # now read from the cache
    assert focus_parameters.cache_info().hits >= 1 and beam_focus_table.cache_info().hits >= 1
    assert all(t is not None and t.table.size >= TABLE_POINTS for t in tables)


def test_a_laser_focused_nearer_than_its_receiver_ever_collects_loses_echoes_only_near() -> None:
    # a calibration's focal_distance of 1.5-4 m (an S2.1 unit's file): through the rain receiver the
    # share never reaches 1 at any range (0.13 at 400 m for 1.5 m), which raised IndexError building the
    # table; it is taken over its peak, so such a laser loses echoes nearer than the peak, not far away
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "vendor" / "velodyne" / "64e_s2.1-sztaki.yaml"
    preset = load_preset(str(path))
    near = [
        k for k, b in enumerate(preset.beams) if b.receiver_focus_m is not None and b.receiver_focus_m <= 2.0
    ]
    assert near, "the file has a laser focused within 2 m"
    assert hard_target_share(preset, 1.5, np.array([400.0]))[0] < 0.2  # the receiver's own share, far
    table = beam_focus_table(preset)
    assert table is not None
    ring = np.full(4, near[0])
    ratio = np.asarray(beam_focus_ratio(np, preset, table.table, ring, np.array([1.0, 2.0, 60.0, 200.0])))
    assert ratio[2] == pytest.approx(1.0) and ratio[3] == pytest.approx(1.0)  # far: as the preset's focus
    assert 0.0 < ratio[0] < ratio[1] <= 1.0
