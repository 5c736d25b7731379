"""The typical KITTI HDL-64E frame's raydrop: thirteen frames in camera 2's view (docs/realism.md, changes
53-55).

The model's raydrop was once fitted to one frame, KITTI 000008, whose parked cars' windows make it drop
7x more rays than the typical frame (change 54). ``validate --only realism`` compares the simulated
HDL-64E's raydrop with the thirteen frames' median and range instead (change 55); 000008 is one of them,
their highest. The table holds each frame's (returns, holes) per surface class and range band
(:func:`rt_lidar.validation.realism_holes.class_counts`), its hole share, near-object share of holes and
per-laser hole spread (:mod:`rt_lidar.validation.realism_lasers`), as ``realism_statistics`` reads them
in camera 2's view.

Source: frame 000008 is ``../shared/reference/real/kitti_000008`` (its own ``calib.txt``); the twelve
others are full turns from ``open-mmlab/OpenPCDet`` pull request #653's head, commit
``0b243c8c41909cf70af66f6a906427918610bd56``, ``data/kitti/{training,testing}/velodyne/00000{0..5}.bin``
(KITTI, CC BY-NC-SA 3.0), each read with 000008's ``calib.txt`` beside it (camera 2's view; an
approximation for other recording days, change 53). testing 000005 is vendored
(``tests/data/real/HDL-64E/kitti_testing_000005.bin``), and ``tests/rt_lidar/test_kitti_typical.py``
reads it (and 000008 where ``../shared`` is present) and checks its row here. Computed on 7 Dec 2026
with this tree's reader (``kitti_laser_rings``, change 53's fixes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.validation.realism_holes import HOLE_CLASSES, hole_rates
from rt_lidar.validation.realism_layout import summed_counts

TYPICAL_PRESET = "HDL-64E"
"""The preset whose simulated raydrop is set beside the typical KITTI frame (KITTI's sensor)."""

__all__ = [
    "CAMERA2_CALIB_000008",
    "KITTI_VIEW_FRAMES",
    "TYPICAL_PRESET",
    "KittiViewFrame",
    "camera2_view",
    "typical_comparison",
    "typical_kitti_reference",
    "typical_table",
]


CAMERA2_CALIB_000008 = """\
P2: 7.215377000000e+02 0.000000000000e+00 6.095593000000e+02 4.485728000000e+01 0.000000000000e+00 \
7.215377000000e+02 1.728540000000e+02 2.163791000000e-01 0.000000000000e+00 0.000000000000e+00 \
1.000000000000e+00 2.745884000000e-03
R0_rect: 9.999238848686e-01 9.837759658694e-03 -7.445048075169e-03 -9.869795292616e-03 \
9.999421238899e-01 -4.278459120542e-03 7.402527146041e-03 4.351614043117e-03 9.999631047249e-01
Tr_velo_to_cam: 7.533744908869e-03 -9.999713897705e-01 -6.166020175442e-04 -4.069766029716e-03 \
1.480249036103e-02 7.280732970685e-04 -9.998902082443e-01 -7.631617784500e-02 9.998620748520e-01 \
7.523790001869e-03 1.480755023658e-02 -2.717806100845e-01
"""
"""Camera 2's projection in KITTI frame 000008's calib.txt (the lines the camera crop reads): the view
every KITTI frame's and simulated scan's raydrop is measured in (changes 30 and 53)."""


def camera2_view() -> dict[str, np.ndarray]:
    """KITTI frame 000008's camera-2 calibration (:data:`CAMERA2_CALIB_000008`), as
    :func:`~rt_lidar.validation.realism_grid.read_kitti_calib` reads its file."""
    from rt_lidar.validation.realism_grid import parse_kitti_calib

    return parse_kitti_calib(CAMERA2_CALIB_000008)


@dataclass(frozen=True)
class KittiViewFrame:
    """One real frame's raydrop in camera 2's view."""

    hole_class_counts: dict[str, tuple[int, int]]
    hole_share: float
    holes_near_object_share: float
    laser_hole_spread: float | None


KITTI_VIEW_FRAMES: dict[str, KittiViewFrame] = {
    "000008": KittiViewFrame(
        {
            "object_0_10m": (5076, 1410),
            "object_10_20m": (4291, 201),
            "object_20_infm": (2115, 204),
            "ground_0_10m": (2405, 20),
            "ground_10_20m": (2441, 107),
            "ground_20_infm": (910, 54),
        },
        0.1641,
        0.807,
        1.696,
    ),
    "training_000000": KittiViewFrame(
        {
            "object_0_10m": (830, 20),
            "object_10_20m": (10119, 440),
            "object_20_infm": (465, 32),
            "ground_0_10m": (4488, 16),
            "ground_10_20m": (4304, 78),
            "ground_20_infm": (45, 7),
        },
        0.0291,
        0.776,
        1.913,
    ),
    "training_000001": KittiViewFrame(
        {
            "object_0_10m": (719, 0),
            "object_10_20m": (2849, 20),
            "object_20_infm": (2424, 136),
            "ground_0_10m": (4335, 0),
            "ground_10_20m": (5224, 13),
            "ground_20_infm": (3079, 100),
        },
        0.0161,
        0.074,
        1.873,
    ),
    "training_000002": KittiViewFrame(
        {
            "object_0_10m": (8065, 88),
            "object_10_20m": (3469, 45),
            "object_20_infm": (1924, 117),
            "ground_0_10m": (3348, 1),
            "ground_10_20m": (2412, 11),
            "ground_20_infm": (992, 29),
        },
        0.0182,
        0.457,
        1.371,
    ),
    "training_000003": KittiViewFrame(
        {
            "object_0_10m": (5068, 287),
            "object_10_20m": (5805, 297),
            "object_20_infm": (2012, 106),
            "ground_0_10m": (2974, 16),
            "ground_10_20m": (2498, 22),
            "ground_20_infm": (554, 45),
        },
        0.0741,
        0.755,
        2.063,
    ),
    "training_000004": KittiViewFrame(
        {
            "object_0_10m": (90, 0),
            "object_10_20m": (670, 12),
            "object_20_infm": (4034, 214),
            "ground_0_10m": (4238, 1),
            "ground_10_20m": (6233, 15),
            "ground_20_infm": (3798, 119),
        },
        0.0217,
        0.033,
        1.73,
    ),
    "training_000005": KittiViewFrame(
        {
            "object_0_10m": (284, 5),
            "object_10_20m": (1089, 4),
            "object_20_infm": (5588, 103),
            "ground_0_10m": (4007, 5),
            "ground_10_20m": (5631, 22),
            "ground_20_infm": (3363, 39),
        },
        0.009,
        0.051,
        None,
    ),
    "testing_000000": KittiViewFrame(
        {
            "object_0_10m": (2751, 59),
            "object_10_20m": (5871, 40),
            "object_20_infm": (2525, 177),
            "ground_0_10m": (3915, 5),
            "ground_10_20m": (4223, 31),
            "ground_20_infm": (1252, 26),
        },
        0.0177,
        0.293,
        1.754,
    ),
    "testing_000001": KittiViewFrame(
        {
            "object_0_10m": (24, 0),
            "object_10_20m": (1573, 266),
            "object_20_infm": (3819, 321),
            "ground_0_10m": (4703, 12),
            "ground_10_20m": (6141, 25),
            "ground_20_infm": (3077, 52),
        },
        0.0392,
        0.393,
        3.198,
    ),
    "testing_000002": KittiViewFrame(
        {
            "object_0_10m": (2568, 363),
            "object_10_20m": (3284, 653),
            "object_20_infm": (3722, 484),
            "ground_0_10m": (3208, 6),
            "ground_10_20m": (3392, 42),
            "ground_20_infm": (1520, 83),
        },
        0.1092,
        0.623,
        2.422,
    ),
    "testing_000003": KittiViewFrame(
        {
            "object_0_10m": (1191, 0),
            "object_10_20m": (3914, 85),
            "object_20_infm": (3566, 200),
            "ground_0_10m": (3852, 5),
            "ground_10_20m": (5068, 20),
            "ground_20_infm": (1823, 110),
        },
        0.0243,
        0.202,
        1.609,
    ),
    "testing_000004": KittiViewFrame(
        {
            "object_0_10m": (880, 5),
            "object_10_20m": (4460, 83),
            "object_20_infm": (3157, 176),
            "ground_0_10m": (4081, 3),
            "ground_10_20m": (4995, 17),
            "ground_20_infm": (2129, 50),
        },
        0.0172,
        0.263,
        1.936,
    ),
    "testing_000005": KittiViewFrame(
        {
            "object_0_10m": (3310, 463),
            "object_10_20m": (4807, 556),
            "object_20_infm": (2287, 226),
            "ground_0_10m": (3846, 26),
            "ground_10_20m": (3085, 16),
            "ground_20_infm": (1618, 107),
        },
        0.0894,
        0.731,
        2.596,
    ),
}
"""(returns, holes) per class, hole share, near-object share of holes and per-laser hole spread of each
frame in camera 2's view (None: too few lasers qualify). See the module docstring for the source."""

Typical = tuple[float, float, float]
"""(median, lowest, highest) over the frames that give a value."""


def _typical(values: list[float | None]) -> Typical | None:
    v = [float(x) for x in values if x is not None]
    return (float(np.median(v)), min(v), max(v)) if v else None


def typical_kitti_reference(frames: dict[str, KittiViewFrame] | None = None) -> dict[str, Typical | None]:
    """The frames' (median, lowest, highest) of the hole share, the near-object share of holes, the
    per-laser hole spread and each class's hole rate (``hole_rate_<class>``): the typical KITTI
    HDL-64E frame that ``validate --only realism`` sets beside the simulated one (thirteen frames by
    default)."""
    rows = list((KITTI_VIEW_FRAMES if frames is None else frames).values())
    out: dict[str, Typical | None] = {
        "hole_share": _typical([f.hole_share for f in rows]),
        "holes_near_object_share": _typical([f.holes_near_object_share for f in rows]),
        "laser_hole_spread": _typical([f.laser_hole_spread for f in rows]),
    }
    rates = [hole_rates(f.hole_class_counts) for f in rows]
    for k in HOLE_CLASSES:
        out[f"hole_rate_{k}"] = _typical([r[k] for r in rates])
    return out


def typical_comparison(
    sim_stats: list[dict[str, Any]], reference: dict[str, Typical | None] | None = None
) -> dict[str, dict[str, float | None]]:
    """The simulated scans' raydrop in KITTI's view (``sim_stats``: each scan's statistics in camera 2's
    view; class rates from their counts summed, the other statistics their mean) beside the typical
    frame's median and range (:func:`typical_kitti_reference`): per statistic ``simulated``, ``median``,
    ``low``, ``high``, ``residual`` (0 inside the range, else the distance to it) and ``over_median``."""
    ref = typical_kitti_reference() if reference is None else reference
    rates = hole_rates(summed_counts(sim_stats))
    sim: dict[str, float | None] = {f"hole_rate_{k}": rates[k] for k in HOLE_CLASSES}
    for key in ("hole_share", "holes_near_object_share", "laser_hole_spread"):
        v = [float(s[key]) for s in sim_stats if s.get(key) is not None]
        sim[key] = float(np.mean(v)) if v else None
    out: dict[str, dict[str, float | None]] = {}
    for key, typical in ref.items():
        value = sim.get(key)
        if typical is None:
            continue
        med, lo, hi = typical
        residual = (
            None if value is None else (0.0 if lo <= value <= hi else value - (lo if value < lo else hi))
        )
        over = None if value is None or med == 0 else value / med
        out[key] = {
            "simulated": value,
            "median": med,
            "low": lo,
            "high": hi,
            "residual": residual,
            "over_median": over,
        }
    return out


def typical_table(preset: str, rows: dict[str, dict[str, float | None]]) -> str:
    """:func:`typical_comparison`'s rows as text."""

    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.3g}"

    n = len(KITTI_VIEW_FRAMES)
    head = f"{preset} raydrop in KITTI's view against the typical KITTI frame ({n} frames: median (low-high))"
    out = [head, f"  {'statistic':40} {'simulated':>10} {'typical':>22} {'residual':>9} {'x median':>9}"]
    for key, r in rows.items():
        typical = f"{f(r['median'])} ({f(r['low'])}-{f(r['high'])})"
        out.append(
            f"  {key:40} {f(r['simulated']):>10} {typical:>22} {f(r['residual']):>9} {f(r['over_median']):>9}"
        )
    return "\n".join(out)
