"""Validation of detection as a probability (issue 14, item 8) against a datasheet.

- ``detection_probability_vs_range``: the Ouster OS1-64 (gen 1) fires at Lambertian targets of 10 % and
  80 % head-on in 100 klx of sunlight (lit by a sun behind the sensor), 4000 pulses a range through the
  single-ray physics. Its datasheet publishes the points of that curve: 0.8-40 m on 10 % and 0.8-120 m
  on 80 %, 100 klx, "false positive rate of 1/10,000", and range repeatability (1 sigma) of +-10 cm at
  SNR 12, +-3 cm at SNR 100 and +-1.5 cm above SNR 250 (Ouster OS1 datasheet, gen 1; as read from a
  public copy). Reported: the curves, the ranges where P_d falls through 0.9 and 0.5 beside the
  published figures, the false detections per pulse in that sunlight, and the range noise at the three
  SNRs (power SNR (P / sigma)^2, read off the simulated ranges).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from rt_lidar.kernels.ambient import receiver_sigma_w
from rt_lidar.physics.ambient import pulse_noise_w
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.sensor.presets import load_preset
from rt_lidar.validation.detection import datasheet_physics, detection_curve, range_at, target_hits

__all__ = ["DETECTION_CHECKS", "DETECTION_EXPERIMENTS", "detection_probability_vs_range"]

PRESET = "OS1-64"
SUN_LUX = 100_000.0
PUBLISHED_RANGE_M = {"10pct": 40.0, "80pct": 120.0}
PUBLISHED_FALSE_PER_PULSE = 1e-4
PUBLISHED_PRECISION_M = {12: 0.10, 100: 0.03, 250: 0.015}  # 1 sigma at SNR


def _snr(preset_name: str, reflectivity: float, ranges: np.ndarray) -> np.ndarray:
    """Power SNR (P / sigma)^2 of the target's echo at each range, in the experiment's sunlight."""
    preset = load_preset(preset_name)
    phys = datasheet_physics(preset, reflectivity, PhysicsConfig(sun_illuminance_lux=SUN_LUX))
    hits = target_hits(preset, ranges.astype(np.float32), 1.0)
    echo = phys.echo
    power, *_ = echo.object_echoes(hits)
    floor = pulse_noise_w(echo, phys.config.sun_illuminance_lux, hits)
    sigma = receiver_sigma_w(floor, preset.receiver.shot_w, power.astype(np.float64))
    return np.asarray((power / sigma) ** 2)


def detection_probability_vs_range(out: Path) -> dict[str, Any]:
    """P_d against range on 10 % and 80 % targets in full sun, beside the datasheet (module docstring)."""
    preset = load_preset(PRESET)
    res: dict[str, Any] = {"preset": PRESET, "sun_lux": SUN_LUX}
    fig, ax = plt.subplots(figsize=(7.0, 4.2), dpi=110)
    for rho, key in ((0.1, "10pct"), (0.8, "80pct")):
        pub = PUBLISHED_RANGE_M[key]
        ranges = np.linspace(0.5 * pub, 1.4 * pub, 37)
        c = detection_curve(preset, ranges, rho, pulses=4000, sun_lux=SUN_LUX, sun_cos=1.0, seed=7)
        res[f"range_m_{key}"] = [round(float(r), 2) for r in ranges]
        res[f"p_detect_{key}"] = [round(float(p), 4) for p in c.p_detect]
        res[f"range_pd90_{key}_m"] = round(range_at(c, 0.9), 2)
        res[f"range_pd50_{key}_m"] = round(range_at(c, 0.5), 2)
        res[f"published_range_{key}_m"] = pub
        ax.plot(ranges, c.p_detect, label=f"{int(rho * 100)} % target (simulated)")
        ax.axvline(pub, ls="--", lw=0.8, color=ax.lines[-1].get_color())
        if key == "10pct":  # range noise against SNR, from the 10 % curve's detected points
            snr = _snr(PRESET, rho, ranges)
            ok = np.isfinite(c.range_sigma_m)
            order = np.argsort(snr[ok])
            for s_pub, sig_pub in PUBLISHED_PRECISION_M.items():
                got = float(np.interp(np.log(s_pub), np.log(snr[ok][order]), c.range_sigma_m[ok][order]))
                res[f"range_sigma_at_snr{s_pub}_m"] = round(got, 4)
                res[f"published_sigma_at_snr{s_pub}_m"] = sig_pub
    far = detection_curve(preset, [3.0 * preset.range.max_m], 0.8, pulses=100_000, sun_lux=SUN_LUX, seed=8)
    res["false_per_pulse_100klx"] = float(far.false_per_pulse[0])
    res["published_false_per_pulse"] = PUBLISHED_FALSE_PER_PULSE
    ax.set(
        title=f"{PRESET}: detection probability, 100 klx sun (dashed: datasheet ranges)",
        xlabel="range (m)",
        ylabel="P(detect)",
        ylim=(0, 1.05),
    )
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "detection_probability_vs_range.png")
    plt.close(fig)
    return res


DETECTION_EXPERIMENTS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "detection_probability_vs_range": detection_probability_vs_range
}
DETECTION_CHECKS: dict[str, list[tuple[str, Callable[[dict[str, Any]], bool]]]] = {
    "detection_probability_vs_range": [
        (
            "10 % target: P_d = 0.5 within 5 % of the datasheet's 40 m",
            lambda m: abs(m["range_pd50_10pct_m"] / 40.0 - 1) < 0.05,
        ),
        (
            "80 % target: P_d = 0.5 within 3 % of the datasheet's 120 m (the receiver's fitted range law)",
            lambda m: abs(m["range_pd50_80pct_m"] / 120.0 - 1) < 0.03,
        ),
        (
            "P_d falls smoothly: > 2 m between P_d 0.9 and 0.5 on 10 %",
            lambda m: m["range_pd50_10pct_m"] - m["range_pd90_10pct_m"] > 2.0,
        ),
        (
            "false detections per pulse in 100 klx within 3x of the datasheet's 1e-4",
            lambda m: 1e-4 / 3 <= m["false_per_pulse_100klx"] <= 3e-4,
        ),
        (
            "range noise falls with SNR",
            lambda m: (
                m["range_sigma_at_snr12_m"] > m["range_sigma_at_snr100_m"] > m["range_sigma_at_snr250_m"]
            ),
        ),
    ],
}
