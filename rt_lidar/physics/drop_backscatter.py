"""How strongly one falling rain drop sends a lidar pulse back: Mie theory for the sphere, and what the
drop's oblate shape leaves of it.

The weather model treats a drop of diameter D as a Lambertian disc of area ``pi D^2 / 4`` and
reflectance ``rho`` (:mod:`rt_lidar.kernels.weather`); a scatterer of backscatter cross-section
``sigma = Q_back pi D^2 / 4`` returns the same power as such a disc of ``rho = Q_back / 4``
(``sigma = 4 rho A`` for a Lambertian disc at normal incidence). ``Q_back`` is the radar-convention
backscatter efficiency, ``4 pi (dsigma/dOmega)(180 deg) / (pi D^2 / 4)``.

- **Spheres** (:func:`mie_backscatter_efficiency`): Lorenz-Mie series (Bohren & Huffman 1983, BHMIE's
  recurrences, logarithmic derivative downwards) with water's complex refractive index at the
  wavelength (Hale & Querry 1973, Appl. Opt. 12(3) 555). At 905 nm a sphere of 0.5-4 mm gives
  ``Q_back`` 4-8 (``rho`` 1-2): almost all of it is the *glory*, the axial focusing of rays that graze
  the drop's rim, which needs the drop to be round to a fraction of a wavelength all around that rim.
  At 1550 nm water absorbs (1/e in ~1.2 mm) and the glory and the internally reflected ray die in drops
  above ~0.3 mm: ``Q_back`` falls to the front-surface reflection, ~0.02.
- **Falling drops are oblate** (Beard & Chuang 1987, J. Atmos. Sci. 44(11) 1509: axis ratio
  ``alpha(D)`` = 0.98 at 1 mm, 0.93 at 2 mm, 0.86 at 3 mm). Seen edge-on by a horizontal beam, the
  rim's optical path then changes by ``Delta ~ 2 (a - c)`` around it (a, c the spheroid's semi-axes):
  3 um at 0.75 mm, i.e. tens of wavelengths. The glory's ring of rays then adds with phases spread
  over ``delta_0 = 2 pi Delta / lambda`` and its intensity falls to about ``1 / (1 + pi delta_0)`` of
  the sphere's (the mean of ``J_0(delta_0)^2``, ~``1 / (pi delta_0)`` for large ``delta_0``);
  (:func:`glory_suppression`).
- What survives is geometric optics (:func:`geometric_backscatter_efficiency`): the specular reflection
  off the front (``p = 0``, ``Q = R_F`` for a sphere, ``R_F`` = 0.02) and the axial ray reflected once
  inside (``p = 2``, ``Q = 4 T^2 R_F / (a^2 g_h g_v)`` with ``g`` the angular spread per unit height
  of the returning bundle in the horizontal and vertical planes, from paraxial ray transfer through the
  spheroid's curvatures; 0.075 for a sphere at 905 nm), attenuated by water's absorption over the
  path inside. Their interference averages out over any spread of sizes.

So a falling drop at 905 nm backscatters ``rho`` = 0.024-0.035 for 0.75-3 mm (0.10 at 0.5 mm, where
some glory survives), 40-60x below the sphere's Mie value and close to the water's Fresnel value the
model used before; at 1550 nm ``rho`` ~ 0.005. :func:`drop_reflectance` gives ``rho(D)`` at a
wavelength; the size-averaged sphere values it starts from are the stored table
:data:`SPHERE_Q_BACK` (``tools/drop_backscatter_table.py`` recomputes it with
:func:`mie_backscatter_efficiency`; a test holds entries of it to the series).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "SPHERE_Q_BACK",
    "SPHERE_TABLE_D_MM",
    "WATER_INDEX",
    "axis_ratio",
    "drop_reflectance",
    "geometric_backscatter_efficiency",
    "glory_suppression",
    "mie_backscatter_efficiency",
    "sphere_q_back",
    "water_index",
]

WATER_INDEX = {  # wavelength nm: (n, k), liquid water at 25 C (Hale & Querry 1973)
    850: (1.329, 2.93e-7),
    905: (1.328, 4.86e-7),
    950: (1.327, 1.64e-6),
    1064: (1.326, 2.89e-6),
    1550: (1.318, 9.86e-5),
}
"""Complex refractive index ``n + i k`` of liquid water: absorption ``4 pi k / lambda`` is 6.7 /m at
905 nm and 800 /m at 1550 nm."""

SPHERE_TABLE_D_MM = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
SPHERE_Q_BACK = {
    850: (1.93, 2.48, 3.1, 3.76, 4.54, 4.41, 4.44, 3.93, 2.71, 2.23, 1.6),
    905: (1.96, 2.54, 2.94, 3.9, 4.59, 5.31, 5.88, 6.73, 7.09, 7.56, 7.37),
    1550: (0.926, 0.51, 0.257, 0.0925, 0.0483, 0.0357, 0.025, 0.0215, 0.0193, 0.0189, 0.0188),
}
"""``Q_back`` of water spheres, the mean over diameters within +-3 % of each entry of
:data:`SPHERE_TABLE_D_MM` (64 sizes: the single-size series oscillates by 2-3x, so an entry carries
~20 % of sampling noise; at 1 mm and above the oblate drop keeps under 1 % of it, so this hardly
matters), by
:func:`mie_backscatter_efficiency`; regenerate with ``tools/drop_backscatter_table.py``."""


CAUSTIC_FLOOR = 0.25
"""Smallest spread of an oblate drop's once-reflected axial ray, as a share of a sphere's of the same
volume (:func:`geometric_backscatter_efficiency`): without it the paraxial estimate diverges at the
axial caustic near 5 mm (``rho`` 1.8 there, 0.06 at 4 mm) and lets 5 mm drops light up at 20-30 m.
An assumption (drop oscillations of a few per cent in axis ratio smear the caustic; Marston & Trinh
1984 for the caustics of spheroidal drops), not a calculation: ``rho`` stays under 0.09."""


def water_index(wavelength_nm: float) -> complex:
    """Water's complex refractive index at ``wavelength_nm`` (linear in n, log-linear in k between the
    entries of :data:`WATER_INDEX`, clamped at its ends)."""
    w = np.array(sorted(WATER_INDEX), float)
    n = np.array([WATER_INDEX[int(x)][0] for x in w])
    k = np.array([WATER_INDEX[int(x)][1] for x in w])
    return complex(
        float(np.interp(wavelength_nm, w, n)), float(np.exp(np.interp(wavelength_nm, w, np.log(k))))
    )


def mie_backscatter_efficiency(size_parameter: Any, m: complex) -> np.ndarray:
    """``Q_back`` of homogeneous spheres of size parameters ``x = pi D / lambda`` (an array) and relative
    index ``m``: ``|sum_n (2n + 1)(-1)^n (a_n - b_n)|^2 / x^2`` with BHMIE's recurrences (all sizes at
    once; the series runs to ``x + 4 x^(1/3) + 2`` terms)."""
    x = np.atleast_1d(np.asarray(size_parameter, float))
    nstop = (x + 4.0 * np.cbrt(x) + 2.0).astype(int)
    n_max = int(nstop.max())
    y = m * x
    n_down = int(max(n_max, float(np.abs(y).max()))) + 16
    d = np.zeros((n_down + 1, x.size), complex)  # logarithmic derivative D_n(m x), downwards
    for n in range(n_down, 0, -1):
        d[n - 1] = n / y - 1.0 / (d[n] + n / y)
    psi0, psi1 = np.cos(x), np.sin(x)
    chi0, chi1 = -np.sin(x), np.cos(x)
    xi1 = psi1 - 1j * chi1
    total = np.zeros(x.size, complex)
    for n in range(1, n_max + 1):
        psi = (2 * n - 1) / x * psi1 - psi0
        chi = (2 * n - 1) / x * chi1 - chi0
        xi = psi - 1j * chi
        ta = d[n] / m + n / x
        tb = d[n] * m + n / x
        an = (ta * psi - psi1) / (ta * xi - xi1)
        bn = (tb * psi - psi1) / (tb * xi - xi1)
        total += np.where(n <= nstop, (2 * n + 1) * (-1) ** n * (an - bn), 0.0)
        psi0, psi1, chi0, chi1, xi1 = psi1, psi, chi1, chi, xi
    return np.abs(total) ** 2 / (x * x)


def _table_wavelength(wavelength_nm: float) -> int:
    """The entry of :data:`SPHERE_Q_BACK` nearest to ``wavelength_nm``."""
    return min(SPHERE_Q_BACK, key=lambda w: abs(w - wavelength_nm))


def sphere_q_back(d_mm: Any, wavelength_nm: float) -> np.ndarray:
    """Size-averaged Mie ``Q_back`` of water spheres of ``d_mm`` (log-log interpolation of the table)."""
    q = np.log(np.array(SPHERE_Q_BACK[_table_wavelength(wavelength_nm)]))
    dd = np.log(np.array(SPHERE_TABLE_D_MM))
    return np.exp(np.interp(np.log(np.maximum(np.asarray(d_mm, float), 1e-3)), dd, q))


def axis_ratio(d_mm: Any) -> np.ndarray:
    """Equilibrium axis ratio c / a of a falling drop of volume-equivalent diameter ``d_mm`` (Beard &
    Chuang 1987's polynomial in D in cm; 1 where it exceeds 1 below ~0.3 mm)."""
    d = np.asarray(d_mm, float) / 10.0
    a = 1.0048 + 0.0057 * d - 2.628 * d**2 + 3.682 * d**3 - 1.677 * d**4
    return np.minimum(a, 1.0)


def _axial_spread(radius: Any, thickness: Any, n: float) -> Any:
    """Angular spread per unit entry height (1/m) of the ray that enters a drop, reflects once at its
    back and leaves through the front, in one plane: paraxial ray transfer through front and back
    surfaces of curvature radius ``radius`` a ``thickness`` apart (``|4/n - 2| / a`` for a sphere)."""
    u1 = -(n - 1.0) / (n * radius)
    h2 = 1.0 + thickness * u1
    u2 = u1 - 2.0 * h2 / radius
    h3 = h2 + thickness * u2
    return np.abs(n * u2 - (n - 1.0) * h3 / radius)


def geometric_backscatter_efficiency(d_mm: Any, wavelength_nm: float) -> np.ndarray:
    """``Q_back`` of an oblate drop seen edge-on, in geometric optics without the glory: the front
    reflection plus the once-reflected axial ray (module docstring), normalised by ``pi D^2 / 4``."""
    m = water_index(wavelength_nm)
    n = m.real
    absorb_per_mm = 4.0 * math.pi * m.imag / (wavelength_nm * 1e-6)
    d = np.asarray(d_mm, float)
    r = d / 2.0
    alpha = axis_ratio(d)
    a, c = r * alpha ** (-1.0 / 3.0), r * alpha ** (2.0 / 3.0)  # equatorial / polar semi-axes (mm)
    r_f = ((n - 1.0) / (n + 1.0)) ** 2
    rho_v = c * c / a  # curvature radius of the meridian at the equator
    q0 = r_f * a * rho_v / (r * r)  # 4 pi * R_F rho_h rho_v / 4, over pi r^2
    spread = _axial_spread(a, 2.0 * a, n) * _axial_spread(rho_v, 2.0 * a, n)
    # Near axis ratio 0.7 (~5 mm) the oblate drop focuses its axial ray back (a caustic, where the paraxial
    # spread vanishes and Q diverges); oscillation and diffraction bound it: floored at CAUSTIC_FLOOR of a
    # sphere's spread (Q2 at most 1 / CAUSTIC_FLOOR times the sphere's 0.075).
    spread = np.maximum(spread, CAUSTIC_FLOOR * _axial_spread(r, 2.0 * r, n) ** 2)
    q2 = 4.0 * (1.0 - r_f) ** 2 * r_f * np.exp(-absorb_per_mm * 4.0 * a) / (spread * r * r)
    return np.asarray(q0 + q2)


def glory_suppression(d_mm: Any, wavelength_nm: float) -> np.ndarray:
    """Share of a sphere's glory that an oblate drop keeps: ``1 / (1 + pi delta_0)``, ``delta_0`` the
    phase spread ``2 pi * 2 (a - c) / lambda`` around its rim (module docstring)."""
    d = np.asarray(d_mm, float)
    alpha = axis_ratio(d)
    r = d / 2.0
    a_minus_c = r * (alpha ** (-1.0 / 3.0) - alpha ** (2.0 / 3.0))
    delta0 = 2.0 * math.pi * 2.0 * a_minus_c / (wavelength_nm * 1e-6)
    return np.asarray(1.0 / (1.0 + math.pi * delta0))


def drop_reflectance(d_mm: Any, wavelength_nm: float) -> np.ndarray:
    """Lambertian-equivalent backscatter reflectance ``Q_back / 4`` of falling drops of ``d_mm`` at
    ``wavelength_nm``: geometric optics of the oblate drop plus the share of the sphere's glory its
    shape keeps."""
    geo = geometric_backscatter_efficiency(d_mm, wavelength_nm)
    glory = np.maximum(sphere_q_back(d_mm, wavelength_nm) - geo, 0.0) * glory_suppression(d_mm, wavelength_nm)
    return np.asarray((geo + glory) / 4.0)


def drop_cross_section(d_mm: Any, wavelength_nm: float) -> np.ndarray:
    """``rho(D) D^2`` (m^2) of falling drops of ``d_mm``: what the receiver's radar equation multiplies by
    the beam's irradiance (:mod:`rt_lidar.physics.particle_receiver`)."""
    d = np.asarray(d_mm, float)
    return np.asarray(drop_reflectance(d, wavelength_nm) * (d * 1e-3) ** 2)
