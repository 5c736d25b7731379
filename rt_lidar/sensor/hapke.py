"""Monostatic reflectance of a rough particulate surface (asphalt, concrete, rock) from Hapke's model.

A lidar sees its own spot from where it lights it (phase angle g ~ 1 mrad), so a rough surface is
seen by exactly the grains and facets it lights: the shadows that make a rough surface dark at grazing
incidence in other geometries are hidden behind what casts them (the shadow-hiding opposition effect),
and the macroscopic roughness's shadowing cancels at g = 0. Hapke's bidirectional reflectance of a
particulate surface (Hapke 1981, J. Geophys. Res. 86(B4) 3039; Hapke 1986, Icarus 67 264; Hapke 2012,
Theory of Reflectance and Emittance Spectroscopy, 2nd ed., Cambridge, ch. 8-9) in that geometry, with
isotropic grains of single-scattering albedo w and incidence cosine mu = mu0:

    r = w / (4 pi) * mu0 / (mu0 + mu) * [(1 + B0) + H(mu0) H(mu) - 1]

and the effective reflectance the project's radar equation takes (``S = pi r / mu0 * cos``: 1 for a
white Lambertian target at normal incidence) is

    S(mu) = (w / 8) * [B0 + H(mu)^2]

with Chandrasekhar's H function in Hapke's approximation ``H(x) = (1 + 2x) / (1 + 2 x sqrt(1 - w))``.
At grazing incidence (mu -> 0, H -> 1) the single-scattering term ``(w / 8)(1 + B0)`` remains: a rough
road keeps a large share of its near-normal echo all the way to the horizon, where a Lambertian one
(S = rho mu) fades to nothing. w follows from the measured hemispherical reflectance (the ASTER
spectrum) by Hapke's diffusive reflectance ``r0 = (1 - gamma) / (1 + gamma)``, ``gamma = sqrt(1 - w)``.
B0, the opposition surge's amplitude, is ~1 for grains that are large and opaque against the
wavelength (Hapke 2012, sec. 9.3), as the aggregate and binder of asphalt are at 905 nm.

The echo step keeps its two lobes, ``S = a1 mu + a0`` (a diffuse lobe and one that does not depend on
incidence, ``retro_exponent`` 0); :func:`road_lobes` is the least-squares fit of that form to ``S(mu)``
over the incidences a road presents to a lidar mounted 1.5-2 m up from ~3 m out to the horizon, so the
table's numbers are this model's, not free fits.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "ROAD_MU",
    "backscatter_fraction",
    "chandrasekhar_h",
    "monostatic_reflectance",
    "road_lobes",
    "single_scattering_albedo",
]

ROAD_MU = (0.02, 0.5)
"""Incidence cosines of a road seen from 1.5-2 m up between ~3 m (mu ~ 0.5) and ~90 m (mu ~ 0.02)."""


def single_scattering_albedo(hemispherical: float) -> float:
    """w of isotropic grains whose diffusive reflectance ``r0 = (1 - gamma) / (1 + gamma)`` is the
    measured hemispherical reflectance (``gamma = sqrt(1 - w)``)."""
    r0 = min(max(float(hemispherical), 0.0), 0.999)
    gamma = (1.0 - r0) / (1.0 + r0)
    return 1.0 - gamma * gamma


def chandrasekhar_h(mu: np.ndarray | float, w: float) -> np.ndarray:
    """Hapke's approximation of Chandrasekhar's H function for isotropic scatterers of albedo ``w``."""
    x = np.asarray(mu, np.float64)
    return (1.0 + 2.0 * x) / (1.0 + 2.0 * x * np.sqrt(1.0 - w))


def monostatic_reflectance(mu: np.ndarray | float, w: float, b0: float) -> np.ndarray:
    """Effective reflectance S (the radar equation's, 1 = white Lambertian head-on) of the surface
    seen and lit from the same direction at incidence cosine ``mu``: ``(w / 8)(B0 + H(mu)^2)``."""
    h = chandrasekhar_h(mu, w)
    return (w / 8.0) * (b0 + h * h)


def road_lobes(
    hemispherical: float, b0: float, mu_range: tuple[float, float] = ROAD_MU
) -> tuple[float, float]:
    """``(a1, a0)`` of ``S = a1 mu + a0`` fitted (least squares, 200 cosines evenly spread over
    ``mu_range``) to Hapke's monostatic S of a surface with this hemispherical reflectance and
    opposition amplitude ``b0``: the diffuse lobe's gain and the part that stays at grazing incidence."""
    w = single_scattering_albedo(hemispherical)
    mu = np.linspace(mu_range[0], mu_range[1], 200)
    slope, intercept = np.polyfit(mu, monostatic_reflectance(mu, w, b0), 1)
    return float(slope), float(intercept)


def backscatter_fraction(hemispherical: float, b0: float, mu_range: tuple[float, float] = ROAD_MU) -> float:
    """The share ``a0 / (a0 + a1)`` of :func:`road_lobes`: how much of the head-on echo a grazing road
    keeps."""
    a1, a0 = road_lobes(hemispherical, b0, mu_range)
    return a0 / (a0 + a1)
