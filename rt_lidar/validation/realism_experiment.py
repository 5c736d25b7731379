"""``rt-lidar validate --only realism``: simulated scans beside real scans of the same sensor models.

Each preset of :data:`REALISM_PRESETS` drives ``rt-lidar demo --in-process --frames 3 --seed 1``'s street
(the same pipeline, built here) and every scan is measured with :mod:`rt_lidar.validation.realism`; the
statistics are the mean over the three scans. Beside them: the real frames of the shared reference
(``../shared/reference/real``: KITTI's HDL-64E frame, an Ouster OS1-64 frame) measured the same way,
and the values real outdoor scans give (``realism-statistics.md``), each with its residual (simulated
minus real; 0 inside a published interval, the distance to it outside). Raydrop is measured in the
view of KITTI's camera 2 for every sensor (the real KITTI frame is that crop).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.realism import BANDS_M, realism_statistics
from rt_lidar.validation.realism_grid import (
    ScanGrid,
    camera_view,
    grid_from_points,
    read_kitti_bin,
    read_kitti_calib,
    read_ouster_legacy_pcap,
)

__all__ = [
    "REALISM_CHECKS",
    "REALISM_PRESETS",
    "REFERENCE",
    "real_grids",
    "realism",
    "realism_table",
    "simulated_grids",
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
        "zeros40": (0.4, 0.6),
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
outdoor scan; zero readings beyond 40 m: about half on KITTI's HDL-64E S2, none elsewhere."""
STAT_KEYS = {
    "falloff": "ground_falloff_20_30_over_0_10",
    "horizon_m": "ground_horizon_m",
    "texture": "ground_texture_share",
    "zeros40": "zero_share_beyond_40m",
}
GROUND_FRAMES = frozenset({"HDL-64E"})
"""Real frames whose ground statistics are compared: the Ouster frame is indoors (95 % of its returns
within 7 m, no road), so only its sensor statistics (zeros, drops, largest signal) are."""
GROUND_KEYS = ("ground_falloff_20_30_over_0_10", "ground_horizon_m", "ground_texture_share")


def _shared_real() -> Path | None:
    here = Path(__file__).resolve()
    for up in here.parents:
        cand = up / "shared" / "reference" / "real"
        if cand.is_dir():
            return cand
    return None


def real_grids() -> dict[str, ScanGrid]:
    """The real frames of the shared reference, by preset name (none where ``../shared`` is absent)."""
    root = _shared_real()
    if root is None:
        return {}
    out = {}
    kitti = root / "kitti_000008"
    if (kitti / "velodyne_000008.bin").exists():
        out["HDL-64E"] = read_kitti_bin(kitti / "velodyne_000008.bin", kitti / "calib.txt")
    os1 = root / "ouster_os1_64"
    if (os1 / "OS-1-64_1024x10_fw20.pcap").exists():
        out["OS1-64"] = read_ouster_legacy_pcap(
            os1 / "OS-1-64_1024x10_fw20.pcap", os1 / "OS-1-64_sensor_config_reduced.json"
        )
    return out


def simulated_grids(preset_name: str, frames: int = FRAMES, seed: int = SEED) -> list[ScanGrid]:
    """The scans of ``rt-lidar demo --in-process --frames N --seed S --preset P`` on their firing grids
    (first returns; intensity rounded to the sensor's reporting step of 1)."""
    preset = load_preset(preset_name)
    built = build_pipeline(preset, build_world("street", seed=seed), seed=seed)
    try:
        scans = built.pipeline.scans(frames)
    finally:
        built.pipeline.close()
    out = []
    for s in scans:
        p = s.points[s.points["return_id"] == 0]
        xyz = np.stack([p["x"], p["y"], p["z"]], -1)
        out.append(
            grid_from_points(preset_name, xyz, p["intensity"], p["ring"], 1.0, preset.output.intensity)
        )
    return out


def _mean(values: list[Any]) -> float | None:
    v = [float(x) for x in values if x is not None]
    return float(np.mean(v)) if v else None


def _residual(value: float | None, ref: Interval) -> float | None:
    if value is None:
        return None
    lo, hi = ref
    return 0.0 if lo <= value <= hi else (value - lo if value < lo else value - hi)


def _summary(stats: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [
        "ground_falloff_20_30_over_0_10",
        "ground_horizon_m",
        "ground_texture_share",
        "zero_share_beyond_40m",
        "drop_share",
        "hole_share",
        "holes_near_object_share",
        "holes_median_neighbour_range_m",
        "intensity_max",
    ]
    out: dict[str, Any] = {k: _mean([s.get(k) for s in stats]) for k in keys}
    bands = [s.get("ground_intensity_by_band") or [None] * len(BANDS_M) for s in stats]
    out["ground_intensity_by_band"] = [_mean([b[i] for b in bands]) for i in range(len(BANDS_M))]
    out["horizon_rings"] = stats[-1].get("horizon_rings", [])
    return out


DROP_KEYS = ("drop_share", "hole_share", "holes_near_object_share", "holes_median_neighbour_range_m")


def _kitti_calib() -> dict[str, np.ndarray] | None:
    root = _shared_real()
    calib = None if root is None else root / "kitti_000008" / "calib.txt"
    return read_kitti_calib(calib) if calib is not None and calib.exists() else None


def _measure(grid: ScanGrid, calib: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The statistics of ``grid``; with ``calib`` its raydrop statistics are those of the rays in KITTI's
    camera view (the real KITTI frame keeps only those), so that they compare."""
    s = realism_statistics(grid)
    s["intensity_max"] = float(grid.intensity[grid.returned].max()) if grid.returned.any() else None
    if calib is not None:
        crop = dataclasses.replace(
            grid, in_view=grid.in_view & camera_view(grid.direction, calib, (1242, 375))
        )
        cropped = realism_statistics(crop)
        s.update({k: cropped[k] for k in DROP_KEYS})
    return s


def realism(out: Path) -> dict[str, Any]:
    """Measure every preset's simulated scans and the real frames; write ``realism.png``."""
    grids = real_grids()
    if not grids:
        warnings.warn(
            "realism: ../shared/reference/real not found: simulated scans are compared with published "
            "figures only (no real frames)",
            stacklevel=2,
        )
    real = {name: _measure(g) for name, g in grids.items()}
    for name, st in real.items():
        if name not in GROUND_FRAMES:
            st.update(dict.fromkeys(GROUND_KEYS), ground_intensity_by_band=None, horizon_rings=[])
    res: dict[str, Any] = {"presets": list(REALISM_PRESETS)}
    per: dict[str, dict[str, Any]] = {}
    calib = _kitti_calib()
    for name in REALISM_PRESETS:
        sim = _summary([_measure(g, calib) for g in simulated_grids(name)])
        per[name] = sim
        for short, key in STAT_KEYS.items():
            ref = REFERENCE[name][short]
            res.setdefault(f"sim_{short}", []).append(sim[key])
            res.setdefault(f"published_{short}", []).append(f"{ref[0]:g}..{ref[1]:g}")
            res.setdefault(f"residual_{short}", []).append(_residual(sim[key], ref))
            rv = real.get(name, {}).get(key)
            res.setdefault(f"real_frame_{short}", []).append(rv)
            res.setdefault(f"residual_real_frame_{short}", []).append(
                None if rv is None or sim[key] is None else sim[key] - rv
            )
        for key in ("drop_share", "hole_share", "holes_near_object_share", "holes_median_neighbour_range_m"):
            res.setdefault(f"sim_{key}", []).append(sim[key])
            res.setdefault(f"real_frame_{key}", []).append(real.get(name, {}).get(key))
        res.setdefault("sim_near_road_level", []).append(sim["ground_intensity_by_band"][0])
        res.setdefault("sim_intensity_max", []).append(sim["intensity_max"])
        res.setdefault("real_frame_intensity_max", []).append(real.get(name, {}).get("intensity_max"))
    res["real_frames"] = {k: v.get("scan") for k, v in real.items()}
    _plot(out / "realism.png", per, real)
    return res


def _plot(path: Path, sim: dict[str, dict[str, Any]], real: dict[str, dict[str, Any]]) -> None:
    n = len(sim)
    fig, axes = plt.subplots(2, n, figsize=(3.2 * n, 6.0), dpi=100, squeeze=False)
    centres = [5, 15, 25, 40, 60]
    for j, (name, s) in enumerate(sim.items()):
        ax = axes[0][j]
        for label, st, style in (("simulated", s, "o-"), ("real frame", real.get(name), "s--")):
            if not st:
                continue
            b = st.get("ground_intensity_by_band") or []
            if b and b[0]:
                ax.plot(centres, [v / b[0] if v is not None else np.nan for v in b], style, label=label)
        lo, hi = REFERENCE[name]["falloff"]
        ax.fill_between([20, 30], lo, hi, alpha=0.25, color="g", label="real 20-30 m")
        ax.set(title=name, xlabel="ground range band (m)", ylabel="ground intensity / 0-10 m", ylim=(0, 1.6))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax = axes[1][j]
        for label, st, style in (("simulated", s, "o-"), ("real frame", real.get(name), "s--")):
            rows = (st or {}).get("horizon_rings") or []
            if rows:
                ax.plot([r[0] for r in rows], [r[1] for r in rows], style, ms=3, label=label)
        lo, hi = REFERENCE[name]["horizon_m"]
        ax.axvspan(lo, min(hi, 150), alpha=0.2, color="g", label="real horizon")
        ax.axhline(0.5, color="k", lw=0.8)
        ax.set(xlabel="range to the ground (m)", ylabel="P(ground return)", xscale="log", xlim=(3, 150))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _real(m: dict[str, Any], key: str, lo: float, hi: float) -> bool:
    v = m[f"real_frame_{key}"][0]
    return "HDL-64E" not in m["real_frames"] or (v is not None and lo <= v <= hi)


def _on_kitti(m: dict[str, Any], check: Any) -> bool | None:
    """``check()`` where the KITTI frame was measured; None (not run) where it is absent."""
    return bool(check()) if "HDL-64E" in m.get("real_frames", {}) else None


REALISM_CHECKS: dict[str, list[tuple[str, Any]]] = {
    "realism": [
        # the measuring tool on the real KITTI frame gives what realism-statistics.md says real scans give
        # (None, not run, where ../shared/reference/real is absent: the report says so)
        (
            "KITTI frame: ground horizon >= 60 m",
            lambda m: _on_kitti(m, lambda: (m["real_frame_horizon_m"][0] or 0) >= 60.0),
        ),
        (
            "KITTI frame: texture 0.12..0.84",
            lambda m: _on_kitti(m, lambda: 0.12 <= (m["real_frame_texture"][0] or 0) <= 0.84),
        ),
        (
            "KITTI frame: about half zeros beyond 40 m",
            lambda m: _on_kitti(m, lambda: 0.4 <= (m["real_frame_zeros40"][0] or 0) <= 0.8),
        ),
    ]
}
"""Checks that gate ``validate``; the simulated residuals are reported beside them (docs/realism.md)."""


def realism_table(rep: dict[str, Any]) -> str:
    """The realism report as a text table: per preset and statistic, simulated, real frame (where one
    was measured), published figure and the residual to it."""
    head = ("preset", "statistic", "simulated", "real frame", "published", "residual")
    rows = ["{:8} {:10} {:>10} {:>10} {:>11} {:>9}".format(*head)]

    def fmt(v: Any) -> str:
        return "-" if v is None else f"{v:.3g}"

    for i, name in enumerate(rep["presets"]):
        for key in STAT_KEYS:
            rows.append(
                f"{name:8} {key:10} {fmt(rep[f'sim_{key}'][i]):>10} {fmt(rep[f'real_frame_{key}'][i]):>10} "
                f"{rep[f'published_{key}'][i]:>11} {fmt(rep[f'residual_{key}'][i]):>9}"
            )
    return "\n".join(rows)
