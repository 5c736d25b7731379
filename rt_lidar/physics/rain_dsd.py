"""How many drops of each size a rain rate holds: the exponential drop-size distribution that a
weather radar's Z-R relation implies, for counting the drops a lidar can see.

Why not Marshall-Palmer alone. Marshall & Palmer (1948) keep the intercept fixed (``N0`` = 8000
m^-3 mm^-1) and let only the slope fall with the rain rate, ``Lambda = 4.1 R^-0.21``. In the scaling form
of drop-size distributions (Sempere Torres, Porra & Creutin 1994, J. Appl. Meteor. 33, 1494;
Uijlenhoet 2001, Hydrol. Earth Syst. Sci. 5, 615) ``N(D, R) = R^alpha g(D / R^beta)`` with
``alpha + 4.67 beta = 1`` (the fall speed ``v = 3.78 D^0.67`` m/s, Atlas & Ulbrich 1977), the number of
drops above a size ``D*`` grows as ``R^(1 + beta (Lambda D* - 3.67))``. A lidar sees an oblate drop
(~3 % backscatter as a Lambertian disc, :mod:`rt_lidar.physics.drop_backscatter`) only above ~1.5-2.5 mm
at 3-6 m on a VLP-16, i.e. in the tail (``Lambda D*`` ~ 5.5), which grows as ``R^1.46`` (2 mm) with
Marshall-Palmer's ``beta`` = 0.21 and as ``R^1.38`` here (``beta`` = 0.17). The larger part of the
fix is elsewhere (docs/rain.md): drops under 0.5 mm are spheres that keep their glory, and their number
grows as ``R^0.2-0.3``; a receiver that sees both mixes a slow and a steep part.

Here the distribution is the exponential one that meets a weather service's Z-R relation ``Z = a R^b``
exactly: ``beta = (b - 1) / 2.33``, ``alpha = 1 - 4.67 beta``, and ``N0'`` and ``Lambda'`` from the two
moment equations ``R = 6 pi 1e-4 int v D^3 N dD`` and ``Z = int D^6 N dD``. With the WSR-88D's operational
``Z = 300 R^1.4`` (Fulton et al. 1998, Wea. Forecasting 13, 377): ``N(D) = 4997 R^0.198 exp(-3.826
R^-0.172 D)`` m^-3 mm^-1: as many drops over 1 mm as Marshall-Palmer at 10 mm/h (-8 %), fewer small
ones in light rain, more drops of the same sizes in heavy rain.
Germany's RADOLAN relation (``Z = 256 R^1.42``, ``beta`` 0.18) is the sensitivity case of docs/rain.md.
Rain's extinction keeps Marshall-Palmer (:func:`rt_lidar.kernels.weather.rain_extinction`); the two agree
within 25 % over 1-50 mm/h and 7 % at 10 mm/h.
"""

from __future__ import annotations

import math

__all__ = ["FALL_SPEED_EXPONENT", "ZR_RELATION", "rain_distribution", "zr_distribution"]

ZR_RELATION = (300.0, 1.4)
"""(a, b) of ``Z = a R^b`` (Z in mm^6 m^-3, R in mm/h): the WSR-88D's default (Fulton et al. 1998)."""
FALL_SPEED = (3.78, 0.67)
"""Terminal fall speed ``v = 3.78 D^0.67`` m/s, D in mm (Atlas & Ulbrich 1977, J. Appl. Meteor. 16, 1322)."""
FALL_SPEED_EXPONENT = FALL_SPEED[1]


def zr_distribution(a: float, b: float) -> tuple[float, float, float, float]:
    """(N0', alpha, Lambda', beta) of the exponential distribution ``N(D) = N0' R^alpha exp(-Lambda'
    R^-beta D)`` (m^-3 mm^-1, D in mm, R in mm/h) whose rain rate is R and whose reflectivity is
    ``a R^b``."""
    v0, gv = FALL_SPEED
    beta = (b - 1.0) / (3.0 - gv)  # Z / R ~ R^((7 - 4 - gv) beta)
    alpha = 1.0 - (4.0 + gv) * beta
    c = 6.0 * math.pi * 1e-4 * v0 * math.gamma(4.0 + gv)  # R = c N0' / Lambda'^(4 + gv)
    lam = (720.0 / (a * c)) ** (1.0 / (3.0 - gv))  # Z = 720 N0' / Lambda'^7
    n0 = lam ** (4.0 + gv) / c
    return n0, alpha, lam, beta


def rain_distribution(rate_mm_h: float) -> tuple[float, float]:
    """(N0 in m^-3 mm^-1, Lambda in 1/mm) of the exponential drop-size distribution at ``rate_mm_h``
    (:data:`ZR_RELATION`)."""
    n0, alpha, lam, beta = zr_distribution(*ZR_RELATION)
    r = max(float(rate_mm_h), 1e-6)
    return n0 * r**alpha, lam * r**-beta
