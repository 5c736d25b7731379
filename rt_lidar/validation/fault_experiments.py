"""``validate --only dirt_detection_range``: dirt of one-way transmission T on the window shortens the
detection range as the radar equation says.

A Lambertian 5 % target head-on, fired at 2000 times a range through the single-ray physics of the
VLP-16 (night, receiver noise on), through a window of transmission T = 1, 0.8, 0.6, 0.4
(:mod:`rt_lidar.faults.optical`: the echo loses T^2). The range where detection falls through 50 %,
R50(T), is set beside the radar equation's prediction: the R where T^2 exp(-2 a R) / R^2 equals the
clean window's exp(-2 a R50(1)) / R50(1)^2 (a: clear-air extinction), about T * R50(1).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.faults.optical import with_power_faults
from rt_lidar.faults.spec import Dirt
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.points import PointFlag
from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.detection import TARGET_SEGMENT, datasheet_physics, target_hits

__all__ = ["FAULT_CHECKS", "FAULT_EXPERIMENTS", "dirt_detection_range", "predicted_range_m"]

PRESET = "VLP-16"
TRANSMISSIONS = (1.0, 0.8, 0.6, 0.4)
REFLECTIVITY = 0.05


def predicted_range_m(clean_range_m: float, transmission: float, extinction_per_m: float) -> float:
    """The range where T^2 exp(-2 a R) / R^2 equals the clean window's echo at ``clean_range_m``."""
    target = -2 * extinction_per_m * clean_range_m - 2 * math.log(clean_range_m) - math.log(transmission**2)
    lo, hi = 1e-3, clean_range_m
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        val = -2 * extinction_per_m * mid - 2 * math.log(mid)
        lo, hi = (mid, hi) if val > target else (lo, mid)
    return 0.5 * (lo + hi)


def _r50(preset: Any, physics: Any, transmission: float, ranges: np.ndarray, pulses: int, seed: int) -> float:
    dirt = (Dirt(transmission=transmission),)
    rng = np.random.default_rng(seed)
    pd = []
    for r in ranges:
        hits = with_power_faults(dirt, target_hits(preset, np.full(pulses, r, np.float32), None))
        pts = physics.apply(hits, rng).points
        real = (pts["segment"] == TARGET_SEGMENT) & ((pts["flags"] & int(PointFlag.AMBIENT_NOISE)) == 0)
        pd.append(np.count_nonzero(real) / pulses)
    p = np.array(pd)
    below = np.flatnonzero(p < 0.5)
    if below.size == 0 or below[0] == 0:
        return float("nan")
    j = int(below[0])
    return float(ranges[j - 1] + (p[j - 1] - 0.5) / max(p[j - 1] - p[j], 1e-12) * (ranges[j] - ranges[j - 1]))


def _plot(out: Path, rows: list[dict[str, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["transmission"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.0, 4.0), dpi=110)
    ax.plot(t, [r["predicted_m"] for r in rows], "-", label="radar equation")
    ax.plot(t, [r["r50_m"] for r in rows], "o", label="simulated R50")
    ax.set(
        title=f"{PRESET}: detection range through a dirty window",
        xlabel="window transmission T (one way)",
        ylabel="R50 (m)",
    )
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "dirt_detection_range.png")
    plt.close(fig)


def dirt_detection_range(out: Path, pulses: int = 2000) -> dict[str, Any]:
    """R50 against the window's transmission, beside the radar equation (module docstring)."""
    preset = load_preset(PRESET)
    config = PhysicsConfig()
    physics = datasheet_physics(preset, REFLECTIVITY, config)
    res: dict[str, Any] = {"preset": PRESET, "reflectivity": REFLECTIVITY, "pulses": pulses}
    clean = float("nan")
    rows = []
    for t in TRANSMISSIONS:
        guess = preset.range.max_m if math.isnan(clean) else clean * t
        ranges = np.linspace(0.3 * guess, 1.6 * guess, 60)
        r50 = _r50(preset, physics, t, ranges, pulses, seed=11)
        if t == 1.0:
            clean = r50
        want = predicted_range_m(clean, t, config.extinction_per_m)
        rows.append({"transmission": t, "r50_m": round(r50, 2), "predicted_m": round(want, 2)})
    _plot(out, rows)
    for key in ("transmission", "r50_m", "predicted_m"):
        res[key] = [r[key] for r in rows]
    res["max_relative_error"] = max(abs(r["r50_m"] - r["predicted_m"]) / r["predicted_m"] for r in rows)
    return res


FAULT_EXPERIMENTS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "dirt_detection_range": dirt_detection_range
}

FAULT_CHECKS: dict[str, list[tuple[str, Callable[[dict[str, Any]], bool]]]] = {
    "dirt_detection_range": [
        (
            "R50 within 3 % of the radar equation's at every transmission",
            lambda m: m["max_relative_error"] < 0.03,
        ),
        (
            "dirtier window, shorter range: R50 falls with T",
            lambda m: all(a > b for a, b in itertools.pairwise(m["r50_m"])),
        ),
    ]
}
