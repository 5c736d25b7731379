"""Issue 40: a metallic paint behind its clear coat (rt_lidar.physics.clear_coat.paint_factor): its flakes'
mirror lobe, seen at the beam's angle refracted into the coat, makes it brighter than a solid paint near
normal incidence and about half a Lambertian surface beyond ~25 deg; solid paints keep the coat alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_lidar.physics.clear_coat import coat_factor, paint_factor
from rt_lidar.physics.model import SensorPhysics
from rt_lidar.sensor.glazing import TABLE_STEPS
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import load_preset
from rt_lidar.unreal_bridge.world import Scene
from rt_lidar.unreal_bridge.world.street import PAINT_SHARES, PAINTS

NAMES = list(Scene(objects=[]).material_names)


def _deg(a: float) -> float:
    return math.cos(math.radians(a))


def test_flakes_answer_where_they_face_the_refracted_beam() -> None:
    """Head-on the factor is 1; a solid paint (no flakes) keeps the coat's factor exactly; with half the
    head-on echo from flakes of RMS slope 0.25, at 10 deg the paint keeps more than 0.9, at 20 deg
    about three quarters (the refracted 13 deg: exp(-tan^2 / m^2) = 0.42), beyond 40 deg the base's
    half of the coat's factor."""
    cos = np.cos(np.radians([0.0, 10.0, 20.0, 40.0, 60.0, 80.0]))
    solid = paint_factor(cos, 1.5)
    np.testing.assert_array_equal(solid, coat_factor(cos, 1.5))
    metal = paint_factor(cos, 1.5, 0.5, 0.25)
    assert metal[0] == pytest.approx(1.0)
    assert metal[1] > 0.9
    t = math.asin(math.sin(math.radians(20.0)) / 1.5)
    want20 = coat_factor(_deg(20.0), 1.5) * (
        0.5 + 0.5 * math.exp(-(math.tan(t) ** 2) / 0.0625) / math.cos(t) ** 6
    )
    assert metal[2] == pytest.approx(want20, rel=1e-9) and 0.7 < metal[2] < 0.8
    np.testing.assert_allclose(metal[3:], 0.5 * coat_factor(cos[3:], 1.5), rtol=0.06)
    assert np.all(np.diff(metal) < 0)
    # narrower flakes, narrower lobe
    assert paint_factor(_deg(15.0), 1.5, 0.5, 0.1) < paint_factor(_deg(15.0), 1.5, 0.5, 0.25)


def test_the_silver_paints_echo_follows_its_flakes_and_the_others_are_as_before() -> None:
    """EchoModel.power: the silver paint's echo over its Lambertian base normalised head-on is its
    paint_factor (the table's nearest entry), the other paints' the coat's factor, as before."""
    echo = SensorPhysics.from_preset(load_preset("HDL-64E"), NAMES).echo
    m = echo.materials
    assert m.flake_share is not None and m.flake_slope_rms is not None
    cos = np.cos(np.radians([5.0, 20.0, 45.0, 70.0])).astype(np.float32)
    idx = np.round(cos.astype(np.float64) * TABLE_STEPS) / TABLE_STEPS  # the table's entries
    for name, flakes in (("car_paint_silver", 0.5), ("car_paint_white", 0.0), ("car_paint_black", 0.0)):
        i = NAMES.index(name)
        assert m.flake_share[i] == flakes
        _p, s = echo.power(np.full(4, 10.0, np.float32), cos, np.full(4, i, np.int16), np.ones(4, np.float32))
        want = paint_factor(idx, 1.5, flakes, 0.25)
        np.testing.assert_allclose(s[1:] / (m.diffuse[i] * cos[1:]), want[1:], rtol=2e-3)


def test_silver_is_drawn_at_its_share_of_the_fleet() -> None:
    assert "car_paint_silver" in PAINTS
    assert sum(PAINT_SHARES) == pytest.approx(1.0)
    assert PAINT_SHARES[PAINTS.index("car_paint_silver")] == pytest.approx(0.11)
    table = load_material_table()
    assert 0.5 < table.reflectance("car_paint_silver", 905) < table.reflectance("car_paint_white", 905)
