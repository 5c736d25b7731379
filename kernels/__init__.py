"""Pure array kernels of the sensor model (NumPy or CuPy, chosen once from the input arrays).

No I/O, no state, no imports from the other packages of the project. Every function takes ``xp``
arrays and returns arrays of the same module.
"""

from rt_lidar.kernels.intensity import (
    SPEED_OF_LIGHT,
    apply_range_noise,
    calibrated_reflectivity_output,
    effective_reflectance,
    leading_edge_walk_m,
    raw_intensity_output,
    raw_reading_lookup,
    received_power,
    received_power_output,
    two_way_transmission,
)
from rt_lidar.kernels.sectors import scan_boundaries
from rt_lidar.kernels.xp import array_module, to_numpy

__all__ = [
    "SPEED_OF_LIGHT",
    "apply_range_noise",
    "array_module",
    "calibrated_reflectivity_output",
    "effective_reflectance",
    "leading_edge_walk_m",
    "raw_intensity_output",
    "raw_reading_lookup",
    "received_power",
    "received_power_output",
    "scan_boundaries",
    "to_numpy",
    "two_way_transmission",
]
