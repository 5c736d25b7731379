"""Issue 40 item 1: the road's monostatic backscatter from Hapke's model (rt_lidar.sensor.hapke)."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.sensor.hapke import (
    backscatter_fraction,
    chandrasekhar_h,
    monostatic_reflectance,
    road_lobes,
    single_scattering_albedo,
)
from rt_lidar.sensor.materials import load_material_table


def test_albedo_inverts_the_diffusive_reflectance() -> None:
    for r0 in (0.05, 0.28, 0.6):
        w = single_scattering_albedo(r0)
        gamma = np.sqrt(1 - w)
        assert (1 - gamma) / (1 + gamma) == pytest.approx(r0)


def test_h_function_is_one_at_grazing_and_grows_with_albedo() -> None:
    assert chandrasekhar_h(0.0, 0.7) == pytest.approx(1.0)
    assert chandrasekhar_h(1.0, 0.9) > chandrasekhar_h(1.0, 0.5) > 1.0


def test_a_rough_road_keeps_its_echo_at_grazing_incidence() -> None:
    w = single_scattering_albedo(0.28)
    s = monostatic_reflectance(np.array([0.35, 0.07, 0.02]), w, 0.5)
    assert s[1] / s[0] > 0.7  # Lambertian: 0.2
    assert monostatic_reflectance(0.0, w, 0.5) == pytest.approx(w / 8 * 1.5)  # single scattering: (w/8)(1+B0)
    assert s[2] == pytest.approx(w / 8 * 1.5, rel=0.05)
    # the opposition surge brightens the grazing road
    assert backscatter_fraction(0.28, 1.0) > backscatter_fraction(0.28, 0.5) > backscatter_fraction(0.28, 0.0)


def test_the_material_tables_road_lobes_are_hapkes() -> None:
    table = load_material_table()
    for name in ("asphalt", "concrete", "rock"):
        b0 = table.materials[name]["opposition_b0"]
        assert b0 is not None
        rough = table.materials[name]["roughness_deg"]  # asphalt's chips (change 35)
        for nm in (850.0, 905.0, 1550.0):
            rho = table.reflectance(name, nm)
            m = table.arrays([name], nm)
            assert (float(m.diffuse[0]), float(m.retro_gain[0])) == pytest.approx(
                road_lobes(rho, b0, roughness_deg=rough), rel=1e-5
            )
            assert float(m.retro_exponent[0]) == 0.0
            mu = np.linspace(0.02, 0.5, 25)
            fit = m.diffuse[0] * mu + m.retro_gain[0]
            hapke = monostatic_reflectance(mu, single_scattering_albedo(rho), b0, rough)
            assert np.max(np.abs(fit / hapke - 1)) < 0.05
