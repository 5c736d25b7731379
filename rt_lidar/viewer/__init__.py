"""The live viewer: a pyqtgraph/Qt window on the ZeroMQ stream (or a recording).

Modules: :mod:`.colors` (colour modes, NumPy only), :mod:`.sources` (live stream / PCD folder, HUD
figures), :mod:`.drive` (keyboard -> car controls), :mod:`.window` (the Qt window), :mod:`.serve`
(a publishing demo pipeline), :mod:`.app` (``rt-lidar view``). Qt is imported only by ``window`` and
``app.run_viewer``, so the rest works without the ``viewer`` extra.
"""

from rt_lidar.viewer.app import ViewerOptions, run_viewer
from rt_lidar.viewer.colors import COLOR_MODES, point_colors, point_positions
from rt_lidar.viewer.drive import AirSimControlSink, BicycleControlSink, CarControlSink, KeyboardDriver

__all__ = [
    "COLOR_MODES",
    "AirSimControlSink",
    "BicycleControlSink",
    "CarControlSink",
    "KeyboardDriver",
    "ViewerOptions",
    "point_colors",
    "point_positions",
    "run_viewer",
]
