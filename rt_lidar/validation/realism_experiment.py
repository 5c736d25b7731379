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

import contextlib
import dataclasses
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.frame_loop import Sensed
from rt_lidar.sensor.materials import MaterialTable
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.unreal_bridge.world.street import street_scene
from rt_lidar.validation.kitti_typical import TYPICAL_PRESET, typical_comparison
from rt_lidar.validation.real_frames import (
    RealFrame,
    is_outdoor,
    read_frame,
    shared_frames,
    shared_real_dir,
    vendored_frames,
)
from rt_lidar.validation.realism import BANDS_M, realism_statistics
from rt_lidar.validation.realism_grid import (
    KITTI_STEP,
    KITTI_UNITS,
    ScanGrid,
    camera_view,
    grid_from_points,
    kitti_file_intensity,
    read_kitti_calib,
)
from rt_lidar.validation.realism_layout import CLASS_KEYS, layout_report
from rt_lidar.validation.realism_output import plot_realism, realism_table
from rt_lidar.validation.realism_reference import (
    FRAMES,
    GROUND_KEYS,
    INTENSITY_KEYS,
    REALISM_PRESETS,
    REFERENCE,
    SEED,
    STAT_KEYS,
    VIEW_KEYS,
    Interval,
)
from rt_lidar.validation.road_echo_terms import (
    echo_slope,
    gain_asked_at_r10,
    laser_echo_spreads,
    laser_echoes,
    road_echo_slopes,
    road_material,
    spread_echo_slope,
)

__all__ = [
    "REALISM_CHECKS",
    "REALISM_PRESETS",
    "REFERENCE",
    "real_grids",
    "realism",
    "realism_table",
    "scan_grid",
    "simulated_grids",
    "simulated_scans",
]


def _shared_real() -> Path | None:
    return shared_real_dir()


@dataclass
class RealismOptions:
    """What ``rt-lidar validate --only realism`` runs: the presets simulated, the scans a preset, the
    user's own real frames (``--presets``, ``--frames``, ``--real``)."""

    presets: tuple[str, ...] = REALISM_PRESETS
    frames: int = FRAMES
    real: tuple[RealFrame, ...] = ()


_OPTIONS = RealismOptions()


@contextlib.contextmanager
def realism_options(options: RealismOptions) -> Iterator[None]:
    """Run :func:`realism` (through ``run_validation``) with ``options`` inside the block."""
    global _OPTIONS
    saved, _OPTIONS = _OPTIONS, options
    try:
        yield
    finally:
        _OPTIONS = saved


def real_frames(extra: tuple[RealFrame, ...] = ()) -> list[RealFrame]:
    """Every real frame found: the shared reference's, the vendored ones, then ``extra`` (the user's)."""
    root = _shared_real()
    if root is None:
        warnings.warn(
            "realism: ../shared/reference/real not found: KITTI's HDL-64E frame and the Ouster OS1-64 "
            "frame are left out (the KITTI checks are not run)",
            stacklevel=2,
        )
    return [*shared_frames(root), *vendored_frames(), *extra]


def real_grids() -> dict[str, ScanGrid]:
    """The real frames of the shared reference, by preset name (none where ``../shared`` is absent)."""
    return {f.preset: read_frame(f) for f in shared_frames(_shared_real())}


REAL_FRAME_ROTATION_HZ = {"HDL-32E": 20.0}
"""Rotation rates of the presets whose real frames turn at another rate than the preset's default: the
road's texture compares each shot with its neighbours on the ring, so the shots must lie as far apart as
the real frame's. nuScenes' HDL-32E frame holds 1084 firings a turn, 20.0 Hz at the HDL-32E's 46.08 us
firing cycle (the preset's 10 Hz gives 2170); nuScenes gives its lidar's capture rate as 20 Hz (Caesar et
al., arXiv:1903.11027, its sensor table; not re-read here) (docs/realism.md change 46)."""


def simulated_scans(
    preset_name: str,
    frames: int = FRAMES,
    seed: int = SEED,
    layout: str = "demo",
    materials: MaterialTable | None = None,
    on_sensed: Callable[[Sensed], None] | None = None,
) -> tuple[SensorPreset, list[Scan]]:
    """The preset as it turns and the scans of ``rt-lidar demo --in-process --frames N --seed S --preset P``,
    turning at the rate its real frame was recorded at (:data:`REAL_FRAME_ROTATION_HZ`; else its own) so
    that neighbouring shots lie as far apart as the real frame's; ``layout`` "residential": cars parked nose
    to tail beside the lane (KITTI's frame's layout); ``materials``: another material table; ``on_sensed``
    sees every sensed sim frame (its hits and physics result) before it is stitched."""
    preset = load_preset(preset_name)
    hz = REAL_FRAME_ROTATION_HZ.get(preset.name)
    if hz is not None and hz != preset.scan.rotation_hz:  # the rate its real frame was recorded at
        preset = dataclasses.replace(preset, scan=dataclasses.replace(preset.scan, rotation_hz=hz))
    scene = "street" if layout == "demo" else street_scene(seed=seed, layout=layout)
    built = build_pipeline(preset, build_world(scene, seed=seed), seed=seed, materials=materials)
    built.pipeline.on_sensed = on_sensed
    try:
        return preset, built.pipeline.scans(frames)
    finally:
        built.pipeline.close()


def scan_grid(preset: SensorPreset, scan: Scan) -> ScanGrid:
    """One simulated scan on its firing grid: first returns, intensity rounded to the reporting step of 1,
    an uncalibrated ``raw_intensity`` (the S2's byte) as KITTI's files hold it (``kitti_file_intensity``)."""
    p = scan.points[scan.points["return_id"] == 0]
    xyz = np.stack([p["x"], p["y"], p["z"]], -1)
    inten, step, units = p["intensity"], 1.0, preset.output.intensity
    if preset.output.intensity == "raw_intensity":  # the S2's byte, as KITTI's files hold it
        inten, step, units = kitti_file_intensity(inten), KITTI_STEP, KITTI_UNITS
    return grid_from_points(preset.name, xyz, inten, p["ring"], step, units)


def simulated_grids(
    preset_name: str, frames: int = FRAMES, seed: int = SEED, layout: str = "demo"
) -> list[ScanGrid]:
    """The scans of :func:`simulated_scans` on their firing grids (:func:`scan_grid`)."""
    preset, scans = simulated_scans(preset_name, frames, seed, layout)
    return [scan_grid(preset, s) for s in scans]


def _mean(values: list[Any]) -> float | None:
    v = [float(x) for x in values if x is not None]
    return float(np.mean(v)) if v else None


def _residual(value: float | None, ref: Interval) -> float | None:
    if value is None:
        return None
    lo, hi = ref
    return 0.0 if lo <= value <= hi else (value - lo if value < lo else value - hi)


SUMMARY_KEYS = (
    "ground_falloff_20_30_over_0_10",
    "ground_horizon_m",
    "ground_horizon_returned_m",
    "ground_horizon_local_m",
    "grazing_at_local_horizon_deg",
    "ground_horizon_level_m",
    "grazing_at_level_horizon_deg",
    "road_rise_50m",
    "road_rise_70m",
    "ground_texture_share",
    "zero_share_beyond_40m",
    "drop_share",
    "hole_share",
    "holes_near_object_share",
    "holes_median_neighbour_range_m",
    "laser_hole_spread",
    "intensity_max",
)
DROP_KEYS = (
    "drop_share",
    "hole_share",
    "holes_near_object_share",
    "holes_median_neighbour_range_m",
    "laser_hole_spread",
)
FULL_DROP_KEYS = tuple(f"full_{k}" for k in DROP_KEYS)
"""The raydrop statistics over every ray of a scan (``DROP_KEYS`` are over KITTI's camera view where
the KITTI calibration is found)."""


def _summary(stats: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [*SUMMARY_KEYS, *FULL_DROP_KEYS, *VIEW_KEYS.values()]
    out: dict[str, Any] = {k: _mean([s.get(k) for s in stats]) for k in keys}
    bands = [s.get("ground_intensity_by_band") or [None] * len(BANDS_M) for s in stats]
    out["ground_intensity_by_band"] = [_mean([b[i] for b in bands]) for i in range(len(BANDS_M))]
    out["horizon_rings"] = stats[-1].get("horizon_rings", [])
    out["horizon_lasers"] = stats[-1].get("horizon_lasers", [])
    out["ground_pd_by_range_grazing"] = stats[-1].get("ground_pd_by_range_grazing", [])
    out["road_profile"] = stats[-1].get("road_profile", [])
    return out


def _kitti_calib() -> dict[str, np.ndarray] | None:
    root = _shared_real()
    calib = None if root is None else root / "kitti_000008" / "calib.txt"
    return read_kitti_calib(calib) if calib is not None and calib.exists() else None


def _measure(grid: ScanGrid, calib: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The statistics of ``grid``; with ``calib`` its raydrop statistics are those of the rays in KITTI's
    camera view (the real KITTI frame keeps only those), so that they compare, and its ground horizon in
    that view is ``view_*`` (None without ``calib``); ``full_*`` keep those of every ray."""
    s = realism_statistics(grid)
    s["intensity_max"] = float(grid.intensity[grid.returned].max()) if grid.returned.any() else None
    s.update({f"full_{k}": s.get(k) for k in DROP_KEYS})
    s.update(dict.fromkeys(VIEW_KEYS.values()))
    if calib is not None:
        crop = dataclasses.replace(
            grid, in_view=grid.in_view & camera_view(grid.direction, calib, (1242, 375))
        )
        cropped = realism_statistics(crop)
        s.update({k: cropped[k] for k in (*DROP_KEYS, *CLASS_KEYS)})
        s["view_horizon_m"] = cropped.get("ground_horizon_m")
        s["view_horizon_returned_m"] = cropped.get("ground_horizon_returned_m")
        s["view_horizon_local_m"] = cropped.get("ground_horizon_local_m")
        s["view_horizon_level_m"] = cropped.get("ground_horizon_level_m")
    return s


REAL_SCAN_KEYS = (
    *SUMMARY_KEYS,
    *CLASS_KEYS,
    *VIEW_KEYS.values(),
    "sensor_height_m",
    "ground_intensity_by_band",
    "horizon_rings",
    "horizon_lasers",
    "ground_pd_by_range_grazing",
    "road_profile",
    "road_echo_lasers",
    "road_echo_slope",
    "road_echo_spreads",
    "road_spread_slope",
    "road_gain_r10",
    "points",
)


def _road_echo_readings(preset: SensorPreset, st: dict[str, Any]) -> dict[str, Any]:
    """A scan's road echo read back laser by laser from its ``horizon_lasers`` (change 52): from the
    zeros alone, and its mean with its spread from the return rate and the zeros together (the second
    amendment), each with its slope over range, and the receiver gain its road asks over the model's at
    the datasheet's 10 % range (change 56)."""
    lasers, height = st.get("horizon_lasers") or [], st.get("sensor_height_m")
    echoes = laser_echoes(preset, lasers, height)
    spreads = laser_echo_spreads(preset, lasers, height)
    return {
        "road_echo_lasers": echoes,
        "road_echo_slope": echo_slope(echoes),
        "road_echo_spreads": spreads,
        "road_spread_slope": spread_echo_slope(spreads),
        "road_gain_r10": gain_asked_at_r10(preset, spreads),
    }


def _measure_real(frame: RealFrame) -> dict[str, Any]:
    """One real frame's entry of the report: where it came from and its statistics (no road statistics
    for a frame recorded indoors)."""
    grid = read_frame(frame)
    st = _measure(grid)
    if frame.kitti_view:  # the frame is KITTI's camera view already
        st["view_horizon_m"] = st.get("ground_horizon_m")
        st["view_horizon_returned_m"] = st.get("ground_horizon_returned_m")
        st["view_horizon_local_m"] = st.get("ground_horizon_local_m")
        st["view_horizon_level_m"] = st.get("ground_horizon_level_m")
    outdoor = is_outdoor(grid)
    if not outdoor:
        st.update(
            dict.fromkeys(GROUND_KEYS),
            ground_intensity_by_band=None,
            horizon_rings=[],
            horizon_lasers=[],
            ground_pd_by_range_grazing=[],
            road_profile=[],
        )
    preset = load_preset(frame.preset)
    st.update(_road_echo_readings(preset, st))
    read_as = [grid.units, grid.note]
    if grid.units.startswith("Ouster reflectivity") and preset.output.intensity != (
        "calibrated_reflectivity"
    ):  # an RNG15 profile carries no signal: its range-compensated reflectivity is another quantity
        st.update(dict.fromkeys(INTENSITY_KEYS), ground_intensity_by_band=None)
        read_as.append(f"not the simulated {frame.preset}'s signal: its intensity statistics left out")
    return {
        "label": frame.label,
        "preset": frame.preset,
        "file": frame.path.name,
        "path": str(frame.path),
        "origin": frame.origin,
        "read_as": "; ".join(x for x in read_as if x),
        "outdoor": outdoor,
        "kitti_view": frame.kitti_view,
        "statistics": {k: st.get(k) for k in REAL_SCAN_KEYS},
    }


def _median(values: list[Any]) -> float | None:
    v = [float(x) for x in values if x is not None]
    return float(np.median(v)) if v else None


def _residuals(sim: dict[str, Any], scan: dict[str, Any]) -> dict[str, float | None]:
    """Simulated minus real, statistic by statistic; raydrop over the same view (KITTI's crop for the
    KITTI frame, every ray for the others)."""
    st = scan["statistics"]
    out: dict[str, float | None] = {}
    view = {
        "horizon_m": "view_horizon_m",
        "horizon_ret": "view_horizon_returned_m",
        "horizon_loc": "view_horizon_local_m",
        "horizon_lvl": "view_horizon_level_m",
    }
    pairs = [
        (short, view.get(short, key) if scan["kitti_view"] else key, key) for short, key in STAT_KEYS.items()
    ]
    pairs += [(k, k if scan["kitti_view"] else f"full_{k}", k) for k in DROP_KEYS]
    for short, sim_key, real_key in pairs:
        a, b = sim.get(sim_key), st.get(real_key)
        out[short] = None if a is None or b is None else float(a) - float(b)
    return out


def realism(out: Path) -> dict[str, Any]:
    """Measure every preset's simulated scans and every real frame found; write ``realism.png``."""
    opts = _OPTIONS
    presets = list(dict.fromkeys([*opts.presets, *(f.preset for f in opts.real)]))
    frames = real_frames(opts.real)
    left_out = [f for f in frames if f.preset not in presets]
    if left_out:
        warnings.warn(
            "realism: real frames of presets not simulated left out: "
            + ", ".join(f"{f.label} ({f.preset})" for f in left_out),
            stacklevel=2,
        )
    scans = [_measure_real(f) for f in frames if f.preset in presets]
    res: dict[str, Any] = {"presets": presets, "frames_per_preset": opts.frames}
    per: dict[str, dict[str, Any]] = {}
    calib = _kitti_calib()
    for name in presets:
        stats = [_measure(g, calib) for g in simulated_grids(name, opts.frames)]
        sim = _summary(stats)
        per[name] = sim
        mine = [sc for sc in scans if sc["preset"] == name]
        kitti = [sc for sc in mine if sc["kitti_view"]]
        if kitti and calib is not None:
            res.setdefault("layouts", {})[name] = _layouts(name, opts.frames, calib, sim, stats, kitti[0])
        if name == TYPICAL_PRESET and calib is not None:  # the typical KITTI frame (change 55)
            res.setdefault("typical_kitti", {})[name] = typical_comparison(stats)
        for short, key in STAT_KEYS.items():
            ref = REFERENCE.get(name, {}).get(short)
            res.setdefault(f"sim_{short}", []).append(sim[key])
            res.setdefault(f"published_{short}", []).append(f"{ref[0]:g}..{ref[1]:g}" if ref else "-")
            res.setdefault(f"residual_{short}", []).append(_residual(sim[key], ref) if ref else None)
            rv = _median([sc["statistics"].get(key) for sc in mine])
            res.setdefault(f"real_frame_{short}", []).append(rv)
            res.setdefault(f"residual_real_frame_{short}", []).append(
                None if rv is None or sim[key] is None else sim[key] - rv
            )
        for short, key in VIEW_KEYS.items():  # the horizon in KITTI's view, beside KITTI's frame
            rv = _median([sc["statistics"].get(key) for sc in kitti])
            res.setdefault(f"sim_{short}", []).append(sim[key])
            res.setdefault(f"published_{short}", []).append("-")
            res.setdefault(f"residual_{short}", []).append(None)
            res.setdefault(f"real_frame_{short}", []).append(rv)
            res.setdefault(f"residual_real_frame_{short}", []).append(
                None if rv is None or sim[key] is None else sim[key] - rv
            )
        for key in (*DROP_KEYS, *FULL_DROP_KEYS):
            res.setdefault(f"sim_{key}", []).append(sim[key])
        for key in DROP_KEYS:
            res.setdefault(f"real_frame_{key}", []).append(
                _median([sc["statistics"].get(key) for sc in mine if sc["kitti_view"]])
            )
        res.setdefault("sim_near_road_level", []).append(sim["ground_intensity_by_band"][0])
        preset = load_preset(name)
        slopes = road_echo_slopes(preset, road_material(preset))  # change 52
        res.setdefault("road_echo_slopes", {})[name] = slopes
        res.setdefault("model_road_echo_slope", []).append(round(slopes["total"], 3))
        # the simulated scans' lasers read back as the real frames' are (change 52's amendments)
        readings = [_road_echo_readings(preset, st) for st in stats]
        for key in ("road_echo_slope", "road_spread_slope", "road_gain_r10"):
            res.setdefault(f"sim_{key}", []).append(_median([r[key] for r in readings]))
            res.setdefault(f"real_frame_{key}", []).append(
                _median([sc["statistics"].get(key) for sc in mine])
            )
        res.setdefault("sim_intensity_max", []).append(sim["intensity_max"])
        res.setdefault("real_frame_intensity_max", []).append(
            _median([sc["statistics"].get("intensity_max") for sc in mine])
        )
        for sc in mine:
            sc["residual"] = _residuals(sim, sc)
    res["real_frames"] = {name: [sc["file"] for sc in scans if sc["preset"] == name] for name in presets}
    res["real_frames"] = {k: v for k, v in res["real_frames"].items() if v}
    res["real_scans"] = _by_label(scans)
    res["real_frames_left_out"] = "; ".join(f"{f.label} ({f.preset})" for f in left_out) or "none"
    plot_realism(out / "realism.png", per, scans)
    (out / "realism.txt").write_text(realism_table(res) + "\n")
    return res


def _layouts(
    name: str,
    frames: int,
    calib: dict[str, np.ndarray],
    demo: dict[str, Any],
    demo_stats: list[dict[str, Any]],
    kitti: dict[str, Any],
) -> dict[str, Any]:
    """Raydrop placement on the demo street and the residential one beside KITTI's frame
    (:mod:`rt_lidar.validation.realism_layout`)."""
    stats = [_measure(g, calib) for g in simulated_grids(name, frames, layout="residential")]
    sims = {"demo": demo, "residential": _summary(stats)}
    return layout_report(sims, {"demo": demo_stats, "residential": stats}, kitti["statistics"])


def _by_label(scans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The real scans by label (a label given twice gets its place in the list after it)."""
    out: dict[str, dict[str, Any]] = {}
    for i, sc in enumerate(scans):
        out[sc["label"] if sc["label"] not in out else f"{sc['label']} #{i + 1}"] = sc
    return out


KITTI_LABEL = "KITTI HDL-64E"


def _kitti_stat(m: dict[str, Any], key: str) -> float | None:
    for sc in m.get("real_scans", {}).values():
        if sc["label"] == KITTI_LABEL:
            v = sc["statistics"].get(key)
            return None if v is None else float(v)
    return None


def _on_kitti(m: dict[str, Any], key: str, lo: float, hi: float) -> bool | None:
    """Whether the KITTI frame's ``key`` lies in [lo, hi]; None (not run) where it was not measured."""
    if not any(sc["label"] == KITTI_LABEL for sc in m.get("real_scans", {}).values()):
        return None
    v = _kitti_stat(m, key)
    return v is not None and lo <= v <= hi


REALISM_CHECKS: dict[str, list[tuple[str, Any]]] = {
    "realism": [
        # the measuring tool on the real KITTI frame gives what realism-statistics.md says real scans give
        # (None, not run, where ../shared/reference/real is absent: the report says so)
        ("KITTI frame: ground horizon >= 60 m", lambda m: _on_kitti(m, "ground_horizon_m", 60.0, math.inf)),
        ("KITTI frame: texture 0.12..0.84", lambda m: _on_kitti(m, "ground_texture_share", 0.12, 0.84)),
        (
            "KITTI frame: zeros beyond 40 m 0.58..0.86",
            lambda m: _on_kitti(m, "zero_share_beyond_40m", *REFERENCE["HDL-64E"]["zeros40"]),
        ),
    ]
}
"""Checks that gate ``validate``; the simulated residuals are reported beside them (docs/realism.md)."""
