"""A snowflake as a lidar sees it: an aggregate of ice crystals, its size and its backscatter.

Sizes: Gunn & Marshall (1958, J. Meteor. 15, 452), ``N(D) = 3.8e3 S^-0.87 exp(-2.55 S^-0.48 D)``
m^-3 mm^-1 in melted diameter at snowfall rate S (mm/h water equivalent): a measured *spatial* number
density (flakes caught per volume of air), so the flakes' fall speed (~1 m/s for aggregates, Locatelli &
Hobbs 1974) is already in it; an aggregate of bulk density 0.1 g/cm^3 is 2.15x its melted diameter
(:func:`rt_lidar.kernels.weather.snow_distribution`).

Backscatter: an aggregate is not a sphere of water. It has no glory (no smooth rim) and is no flat
mirror; its many crystal facets send light back as a rough ice particle does. Lidar measures that as
the extinction-to-backscatter (lidar) ratio of ice clouds, ``S = sigma_ext / (dsigma/dOmega at 180)``,
~25 sr in the visible and near infrared (Chen, Chiang & Nee 2002, Appl. Opt. 41, 6470: 29 +- 12 sr;
CALIPSO's ice model, Young et al. 2013, 25 sr), ice being transparent at 905 nm as at 532 nm. With
``Q_ext = 2`` over the flake's projected area ``A``, its backscatter per steradian is ``2 A / S``, which
a Lambertian disc of area ``A`` returns with ``rho = 2 pi / S`` (0.25 at 25 sr). An aggregate's ice
covers only part of its disc (:data:`AGGREGATE_AREA_RATIO`, fitted): ``rho`` = 0.024 over the disc, 1.3x
the Fresnel reflectance of a smooth ice face (0.018) that LISA (Kilic et al. 2021) and this project used
before.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "AGGREGATE_AREA_RATIO",
    "ICE_LIDAR_RATIO_SR",
    "RHO_SNOWFLAKE",
    "SNOWFLAKE_D_MM",
    "snowflake_cross_section",
]

ICE_LIDAR_RATIO_SR = 25.0
"""Extinction-to-backscatter ratio of ice particles (sr): CALIPSO's ice cloud model (Young et al. 2013);
Chen et al. 2002 measured 29 +- 12 sr."""
AGGREGATE_AREA_RATIO = 0.095
"""Share of the flake's circumscribed disc (of its bulk-density diameter) that returns as ice: the
aggregate's projected-area ratio, with what of its facets faces back. **Fitted** to Linnhoff et al.'s
VLP-16 snow factor read per mm/h water equivalent (docs/rain.md; 1.5x holds for ~0.075-0.11); imaged
aggregates fill ~0.2-0.4 of that disc (an order, e.g. Heymsfield & Miloshevich 2003, J. Atmos. Sci.
60, 936), so the fit sits ~2x under the projected area alone."""
RHO_SNOWFLAKE = 2.0 * math.pi / ICE_LIDAR_RATIO_SR * AGGREGATE_AREA_RATIO
"""Lambertian-equivalent backscatter reflectance of one flake over its projected area (module doc)."""
SNOWFLAKE_D_MM = (0.5, 10.0)
"""Flake diameters counted (mm, the aggregate's own): smaller ones are single crystals too faint to
matter, larger ones too rare."""


def snowflake_cross_section(d_mm: Any) -> np.ndarray:
    """``rho D^2`` (m^2) of flakes of diameter ``d_mm`` (their own, not melted)."""
    d = np.asarray(d_mm, float)
    return np.asarray(RHO_SNOWFLAKE * (d * 1e-3) ** 2)
