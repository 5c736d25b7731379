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

Macroscopic roughness (Hapke 1984, Icarus 59, 41-59: facets tilted about the mean plane with mean slope
angle theta-bar) enters the monostatic echo through the facets' mean cosine only: at phase angle 0 the
shadowing function S(i, e, 0) is 1 (every shadow lies behind what casts it), and the reflectance is
Hapke's with mu replaced by the effective cosine

    eta(mu) = chi [cos i + sin i tan(theta-bar) E2(i) / (2 - E1(i))],
    chi = 1 / sqrt(1 + pi tan^2 theta-bar), E1(i) = exp(-2 / (pi tan theta-bar tan i)),
    E2(i) = exp(-1 / (pi tan^2 theta-bar tan^2 i)),

(Hapke 1984, eqs. 46-48 with psi = 0): at grazing incidence the lit facets face the beam more steeply
than the mean plane does (eta > mu), head-on slightly less (eta(1) = chi < 1).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "ROAD_MU",
    "backscatter_fraction",
    "chandrasekhar_h",
    "monostatic_reflectance",
    "road_lobes",
    "rough_cosine",
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


def rough_cosine(mu: np.ndarray | float, roughness_deg: float) -> np.ndarray:
    """Hapke's (1984) effective cosine ``eta(mu)`` of a surface with mean facet slope ``roughness_deg``
    lit and seen from the same direction (phase angle 0); ``mu`` itself for a smooth surface."""
    m = np.clip(np.asarray(mu, np.float64), 1e-9, 1.0)
    if roughness_deg <= 0.0:
        return m
    t = np.tan(np.radians(roughness_deg))
    chi = 1.0 / np.sqrt(1.0 + np.pi * t * t)
    i = np.arccos(m)
    tan_i = np.maximum(np.tan(i), 1e-12)
    e1 = np.exp(-2.0 / (np.pi * t * tan_i))
    e2 = np.exp(-1.0 / (np.pi * t * t * tan_i * tan_i))
    return chi * (m + np.sin(i) * t * e2 / (2.0 - e1))


def monostatic_reflectance(
    mu: np.ndarray | float, w: float, b0: float, roughness_deg: float = 0.0
) -> np.ndarray:
    """Effective reflectance S (the radar equation's, 1 = white Lambertian head-on) of the surface
    seen and lit from the same direction at incidence cosine ``mu``: ``(w / 8)(B0 + H(eta)^2)``, with
    ``eta`` the facets' effective cosine (:func:`rough_cosine`; ``mu`` for a smooth surface)."""
    h = chandrasekhar_h(rough_cosine(mu, roughness_deg), w)
    return (w / 8.0) * (b0 + h * h)


def road_lobes(
    hemispherical: float, b0: float, mu_range: tuple[float, float] = ROAD_MU, roughness_deg: float = 0.0
) -> tuple[float, float]:
    """``(a1, a0)`` of ``S = a1 mu + a0`` fitted (least squares, 200 cosines evenly spread over
    ``mu_range``) to Hapke's monostatic S of a surface with this hemispherical reflectance, opposition
    amplitude ``b0`` and mean facet slope ``roughness_deg``: the diffuse lobe's gain and the part that
    stays at grazing incidence."""
    w = single_scattering_albedo(hemispherical)
    mu = np.linspace(mu_range[0], mu_range[1], 200)
    slope, intercept = np.polyfit(mu, monostatic_reflectance(mu, w, b0, roughness_deg), 1)
    return float(slope), float(intercept)


def backscatter_fraction(
    hemispherical: float, b0: float, mu_range: tuple[float, float] = ROAD_MU, roughness_deg: float = 0.0
) -> float:
    """The share ``a0 / (a0 + a1)`` of :func:`road_lobes`: how much of the head-on echo a grazing road
    keeps."""
    a1, a0 = road_lobes(hemispherical, b0, mu_range, roughness_deg)
    return a0 / (a0 + a1)
