"""Validation of the range walk of strong returns (issue 14, item 8).

- ``range_walk_vs_strength``: the OS1-64, VLP-16 and HDL-64E fire at a flat target 20 m ahead, head-on,
  whose effective reflectance S runs from 5 % (Lambertian) to 1000 (retro-reflective sheeting), through
  the single-ray physics without range noise, so each point's range error is the walk alone. Reported
  per preset: the range error against S beside the analytic walk (docs/range-walk.md), the error of
  a 10 % target and of the road-sign sheeting (``sign_sheeting``, S ~600), and their difference beside
  the OS1's published "+-3 cm Lambertian, +-10 cm retro-reflector" accuracy; the same for the VLP-16
  through the waveform path (``last`` mode), which must agree with its single-ray path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.kernels.intensity import leading_edge_walk_m, received_power, two_way_transmission
from rt_lidar.kernels.waveform import pulse_sigma_ns
from rt_lidar.physics.ambient_threshold import preset_at_ambient
from rt_lidar.physics.laser_gain import alike_lasers
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.physics.receiver_range import receiver_range_gain
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.materials import MaterialArrays, load_material_table
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.validation.detection import target_hits
from rt_lidar.validation.plots import plot_series

__all__ = ["WALK_CHECKS", "WALK_EXPERIMENTS", "analytic_walk_m", "range_walk_vs_strength", "walk_errors"]

PRESETS = ("OS1-64", "VLP-16", "HDL-64E")
TARGET_M = 20.0
REFLECTANCES = [0.05, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 600.0, 1000.0]
PUBLISHED_OS1_RETRO_M = (
    0.10  # OS1 datasheet: +-3 cm Lambertian, +-10 cm retro-reflectors (docs/range-walk.md)
)


def target_materials(reflectances: list[float]) -> MaterialArrays:
    """One material per effective reflectance S at normal incidence: Lambertian up to 1, retro-reflective
    (a white diffuse part plus a retro lobe of gain S - 1) above."""
    s = np.asarray(reflectances, np.float32)
    n = s.size
    return MaterialArrays(
        names=tuple(f"s_{v:g}" for v in reflectances),
        diffuse=np.minimum(s, 1.0),
        retro_gain=np.maximum(s - 1.0, 0.0),
        retro_exponent=np.ones(n, np.float32),
        specular_gain=np.zeros(n, np.float32),
        specular_exponent=np.ones(n, np.float32),
        transmission=np.zeros(n, np.float32),
    )


def walk_errors(
    preset: SensorPreset, materials: MaterialArrays, range_m: float, config: PhysicsConfig | None = None
) -> np.ndarray:
    """Reported minus true range (m) of one head-on pulse per material at ``range_m`` (no range noise,
    no receiver noise: the walk alone; NaN where the pulse is not detected)."""
    cfg = config or PhysicsConfig(range_noise=False, receiver_noise=False)
    phys = SensorPhysics(preset, materials, cfg)
    n = len(materials.names)
    hits = target_hits(preset, np.full(n, range_m, np.float32))
    hits.material = np.arange(n, dtype=np.int16)
    res = phys.apply(hits, np.random.default_rng(0))
    err = np.full(n, np.nan)
    pulse = (res.points["t"] // 1000).astype(np.int64)
    first = res.points["return_id"] == 0
    dist = np.sqrt(res.points["x"] ** 2 + res.points["y"] ** 2 + res.points["z"] ** 2).astype(np.float64)
    err[pulse[first]] = dist[first] - range_m
    return err


def analytic_walk_m(
    preset: SensorPreset,
    reflectance: float,
    range_m: float,
    extinction_per_m: float,
    ambient_lux: float = 0.0,
) -> float:
    """The walk of a full-beam target of effective reflectance ``reflectance`` straight from the
    radar equation (with the receiver's range law, :mod:`rt_lidar.physics.receiver_range`) and
    :func:`rt_lidar.kernels.intensity.leading_edge_walk_m`, at the threshold of a scene lit with
    ``ambient_lux`` (:mod:`rt_lidar.physics.ambient_threshold`)."""
    p = preset_at_ambient(preset, ambient_lux)
    gain = receiver_range_gain(p, np.array([range_m], np.float32))
    power = received_power(
        range_m,
        reflectance,
        float(two_way_transmission(np.float64(range_m), extinction_per_m))
        * (1.0 if gain is None else float(gain[0])),
        p.pulse.peak_power_w,
        p.optics.receiver_aperture_m,
        p.optics.system_efficiency,
    )
    thr = p.pulse.detection_threshold_w
    return float(
        leading_edge_walk_m(
            np.float64(power), thr, pulse_sigma_ns(p.pulse.width_ns), p.receiver.saturation(thr)
        )
    )


def range_walk_vs_strength(out: Path) -> dict[str, Any]:
    """Range error against target strength at 20 m for three presets (module docstring)."""
    table = load_material_table()
    mats = target_materials(REFLECTANCES)
    res: dict[str, Any] = {"reflectance": REFLECTANCES, "target_m": TARGET_M}
    series: dict[str, tuple[list, list]] = {}
    clear = PhysicsConfig().extinction_per_m
    for name in PRESETS:
        preset = alike_lasers(load_preset(name))  # the average laser, as the detection curves fire it
        key = name.lower().replace("-", "")
        err = walk_errors(preset, mats, TARGET_M)
        res[f"error_cm_{key}"] = [round(100 * float(e), 2) for e in err]
        res[f"analytic_cm_{key}"] = [
            round(100 * analytic_walk_m(preset, s, TARGET_M, clear), 2) for s in REFLECTANCES
        ]
        real = table.arrays(["sign_sheeting"], preset.optics.wavelength_nm)
        lam = target_materials([0.1])
        sign = float(walk_errors(preset, real, TARGET_M)[0])
        ten = float(walk_errors(preset, lam, TARGET_M)[0])
        res[f"sign_minus_10pct_cm_{key}"] = round(100 * (sign - ten), 2)
        scene = preset_at_ambient(preset, PhysicsConfig().sun_illuminance_lux)  # the threshold at night
        thr = scene.pulse.detection_threshold_w
        res[f"saturation_over_threshold_{key}"] = round(scene.receiver.saturation(thr) / thr, 1)
        ok = np.isfinite(err)
        kept = [s for s, k in zip(REFLECTANCES, ok, strict=True) if k]
        series[f"{name} simulated"] = (kept, [100 * e for e in err[ok]])
    vlp = load_preset("VLP-16")
    wave = walk_errors(
        vlp,
        mats,
        TARGET_M,
        PhysicsConfig(range_noise=False, receiver_noise=False, beam=BeamConfig(return_mode="last")),
    )
    res["error_cm_vlp16_waveform_last"] = [round(100 * float(e), 2) for e in wave]
    off = walk_errors(
        vlp, mats, TARGET_M, PhysicsConfig(range_noise=False, receiver_noise=False, range_walk=False)
    )
    res["error_cm_vlp16_walk_off"] = [round(100 * float(e), 2) for e in off]
    res["published_os1_retro_accuracy_cm"] = 100 * PUBLISHED_OS1_RETRO_M
    plot_series(
        out / "range_walk_vs_strength.png",
        f"Range walk at {TARGET_M:g} m (leading edge, saturated receiver)",
        "effective reflectance S (1 = white Lambertian; > 1 retro-reflective)",
        "reported - true range (cm)",
        series,
        xscale="log",
    )
    return res


def _close(a: list[float], b: list[float], tol: float) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b, strict=True) if np.isfinite(x) and np.isfinite(y))


def _diffuse_flat(m: dict[str, Any]) -> bool:
    return all(abs(e) < 0.1 for s, e in zip(m["reflectance"], m["error_cm_os164"], strict=True) if s <= 1)


def _monotone(m: dict[str, Any]) -> bool:
    keys = ("error_cm_os164", "error_cm_vlp16", "error_cm_hdl64e")
    return all(all(b <= a + 1e-6 for a, b in zip(m[k], m[k][1:], strict=False)) for k in keys)


def _analytic(m: dict[str, Any]) -> bool:
    return all(_close(m[f"error_cm_{k}"], m[f"analytic_cm_{k}"], 0.1) for k in ("os164", "vlp16", "hdl64e"))


WALK_EXPERIMENTS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "range_walk_vs_strength": range_walk_vs_strength
}
WALK_CHECKS: dict[str, list[tuple[str, Callable[[dict[str, Any]], bool]]]] = {
    "range_walk_vs_strength": [
        ("diffuse targets (S <= 1) carry no walk (< 1 mm)", _diffuse_flat),
        ("walk grows (more negative) with strength on every preset", _monotone),
        ("simulated walk = analytic walk within 1 mm", _analytic),
        (
            "OS1-64: road sign at 20 m reads 5..15 cm closer than a 10 % target (datasheet: +-10 cm retro)",
            lambda m: -15.0 <= m["sign_minus_10pct_cm_os164"] <= -5.0,
        ),
        (
            "VLP-16: waveform path (last) = single-ray path within 1 mm",
            lambda m: _close(m["error_cm_vlp16_waveform_last"], m["error_cm_vlp16"], 0.1),
        ),
        (
            "range_walk=False: no walk",
            lambda m: all(abs(e) < 0.01 for e in m["error_cm_vlp16_walk_off"] if np.isfinite(e)),
        ),
    ],
}
