"""Issue 40: a falling drop's backscatter from Mie theory and its shape, and the receiver overlap that
hides most drops (rt_lidar.physics.drop_backscatter, rt_lidar.physics.rain_receiver)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_lidar.physics import drop_backscatter as db
from rt_lidar.physics.rain_receiver import point_overlap


def test_mie_series_meets_the_rayleigh_limit_and_the_stored_sphere_table() -> None:
    m = db.water_index(905)
    x = np.array([0.05])
    rayleigh = 4 * x**4 * abs((m * m - 1) / (m * m + 2)) ** 2
    assert db.mie_backscatter_efficiency(x, m) == pytest.approx(rayleigh, rel=0.02)
    # the table's 0.5 mm entry at 905 nm: the mean over +-3 %, recomputed here on 64 sizes
    sizes = np.linspace(0.485, 0.515, 64)
    q = db.mie_backscatter_efficiency(math.pi * sizes / 905e-6, m).mean()
    assert q == pytest.approx(db.SPHERE_Q_BACK[905][db.SPHERE_TABLE_D_MM.index(0.5)], rel=0.02)
    assert 3.0 < q < 6.0  # the sphere's glory: Q_back / 4 ~ 1, as issue 40 says of a sphere


def test_a_falling_drop_keeps_little_of_the_spheres_glory_and_1550_nm_sees_less() -> None:
    d = np.array([0.5, 1.0, 2.0, 3.0])
    rho905 = db.drop_reflectance(d, 905)
    rho1550 = db.drop_reflectance(d, 1550)
    sphere = db.sphere_q_back(d, 905) / 4
    assert rho905[0] < sphere[0] / 5 and np.all(rho905[1:] < sphere[1:] / 30)  # oblate: no glory
    assert np.all((rho905[1:] > 0.02) & (rho905[1:] < 0.05))  # geometric optics, p = 0 and p = 2
    assert rho905[0] > rho905[1]  # the smallest drops keep some glory
    assert np.all(rho1550[1:] < rho905[1:] / 3)  # water absorbs at 1550 nm
    assert db.axis_ratio(np.array([2.0]))[0] == pytest.approx(0.93, abs=0.01)  # Beard & Chuang
    # a sphere in geometric optics: front reflection 0.02 + axial ray 0.075 (tiny drop: alpha = 1)
    assert db.geometric_backscatter_efficiency(np.array([0.2]), 905)[0] == pytest.approx(0.095, abs=0.005)


def test_the_receiver_sees_no_drop_near_the_sensor_and_more_with_range() -> None:
    beam = (0.011, 3e-3, 1.5e-3)
    z = np.array([0.5, 1.0, 3.0, 5.0, 10.0, 30.0, 100.0])
    s = point_overlap(z, beam, 0.0231, 1.5e-3, 0.025)
    assert s[0] == 0.0 and s[1] == 0.0
    assert np.all(np.diff(s) >= 0) and 0 < s[2] < s[4] <= 1.0
    # coaxial (no baseline), a field wider than the beam: every drop is seen
    assert point_overlap(z, beam, 0.0, 5e-3, 0.025) == pytest.approx(np.ones(z.size))
