"""Validation experiments of the beam model (sub-ray footprint, waveforms, blooming, echo pulse width).

- ``dual_return_two_planes``: a plane 10 m ahead whose edge splits every beam in half, a plane at 12 m
  behind it; the ``dual`` mode must report both (``first_range_m``, ``second_range_m``,
  ``fraction_dual``); the far plane alone gives one return (``single_plane_fraction_dual``).
- ``blooming_sign``: a retro-reflective sign 0.6 m wide at 20 m in one VLP-16 revolution;
  ``apparent_width_m`` with one sub-ray and with the preset's footprint (19 sub-rays).
- ``epw_vs_power``: echo pulse width of the waveform returns against received power for panels of
  rising reflectivity at 20 m (sorted by power), beside the single-echo formula.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import itertools

import matplotlib.pyplot as plt
import numpy as np

from rt_lidar.kernels.waveform import single_echo_epw_ns
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.points import PointFlag
from rt_lidar.sensor.beam import BeamConfig, exit_m_per_rad
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sensor.scan_pattern import Firings
from rt_lidar.unreal_bridge.world import MeshObject, Pose, Scene, StaticTrajectory, World, targets_scene
from rt_lidar.validation.plots import plot_series

__all__ = ["BEAM_CHECKS", "BEAM_EXPERIMENTS", "blooming_sign", "dual_return_two_planes", "epw_vs_power"]

PRESET = "VLP-16"
SUB_RAYS = 19
PULSES_PER_RING = 40


def _panel(name: str, material: str, x: float, y0: float, y1: float, half_z: float, seg: int) -> MeshObject:
    names = list(Scene(objects=[]).material_names)
    v = np.array([[x, y0, -half_z], [x, y1, -half_z], [x, y1, half_z], [x, y0, half_z]], np.float32)
    f = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    return MeshObject(name, v, f, np.full(2, names.index(material), np.int16), seg)


def _scene(objs: list[MeshObject]) -> Scene:
    return Scene(objects=objs, ego=StaticTrajectory(Pose.identity()), sensor_mount=Pose.identity())


def _straight_ahead(preset: SensorPreset, per_ring: int) -> Firings:
    """``per_ring`` pulses of every ring, all at azimuth 0 (1 us apart)."""
    ring = np.tile(np.arange(preset.n_rings, dtype=np.uint16), per_ring)
    n = ring.size
    return Firings(
        ring=ring,
        t_ns=np.arange(n, dtype=np.int64) * 1000,
        azimuth_deg=np.zeros(n),
        elevation_deg=preset.elevations_deg[ring].astype(np.float64),
        column=np.repeat(np.arange(per_ring, dtype=np.int64), preset.n_rings),
    )


def _fire(preset: SensorPreset, scene: Scene, cfg: PhysicsConfig, seed: int = 0) -> np.ndarray:
    world = World(scene)
    phys = SensorPhysics.from_preset(preset, world.material_names, load_material_table(), cfg)
    src = WorldSource(world, preset.range.max_m, phys.materials.transmission, exit_m_per_rad(preset))
    firings = _straight_ahead(preset, PULSES_PER_RING)
    hits = src.beam_hits(firings, 0, int(firings.t_ns[-1]) + 1, phys.pattern)
    return phys.apply(hits, np.random.default_rng(seed)).points


def dual_return_two_planes(out: Path) -> dict[str, Any]:
    """Half of every beam on a plane at 10 m, the other half on a plane at 12 m (dual mode)."""
    preset = load_preset(PRESET)
    cfg = PhysicsConfig(beam=BeamConfig(sub_rays=SUB_RAYS, return_mode="dual"))
    near = _panel("near", "concrete", 10.0, 0.0, 6.0, 6.0, 1)  # its edge y = 0 splits every beam
    far = _panel("far", "concrete", 12.0, -6.0, 6.0, 6.0, 2)
    pts = _fire(preset, _scene([near, far]), cfg)
    single = _fire(preset, _scene([far]), cfg)
    fired = preset.n_rings * PULSES_PER_RING
    # the planes are perpendicular to x: a return's x is its plane's distance whatever the beam elevation
    first, second = pts["x"][pts["return_id"] == 0], pts["x"][pts["return_id"] == 1]
    res = {
        "first_range_m": round(float(first.mean()), 4) if first.size else math.nan,
        "second_range_m": round(float(second.mean()), 4) if second.size else math.nan,
        "fraction_dual": float(second.size / fired),
        "single_plane_fraction_dual": float((single["return_id"] == 1).sum() / fired),
        "single_plane_points_per_pulse": float(single.size / fired),
        "sub_rays": SUB_RAYS,
        "pulses": fired,
    }
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    ax.hist([first, second], bins=40, label=["return 0", "return 1"])
    ax.set(
        title=f"{PRESET} dual returns: plane at 10 m over half the beam, 12 m behind",
        xlabel="distance along x (m)",
        ylabel="points",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "dual_return_two_planes.png")
    plt.close(fig)
    return res


def _sign_width(preset: SensorPreset, sub_rays: int) -> tuple[float, int]:
    """Apparent width of the 0.6 m sign (widest ring) and its number of BLOOM points."""
    sign = _panel("sign", "sign_sheeting", 20.0, -0.3, 0.3, 0.75, 5)
    cfg = PhysicsConfig(beam=BeamConfig(sub_rays=sub_rays), range_noise=False)
    pts = build_pipeline(preset, _scene([sign]), physics=cfg).pipeline.scans(1)[0].points
    on = pts[pts["segment"] == 5]
    widths = [float(np.ptp(on["y"][on["ring"] == k])) for k in np.unique(on["ring"])]
    bloom = int(((on["flags"] & PointFlag.BLOOM) != 0).sum())
    return (max(widths) if widths else 0.0), bloom


def blooming_sign(out: Path) -> dict[str, Any]:
    """A retro-reflective sign 0.6 m wide at 20 m: apparent width with 1 sub-ray and the footprint."""
    preset = load_preset(PRESET)
    w1, b1 = _sign_width(preset, 1)
    wf, bf = _sign_width(preset, SUB_RAYS)
    o = preset.optics
    footprint = 20.0 * o.beam_divergence_h_mrad * 1e-3 * o.footprint_extent
    step = 20.0 * math.radians(360.0 / 1800.0)
    plot_series(
        out / "blooming_sign.png",
        f"{PRESET}: 0.6 m retro sign at 20 m",
        "sub-rays",
        "apparent width (m)",
        {"apparent width": ([1, SUB_RAYS], [w1, wf]), "true width": ([1, SUB_RAYS], [0.6, 0.6])},
    )
    return {
        "true_width_m": 0.6,
        "apparent_width_m_1_subray": round(w1, 4),
        "apparent_width_m_footprint": round(wf, 4),
        "footprint_diameter_m": round(footprint, 4),
        "azimuth_step_m": round(step, 4),
        "bloom_points_1_subray": b1,
        "bloom_points_footprint": bf,
        "sub_rays": SUB_RAYS,
    }


EPW_MATERIALS = [
    "brick",
    "asphalt",
    "concrete",
    "car_paint_white",
    "lane_paint",
    "plate_sheeting",
    "sign_sheeting",
]


def epw_vs_power(out: Path) -> dict[str, Any]:
    """Echo pulse width vs received power for panels of rising reflectivity at 20 m (waveform EPW)."""
    preset = load_preset(PRESET)
    cfg = PhysicsConfig(beam=BeamConfig(sub_rays=7, epw=True), range_noise=False)
    scene = targets_scene(EPW_MATERIALS, 20.0, panel_size_m=1.5, gap_m=1.0)
    scene = dataclasses.replace(
        scene, sensor_mount=Pose.from_xyz_rpy(0.0, 0.0, scene.sensor_mount.position[2])
    )
    built = build_pipeline(preset, scene, physics=cfg)
    phys = built.pipeline.physics
    scan = built.pipeline.scans(1)[0]
    pts, epw = scan.points, scan.extras["epw_ns"]
    thr = preset.pulse.detection_threshold_w
    power, width, formula = [], [], []
    for k in range(len(EPW_MATERIALS)):
        sel = (pts["segment"] == k + 1) & ((pts["flags"] & PointFlag.BLOOM) == 0)
        # intensity is not power for a calibrated-reflectivity sensor: invert the apparent reflectivity
        r = np.sqrt(pts["x"][sel] ** 2 + pts["y"][sel] ** 2 + pts["z"][sel] ** 2)
        pw = float(np.median(pts["reflectivity"][sel] * phys.unit_power(r))) if sel.any() else 0.0
        power.append(pw)
        width.append(round(float(np.median(epw[sel])), 3) if sel.any() else 0.0)
        formula.append(
            round(
                float(
                    single_echo_epw_ns(np.float64(pw), thr, preset.pulse.width_ns, preset.pulse.epw_offset_ns)
                ),
                3,
            )
        )
    order = np.argsort(power)
    names = [EPW_MATERIALS[i] for i in order]
    power, width, formula = ([v[i] for i in order] for v in (power, width, formula))
    plot_series(
        out / "epw_vs_power.png",
        f"{PRESET}: echo pulse width vs received power (20 m)",
        "received power (W)",
        "echo pulse width (ns)",
        {"waveform": (power, width), "single-echo formula": (power, formula)},
        xscale="log",
    )
    return {"materials": names, "power_w": power, "epw_ns": width, "epw_formula_ns": formula}


def _up(x: list[float]) -> bool:
    return all(b >= a for a, b in itertools.pairwise(x)) and x[-1] > x[0]


BEAM_EXPERIMENTS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "dual_return_two_planes": dual_return_two_planes,
    "blooming_sign": blooming_sign,
    "epw_vs_power": epw_vs_power,
}

BEAM_CHECKS: dict[str, list[tuple[str, Callable[[dict[str, Any]], bool]]]] = {
    "dual_return_two_planes": [
        ("first return at 10 m within 3 cm", lambda m: abs(m["first_range_m"] - 10.0) <= 0.03),
        ("second return at 12 m within 3 cm", lambda m: abs(m["second_range_m"] - 12.0) <= 0.03),
        ("every pulse reports both planes", lambda m: m["fraction_dual"] >= 0.95),
        ("a single plane gives one return", lambda m: m["single_plane_fraction_dual"] == 0.0),
    ],
    "blooming_sign": [
        (
            "the footprint makes the sign look wider",
            lambda m: m["apparent_width_m_footprint"] > m["apparent_width_m_1_subray"],
        ),
        (
            "bloom points only with the footprint",
            lambda m: m["bloom_points_1_subray"] == 0 < m["bloom_points_footprint"],
        ),
    ],
    "epw_vs_power": [
        ("echo pulse width grows with power", lambda m: _up(m["epw_ns"])),
        (
            "waveform EPW within 5 % of the single-echo formula",
            lambda m: all(
                abs(a - b) <= 0.05 * b for a, b in zip(m["epw_ns"], m["epw_formula_ns"], strict=True)
            ),
        ),
    ],
}
