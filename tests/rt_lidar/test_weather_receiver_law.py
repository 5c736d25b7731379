"""Issue 40: rain drops, snowflakes and the fog pass the preset's receiver range law g(R) as a wall's
echo does (:mod:`rt_lidar.physics.receiver_range`), so a two-figure preset's receiver treats a drop as
it treats a wall."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_lidar.kernels import weather as kw
from rt_lidar.kernels import weather_rays as wr
from rt_lidar.physics.receiver_focus import receiver_focus_gain
from rt_lidar.physics.receiver_range import range_exponent
from rt_lidar.physics.weather import WeatherConfig, WeatherModel, receiver_gain_law
from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.detection import datasheet_physics


@pytest.mark.parametrize("name", ["VLP-16", "HDL-64E", "OS1-64"])
def test_a_drop_just_at_the_threshold_returns_what_a_wall_of_its_cross_section_returns(name: str) -> None:
    """The smallest detectable drop at range z, as the weather kernels find it, returns exactly the
    threshold through the surfaces' own path factor (clear air times g(z))."""
    preset = load_preset(name)
    echo = datasheet_physics(preset, 0.1).echo
    prm = WeatherModel(WeatherConfig(rain_mm_h=10.0)).params(preset, preset.pulse.detection_threshold_w)
    n = range_exponent(preset)
    assert (prm.gain_exp, prm.gain_ref_m) == receiver_gain_law(preset)
    assert prm.gain_exp == pytest.approx(0.0 if n == 2.0 else 2.0 - n)
    rho, a0 = 0.05, echo.extinction_per_m
    beam = (prm.d0, prm.th_h, prm.th_v)
    for z in (3.0, 8.0, 20.0):
        zz = np.array([z])
        d_mm = float(kw.min_detectable_diameter_mm(zz, prm.k_sensor, rho, prm.threshold_w, a0, *beam, 0.0,
                                                     1e-6, prm.gain_exp, prm.gain_ref_m)[0])  # fmt: skip
        fill = (d_mm * 1e-3 / float(kw.beam_diameter(z, *beam))) ** 2
        # the receiver lens's focus (HDL-64E, rt_lidar.physics.receiver_focus) is not in the weather
        # kernels' power law: a wall's path factor without it
        focus = receiver_focus_gain(preset, zz)
        path = float(echo.path_factor(zz)[0]) / (1.0 if focus is None else float(focus[0]))
        wall = prm.k_sensor * rho * fill * path / (z * z)
        assert wall == pytest.approx(prm.threshold_w, rel=1e-4)


def test_the_hdl64e_receiver_sees_near_drops_brighter_and_the_os1_dimmer() -> None:
    """g(R) = (R / R10)^(2 - n): the HDL-64E's far echoes are weaker than 1/R^2 (n > 2: near drops relatively
    brighter, so more of them reach the threshold), the OS1-64's near echoes weaker (n < 2: fewer)."""
    counts = {}
    for name in ("HDL-64E", "OS1-64"):
        preset = load_preset(name)
        prm = WeatherModel(WeatherConfig(rain_mm_h=10.0)).params(preset, preset.pulse.detection_threshold_w)
        sp = prm.species[0]
        beam = (prm.d0, prm.th_h, prm.th_v)
        z = np.linspace(2.0, 10.0, 9)
        args = (z, prm.k_sensor, sp.rho, prm.threshold_w, prm.a_total, *beam, prm.r1, prm.r2)
        with_law = kw.min_detectable_diameter_mm(*args, prm.gain_exp, prm.gain_ref_m)
        without = kw.min_detectable_diameter_mm(*args)
        counts[name] = (np.asarray(with_law), np.asarray(without))
    hdl, os1 = counts["HDL-64E"], counts["OS1-64"]
    assert np.all(hdl[0] < hdl[1])  # a smaller drop suffices near an HDL-64E
    assert np.all(os1[0] > os1[1])


def test_clutter_points_report_power_through_the_law_and_reflectance_without_it() -> None:
    """Every clutter echo the kernel writes holds power = K S exp(-2 a z) g(z) / z^2 with S its effective
    reflectance (g divided out, as for a surface); the same seed gives the same bytes."""
    preset = load_preset("HDL-64E")
    # issue 40: an HDL-64E sees few drops, so flakes (5 mm/h) make the clutter
    prm = WeatherModel(WeatherConfig(rain_mm_h=25.0, snow_mm_h=5.0)).params(
        preset, preset.pulse.detection_threshold_w
    )
    assert prm.gain_exp < 0.0
    outs = []
    for _ in range(2):
        n = 200_000
        r = np.full(n, np.inf, np.float32)
        p, f, refl = np.zeros(n, np.float32), np.zeros(n, np.uint8), np.zeros(n, np.float32)
        wr.apply_weather(r, p, f, refl, prm, 11)
        outs.append((r.tobytes(), p.tobytes(), f.tobytes(), refl.tobytes()))
    assert outs[0] == outs[1]
    c = f != 0
    assert c.sum() > 50
    z = r[c].astype(np.float64)
    g = (z / prm.gain_ref_m) ** prm.gain_exp
    want = prm.k_sensor * refl[c] * np.exp(-2 * prm.a_total * z) * g / (z * z)
    # the range carries the precipitation's range noise after the power was computed at the drop
    assert np.median(np.abs(p[c] / want - 1)) < 0.02
    assert math.isfinite(float(refl[c].max()))
