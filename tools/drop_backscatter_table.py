"""Recompute :data:`rt_lidar.physics.drop_backscatter.SPHERE_Q_BACK`: the Mie backscatter efficiency of
water spheres at each lidar wavelength, averaged over 64 diameters within +-3 % of each table entry.

Run by hand (about a minute on two cores); paste the printed table into the module.
"""

from __future__ import annotations

import math

import numpy as np

from rt_lidar.physics.drop_backscatter import SPHERE_TABLE_D_MM, mie_backscatter_efficiency, water_index

SAMPLES = 64
SPREAD = 0.03


def main() -> None:
    """Print one row per wavelength."""
    for wavelength_nm in (850, 905, 1550):
        m = water_index(wavelength_nm)
        row = []
        for d in SPHERE_TABLE_D_MM:
            sizes = np.linspace(d * (1 - SPREAD), d * (1 + SPREAD), SAMPLES)
            q = mie_backscatter_efficiency(math.pi * sizes / (wavelength_nm * 1e-6), m)
            row.append(float(q.mean()))
        print(f"    {wavelength_nm}: ({', '.join(f'{v:.3g}' for v in row)}),", flush=True)


if __name__ == "__main__":
    main()
