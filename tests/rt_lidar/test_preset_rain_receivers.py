"""Every preset's rain receiver (issue 40 item 4): the particle receiver honours the lens's focus
(``optics.receiver_focus_m``), and each preset's open-sky rain rate stays near the VLP-16's calibrated one
(no other sensor's rate is published; docs/rain.md, "Every preset's receiver")."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import rt_lidar.validation.clutter_calibration as cc
from rt_lidar.physics import particle_receiver as pr
from rt_lidar.physics.ambient_threshold import preset_at_ambient
from rt_lidar.physics.weather import receiver_optics
from rt_lidar.sensor.presets import list_presets, load_preset

AP, FOV = 0.05, 5e-3


def _traced_fraction(s: float, z: float, focus: float, n: int = 400_000) -> float:
    """The share of a point's light (at range ``z``, ``s`` off the receiver's axis) that reaches the
    detector, by tracing rays: each from the point through a uniform point of the aperture, carried on
    to the plane the lens is focused at, reaches the detector when it lands within ``FOV F / 2`` of the
    axis (the detector's conjugate there)."""
    rng = np.random.default_rng(3)
    r = AP / 2 * np.sqrt(rng.random(n))
    t = rng.random(n) * 2 * np.pi
    ax, ay = r * np.cos(t), r * np.sin(t)
    qx = ax + (s - ax) * focus / z  # the line from (ax, ay, 0) through (s, 0, z), at range F
    qy = ay - ay * focus / z
    return float(np.mean(np.hypot(qx, qy) <= FOV * focus / 2))


@pytest.mark.parametrize(("s", "z"), [(0.0, 2.0), (0.03, 2.0), (0.03, 6.0), (0.02, 25.0), (0.045, 4.0)])
def test_a_focused_receiver_collects_what_a_traced_ray_bundle_collects(s: float, z: float) -> None:
    got = float(pr.collected_fraction(np.array([s]), z, AP, FOV, 15.0)[0])
    assert got == pytest.approx(_traced_fraction(s, z, 15.0), abs=4e-3)


def test_focus_at_infinity_is_the_old_receiver_and_a_point_at_focus_is_imaged_sharp() -> None:
    s = np.linspace(0.0, 0.05, 26)
    far = pr.collected_fraction(s, 3.0, AP, FOV, 1e9)
    assert far == pytest.approx(pr.collected_fraction(s, 3.0, AP, FOV), abs=1e-6)
    # at the focus a point inside the field gives all its light, one outside none
    assert pr.collected_fraction(np.array([0.0, 0.9 * FOV * 7.5]), 15.0, AP, FOV, 15.0) == pytest.approx(1.0)
    assert pr.collected_fraction(np.array([1.1 * FOV * 7.5]), 15.0, AP, FOV, 15.0)[0] == 0.0
    # on the axis a near point's blur is (F - z) / F of the infinity-focused one: more of it collected
    z = 2.0
    on_axis = pr.collected_fraction(np.array([0.0]), z, AP, FOV, 15.0)[0]
    assert on_axis == pytest.approx((FOV * z * 15.0 / ((15.0 - z) * AP)) ** 2, rel=1e-6)


def test_the_hdl64es_rain_table_uses_its_lens_focus() -> None:
    """The HDL-64E's lens is focused at 15 m (change 24): its particle receiver takes that focus, and the
    near field it gives differs from one focused at infinity (the baseline's parallax grows by F / (F -
    z))."""
    preset = load_preset("HDL-64E")
    rx = receiver_optics(preset)
    assert rx.focus_m == pytest.approx(15.0)
    assert receiver_optics(load_preset("VLP-16")).focus_m is None
    optics = dataclasses.replace(preset.optics, receiver_focus_m=None)
    at_infinity = dataclasses.replace(preset, optics=optics)
    p_focus, _ = cc.rain_clutter_expectation(preset, 10.0)
    p_inf, _ = cc.rain_clutter_expectation(at_infinity, 10.0)
    assert p_focus > 0 and p_inf > 0
    assert abs(p_focus / p_inf - 1.0) > 0.2, (p_focus, p_inf)


@pytest.mark.parametrize(("rate", "tolerance"), [(10.0, 1.35), (25.0, 2.0)])
def test_every_presets_open_sky_rain_is_near_the_vlp16s_calibrated_rate(
    rate: float, tolerance: float
) -> None:
    """Open-sky rain per beam (the kernels' table, at the threshold of a scene without sun, the default:
    the datasheet's, but for the OS1-64 and OS1-128 whose thresholds follow the ambient light) over
    Linnhoff et al.'s VLP-16 rate, every preset: within 1.35x at 10 mm/h (each assumed field was fitted
    there alone, within 1.1x; since change 61 the Cube 1's, Scala Gen2's, OS1-64's, HDL-32E's and
    VLP-32C's are fitted over 1-25 mm/h, 0.80-1.06x here; before change 25: < 0.01x on the HDL-64E to 38x
    on the Cube 1 and ~44x on the OS1-64), and within 2x
    at 25 mm/h (now 1.2-1.6x; 1.9x on the AT128 and Pandar64 before change 33 fitted their exit beams),
    and the presets within ``tolerance`` of each other. The chamber studies (LIBRE, DENSE) show every
    one of these sensors seeing rain near it, and none publishes a per-sensor rate to spread them."""
    got = {}
    for name in list_presets():
        p, _ = cc.rain_clutter_expectation(preset_at_ambient(load_preset(name), 0.0), rate)
        got[name] = p / (cc.LINNHOFF_RAIN_P_PER_MM_H * rate)
    assert all(1 / tolerance < r < tolerance for r in got.values()), got
    assert max(got.values()) / min(got.values()) < tolerance, got


def test_every_presets_open_sky_rain_grows_about_as_the_rain_rate() -> None:
    """Open-sky rain per beam grows between R^0.8 and R^1.2 from 1 to 25 mm/h on every preset (Linnhoff
    et al.'s calibrated VLP-16 rate grows as R^1; the VLP-16's own receiver gives R^1.03). Before the
    baseline was fitted with the field (change 33) the narrow beams of the AT128 and Pandar64 saw only
    the big drops 4-19 m off, whose number grows as R^1.9-2.0, and the OS1-128's wide field mostly the
    small near drops (R^0.73)."""
    growth = {}
    for name in list_presets():
        preset = preset_at_ambient(load_preset(name), 0.0)
        low, _ = cc.rain_clutter_expectation(preset, 1.0)
        high, _ = cc.rain_clutter_expectation(preset, 25.0)
        growth[name] = float(np.log(high / low) / np.log(25.0))
    assert all(0.8 < g < 1.2 for g in growth.values()), growth


@pytest.mark.parametrize("name", [n for n in list_presets() if n != "VLP-16"])
def test_each_fitted_field_says_what_it_is_fitted_to(name: str) -> None:
    prov = (load_preset(name).provenance or {})["optics.receiver_fov_mrad"]
    assert prov.startswith("fit") and "Linnhoff" in prov and "docs/rain.md" in prov


def test_every_presets_measured_open_sky_rain_follows_linnhoff_within_1_5x_at_every_rate() -> None:
    """Issue 40 item 4 (change 61): every preset's rain points per open-sky beam in strongest mode,
    measured through the whole physics stage with enough beams for ~600 points at Linnhoff et al.'s
    rate (the Monte Carlo's error ~4 %), within 1.5x of their calibrated VLP-16 rate at 1 / 2.5 / 5 /
    10 / 15 / 25 mm/h, and growing with the rate at every step as theirs does. Before, with the fields
    fitted at 10 mm/h alone, the Cube 1 read 1.87x and the Scala Gen2 1.85x at 1 mm/h (their rain points
    there 97 % glory spheres under 0.5 mm) and the VLP-32C 0.66x at 2.5 mm/h; the HDL-64E's 1.54x at 1
    mm/h was 100,000 beams' Monte Carlo error (~17 points; 1.10x here)."""
    got = {name: cc.open_sky_rain_ratios(load_preset(name)) for name in list_presets()}
    out = {n: r for n, r in got.items() if not all(1 / 1.5 < x < 1.5 for x in r)}
    assert not out, out
    for name, ratios in got.items():
        per_beam = [x * rate for x, rate in zip(ratios, cc.FIT_RAIN_MM_H, strict=True)]
        assert all(b > a for a, b in itertools.pairwise(per_beam)), (name, per_beam)
