"""The tyre-spray kernel (:mod:`kernels.spray`): a soft-target echo inside each ray's plume segment."""

from __future__ import annotations

import math

import numpy as np

from rt_lidar.kernels.spray import SprayParams, spray_echoes

PRM = SprayParams(
    k_sensor=1e-3,
    beta_per_density=0.045 / 18.8,
    alpha_per_density=0.045,
    pulse_len_m=1.5,
    a_total=1e-4,
    r1=1.5,
    r2=6.0,
)


def _rays(
    n: int, z_in: float = 8.0, z_out: float = 14.0, density: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.full(n, z_in, np.float32),
        np.full(n, z_out, np.float32),
        np.full(n, density, np.float32),
    )


def test_rays_without_a_plume_get_no_echo_and_full_transmission():
    z_in = np.array([np.inf, 5.0, np.inf], np.float32)
    z_out = np.array([np.inf, 9.0, np.inf], np.float32)
    dens = np.array([0.0, 0.0, 1.0], np.float32)
    rng, p, t = spray_echoes(z_in, z_out, dens, PRM, key=1)
    assert np.all(np.isinf(rng)) and np.all(p == 0) and np.all(t == 1)
    assert rng.dtype == p.dtype == t.dtype == np.float32


def test_echoes_lie_inside_the_plume_and_the_object_behind_is_attenuated_two_way():
    rng, p, t = spray_echoes(*_rays(5000), PRM, key=7)
    assert np.all((rng >= 8.0) & (rng <= 14.0)) and np.all(p > 0)
    assert abs(float(np.mean(rng)) - 11.0) < 0.2  # uniform over the plume
    np.testing.assert_allclose(t, math.exp(-2 * 0.045 * 6.0), rtol=1e-6)


def test_the_same_key_gives_the_same_echoes_and_another_key_others():
    a = spray_echoes(*_rays(100), PRM, key=3)
    b = spray_echoes(*_rays(100), PRM, key=3)
    c = spray_echoes(*_rays(100), PRM, key=4)
    for x, y in zip(a, b, strict=True):
        assert x.tobytes() == y.tobytes()
    assert a[0].tobytes() != c[0].tobytes()
    # a ray's draw depends on its index alone, not on the batch
    zi, zo, dens = _rays(100)
    d = spray_echoes(zi[:10], zo[:10], dens[:10], PRM, key=3)
    assert d[1].tobytes() == a[1][:10].tobytes()


def test_power_grows_with_density_and_clumps_spread_it():
    lo = spray_echoes(*_rays(4000, density=0.2), PRM, key=9)[1]
    hi = spray_echoes(*_rays(4000, density=1.0), PRM, key=9)[1]
    assert float(np.median(hi)) > 3.0 * float(np.median(lo))
    # exponential clumps: the share of rays above a fixed level grows smoothly with density
    level = float(np.quantile(hi, 0.5))
    assert 0.0 < float(np.mean(lo > level)) < float(np.mean(hi > level)) < 1.0


def test_a_thin_plume_fills_less_of_the_pulse():
    thin = spray_echoes(*_rays(2000, 10.0, 10.3), PRM, key=2)[1]
    thick = spray_echoes(*_rays(2000, 10.0, 12.0), PRM, key=2)[1]
    # 0.3 m of 1.5 m of pulse filled, at a slightly nearer range (1/z^2) and less inside the plume
    ratio = float(np.mean(thin)) / float(np.mean(thick))
    assert 0.3 / 1.5 < ratio < 0.3 / 1.5 * 1.4


def test_a_subset_with_its_ray_numbers_gets_the_batch_s_draws():
    zi, zo, dens = _rays(50)
    full = spray_echoes(zi, zo, dens, PRM, key=11)
    idx = np.array([3, 17, 42])
    part = spray_echoes(zi[idx], zo[idx], dens[idx], PRM, key=11, ray=idx)
    for f, p in zip(full, part, strict=True):
        assert f[idx].tobytes() == p.tobytes()


def test_the_sensor_s_window_dims_the_droplets_echo_not_the_plume_s_transmission():
    """A power fault's window transmission (out and back): blocked, no echo; half, half the power; the
    object behind the plume keeps its plume transmission (the window's loss is already on its echo)."""
    clean = spray_echoes(*_rays(300), PRM, key=9)
    w = np.tile(np.array([0.0, 0.5, 1.0], np.float32), 100)
    rng, p, t = spray_echoes(*_rays(300), PRM, key=9, window=w)
    assert np.all(p[w == 0] == 0) and np.all(clean[1] > 0)
    np.testing.assert_array_equal(p[w == 0.5], clean[1][w == 0.5] * np.float32(0.5))
    assert p[w == 1].tobytes() == clean[1][w == 1].tobytes()
    assert rng.tobytes() == clean[0].tobytes() and t.tobytes() == clean[2].tobytes()
