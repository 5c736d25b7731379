"""rt-lidar: a real-time, realistic LiDAR simulator (see README.md and docs/architecture.md).

The Python API, imported on first use so that ``import rt_lidar.kernels`` stays light:

- :func:`simulate`: scans of a sensor driving through the embedded world;
- :func:`attach`: scans from a running AirSim, Cosys-AirSim or ``rt-lidar serve``;
- :func:`read`: a recording read back (PCD, KITTI ``.bin``, LAS, a scans folder, a rosbag2);
- :data:`POINT_DTYPE`, :class:`PointFlag`: the one point type and its flag bits;
- :func:`load_preset`, :func:`list_presets`: the sensor presets.
"""

from __future__ import annotations

from importlib import import_module, metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rt_lidar.api import Scan, attach, read, simulate
    from rt_lidar.errors import ConfigError, RtLidarError
    from rt_lidar.points import POINT_DTYPE, PointFlag
    from rt_lidar.sensor.presets import list_presets, load_preset

__all__ = [
    "POINT_DTYPE",
    "ConfigError",
    "PointFlag",
    "RtLidarError",
    "Scan",
    "__version__",
    "attach",
    "list_presets",
    "load_preset",
    "read",
    "simulate",
]

_LAZY = {
    "simulate": "rt_lidar.api",
    "attach": "rt_lidar.api",
    "read": "rt_lidar.api",
    "Scan": "rt_lidar.api",
    "POINT_DTYPE": "rt_lidar.points",
    "PointFlag": "rt_lidar.points",
    "RtLidarError": "rt_lidar.errors",
    "ConfigError": "rt_lidar.errors",
    "load_preset": "rt_lidar.sensor.presets",
    "list_presets": "rt_lidar.sensor.presets",
}

try:
    __version__ = metadata.version("rt-lidar")
except metadata.PackageNotFoundError:  # a source tree that was not installed
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rt_lidar' has no attribute '{name}'")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
