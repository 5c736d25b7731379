"""Issue 40: the drop-size distribution that meets a weather radar's Z-R relation, and why Marshall-Palmer
made the lidar's rain-point rate grow too steeply."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rt_lidar.kernels import weather as kw
from rt_lidar.physics.rain_dsd import FALL_SPEED, ZR_RELATION, rain_distribution, zr_distribution


def _moments(n0: float, lam: float) -> tuple[float, float]:
    """(rain rate mm/h, reflectivity mm^6 m^-3) of ``n0 exp(-lam D)`` by direct summation over 0-12 mm."""
    d = np.linspace(1e-4, 12.0, 200_001)
    n = n0 * np.exp(-lam * d)
    v = FALL_SPEED[0] * d ** FALL_SPEED[1]
    rate = 6 * math.pi * 1e-4 * np.trapezoid(v * d**3 * n, d)
    return float(rate), float(np.trapezoid(d**6 * n, d))


@pytest.mark.parametrize("rate", [1.0, 5.0, 25.0])
def test_the_distribution_has_its_rain_rate_and_the_radar_reflectivity(rate: float) -> None:
    a, b = ZR_RELATION
    n0, lam = rain_distribution(rate)
    r, z = _moments(n0, lam)
    assert r == pytest.approx(rate, rel=2e-3)
    assert z == pytest.approx(a * rate**b, rel=2e-3)
    # another relation gives another distribution (the function is not tied to one)
    n0b, _, lamb, beta = zr_distribution(200.0, 1.6)
    assert beta == pytest.approx(0.6 / 2.33) and (n0b, lamb) != (n0, lam)


def test_the_small_spherical_drops_grow_slowly_and_the_tail_steeply() -> None:
    """What sets the lidar's rain-point growth (docs/rain.md): drops over ~2 mm (what a VLP-16 sees as
    oblate drops at 4-6 m) grow from 1 to 25 mm/h as R^1.46 with Marshall-Palmer and R^1.38 with the Z-R
    distribution; the 0.1-0.5 mm drops (spheres that keep their glory) as R^0.16-0.33, so a receiver
    that sees both mixes a slow and a steep part. At 10 mm/h the two distributions hold as many drops
    over 1 mm (within 25 %)."""

    def count(dsd: tuple[float, float], lo: float, hi: float) -> float:
        return kw.exponential_dsd_count(*dsd, lo, hi)

    def mp(rate: float) -> tuple[float, float]:
        return kw.MP_N0, float(kw.marshall_palmer_slope(rate))

    def growth(f: object, lo: float, hi: float) -> float:
        return math.log(count(f(25.0), lo, hi) / count(f(1.0), lo, hi)) / math.log(25.0)  # type: ignore[operator]

    assert growth(mp, 2.0, math.inf) > 1.4
    assert 1.2 < growth(rain_distribution, 2.0, math.inf) < growth(mp, 2.0, math.inf) - 0.05
    assert growth(rain_distribution, 0.1, 0.5) < 0.4 and growth(mp, 0.1, 0.5) < 0.2
    assert count(rain_distribution(10.0), 1.0, math.inf) == pytest.approx(
        count(mp(10.0), 1.0, math.inf), rel=0.25
    )
