"""What ``rt-lidar validate --only realism`` compares and against what: the presets it simulates, the
statistics it sets beside real scans, and the values real outdoor scans give (``realism-statistics.md``).
"""

from __future__ import annotations

import math

__all__ = [
    "FRAMES",
    "GROUND_KEYS",
    "INTENSITY_KEYS",
    "REALISM_PRESETS",
    "REFERENCE",
    "SEED",
    "STAT_KEYS",
    "VIEW_KEYS",
    "Interval",
]

REALISM_PRESETS = ("HDL-64E", "HDL-32E", "VLP-32C", "VLS-128", "OS1-64")
FRAMES, SEED = 3, 1

Interval = tuple[float, float]
REFERENCE: dict[str, dict[str, Interval]] = {
    # realism-statistics.md: (low, high); a ">= x" figure is (x, inf)
    "HDL-64E": {
        "falloff": (0.45, 0.76),
        "horizon_m": (64.0, math.inf),
        "texture": (0.12, 0.84),
        "zeros40": (0.58, 0.86),  # thirteen KITTI frames, camera 2's view: 0.588-0.852 (change 56)
    },
    "HDL-32E": {
        "falloff": (0.45, 0.76),
        "horizon_m": (35.0, 43.0),
        "texture": (0.12, 0.84),
        "zeros40": (0.0, 0.0),
    },
    "VLP-32C": {
        "falloff": (0.45, 0.76),
        "horizon_m": (67.0, math.inf),
        "texture": (0.12, 0.84),
        "zeros40": (0.0, 0.0),
    },
    "VLS-128": {
        "falloff": (0.45, 0.76),
        "horizon_m": (49.0, 59.0),
        "texture": (0.12, 0.84),
        "zeros40": (0.0, 0.0),
    },
    "OS1-64": {
        "falloff": (0.21, 0.31),
        "horizon_m": (45.0, 55.0),
        "texture": (0.12, 0.84),
        "zeros40": (0.0, 0.0),
    },
}
"""Real outdoor scans per sensor model (``realism-statistics.md``): fall-off 0.45-0.76 for calibrated
Velodynes and KITTI's HDL-64E, ~0.26 for an OS1-64's signal (+-20 % here); ground horizon HDL-64E >= 64 m,
HDL-32E ~39, VLP-32C >= 67, VLS-128 ~54, OS1-64 ~50 m (+-10 % here); texture 0.12-0.84 on every real
outdoor scan; zero readings beyond 40 m: 0.588-0.852 of the returns on KITTI's HDL-64E S2 (thirteen frames in
camera 2's view, 000008 and OpenPCDet 0b243c8's twelve, median 0.740: docs/realism.md, changes 53 and 56;
rounded outward), none elsewhere."""
STAT_KEYS = {
    "falloff": "ground_falloff_20_30_over_0_10",
    "horizon_m": "ground_horizon_m",
    "horizon_ret": "ground_horizon_returned_m",
    "horizon_loc": "ground_horizon_local_m",
    "horizon_lvl": "ground_horizon_level_m",
    "texture": "ground_texture_share",
    "zeros40": "zero_share_beyond_40m",
}
VIEW_KEYS = {
    "horiz_view": "view_horizon_m",
    "ret_view": "view_horizon_returned_m",
    "loc_view": "view_horizon_local_m",
    "lvl_view": "view_horizon_level_m",
}
"""The ground horizon (to the plane, and where the road answered) over the rays in KITTI's camera view,
as the real KITTI frame measures it (camera 2's crop looks ahead): on the demo street the whole turn's
horizon is set by the ground behind the sensor, a concrete slab where the street ends 30 m back
(docs/realism.md, change 31), the view's by the asphalt road ahead; ``loc_view`` and ``lvl_view`` the
horizon on the scan's own road, and where it is level, in that view (change 64)."""
GROUND_KEYS = (
    "ground_falloff_20_30_over_0_10",
    "ground_horizon_m",
    "ground_horizon_returned_m",
    "ground_horizon_local_m",
    "ground_horizon_level_m",
    "ground_texture_share",
)
"""Statistics of the road: compared only on real frames recorded outdoors (:func:`is_outdoor`)."""
INTENSITY_KEYS = ("ground_falloff_20_30_over_0_10", "ground_texture_share", "intensity_max")
"""Statistics of the reported intensity: left out where a real frame reports another quantity than the
simulated preset (an Ouster RNG15 profile's reflectivity beside the OS1-64's signal)."""
