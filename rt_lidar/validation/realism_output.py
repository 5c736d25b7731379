"""``rt-lidar validate --only realism``'s outputs: the plot ``realism.png`` and the text table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from rt_lidar.validation.kitti_typical import typical_table
from rt_lidar.validation.realism_layout import layout_table
from rt_lidar.validation.realism_reference import REFERENCE, STAT_KEYS, VIEW_KEYS

__all__ = ["plot_realism", "realism_table"]

_REAL_STYLES = ("s--", "^--", "v--", "D--", "P--")


def plot_realism(path: Path, sim: dict[str, dict[str, Any]], scans: list[dict[str, Any]]) -> None:
    """Per preset: ground intensity by range band, the ground's detection probability by range, and raydrop;
    the simulated scans (``sim``: their summary) beside the real ``scans`` of the preset."""
    n = len(sim)
    fig, axes = plt.subplots(3, n, figsize=(3.4 * n, 9.0), dpi=100, squeeze=False)
    centres = [5, 15, 25, 40, 60]
    for j, (name, s) in enumerate(sim.items()):
        curves = [("simulated", s, "o-")]
        mine = [sc for sc in scans if sc["preset"] == name]
        curves += [(sc["label"], sc["statistics"], _REAL_STYLES[i % 5]) for i, sc in enumerate(mine)]
        ax = axes[0][j]
        for label, st, style in curves:
            b = st.get("ground_intensity_by_band") or []
            if b and b[0]:
                ax.plot(centres, [v / b[0] if v is not None else np.nan for v in b], style, label=label)
        ref = REFERENCE.get(name, {})
        if "falloff" in ref:
            lo, hi = ref["falloff"]
            ax.fill_between([20, 30], lo, hi, alpha=0.25, color="g", label="published 20-30 m")
        ax.set(title=name, xlabel="ground range band (m)", ylabel="ground intensity / 0-10 m", ylim=(0, 1.6))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
        ax = axes[1][j]
        for label, st, style in curves:
            rows = st.get("horizon_rings") or []
            if rows:
                ax.plot([r[0] for r in rows], [r[1] for r in rows], style, ms=3, label=label)
        if "horizon_m" in ref:
            lo, hi = ref["horizon_m"]
            ax.axvspan(lo, min(hi, 200), alpha=0.2, color="g", label="published horizon")
        ax.axhline(0.5, color="k", lw=0.8)
        ax.set(xlabel="range to the ground (m)", ylabel="P(ground return)", xscale="log", xlim=(3, 200))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
        _plot_drops(axes[2][j], s, mine)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


_DROP_BARS = (
    ("drop_share", "raydrop"),
    ("hole_share", "holes"),
    ("holes_near_object_share", "holes in\nnear objects"),
)


def _plot_drops(ax: Any, sim: dict[str, Any], scans: list[dict[str, Any]]) -> None:
    """Raydrop, holes and the share of holes in near objects: the simulated scans (over the same view as
    each real frame: KITTI's crop, or every ray) beside every real frame of the preset."""
    bars: list[tuple[str, list[float]]] = [
        ("simulated, every ray", [sim.get(f"full_{k}") or 0.0 for k, _ in _DROP_BARS])
    ]
    if any(sc["kitti_view"] for sc in scans):
        bars.append(("simulated, KITTI crop", [sim.get(k) or 0.0 for k, _ in _DROP_BARS]))
    bars += [(sc["label"], [sc["statistics"].get(k) or 0.0 for k, _ in _DROP_BARS]) for sc in scans]
    width = 0.8 / len(bars)
    x = np.arange(len(_DROP_BARS))
    for i, (label, values) in enumerate(bars):
        ax.bar(x + (i - (len(bars) - 1) / 2) * width, values, width, label=label)
    ax.set_xticks(x, [t for _, t in _DROP_BARS], fontsize=7)
    ax.set(ylabel="share", ylim=(0, 1))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=6)


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}"


def realism_table(rep: dict[str, Any]) -> str:
    """The realism report as text: per preset and statistic, simulated, the real frames' median (where
    one was measured), published figure and the residual to it; then each real scan's statistics with
    the residual of the simulated scans of its preset (simulated minus real)."""
    head = ("preset", "statistic", "simulated", "real frame", "published", "residual")
    rows = ["{:8} {:10} {:>10} {:>10} {:>11} {:>9}".format(*head)]
    for i, name in enumerate(rep["presets"]):
        for key in (*STAT_KEYS, *(k for k in VIEW_KEYS if f"sim_{k}" in rep)):
            rows.append(
                f"{name:8} {key:10} {_fmt(rep[f'sim_{key}'][i]):>10} {_fmt(rep[f'real_frame_{key}'][i]):>10} "
                f"{rep[f'published_{key}'][i]:>11} {_fmt(rep[f'residual_{key}'][i]):>9}"
            )
        if "sim_road_echo_slope" in rep:  # d ln(echo) / d ln R read back from the lasers' zeros, either scan
            sim, real = rep["sim_road_echo_slope"][i], rep["real_frame_road_echo_slope"][i]
            rows.append(f"{name:8} {'echo_slope':10} {_fmt(sim):>10} {_fmt(real):>10} {'-':>11} {'-':>9}")
        if "sim_road_spread_slope" in rep:  # the same from P and the zeros together (mean and spread)
            sim, real = rep["sim_road_spread_slope"][i], rep["real_frame_road_spread_slope"][i]
            rows.append(f"{name:8} {'echo_joint':10} {_fmt(sim):>10} {_fmt(real):>10} {'-':>11} {'-':>9}")
        if "sim_road_gain_r10" in rep:  # the receiver gain the road asks at the 10 % range (change 56)
            sim, real = rep["sim_road_gain_r10"][i], rep["real_frame_road_gain_r10"][i]
            rows.append(f"{name:8} {'gain_r10':10} {_fmt(sim):>10} {_fmt(real):>10} {'-':>11} {'-':>9}")
        if "model_road_echo_slope" in rep:  # the model's own road echo over 35-55 m, term by term
            model = rep["model_road_echo_slope"][i]
            rows.append(f"{name:8} {'echo_model':10} {_fmt(model):>10} {'-':>10} {'-':>11} {'-':>9}")
    scans = rep.get("real_scans", {})
    if scans:
        cols = (*STAT_KEYS, "hole_share", "laser_hole_spread")
        rows.append("")
        rows.append(
            f"{'real scan (residual: simulated - real)':40} {'preset':8} "
            + " ".join(f"{c:>17}" for c in cols)
        )
        for label, sc in scans.items():
            st, r = sc["statistics"], sc.get("residual", {})
            key_of = {**STAT_KEYS, "hole_share": "hole_share", "laser_hole_spread": "laser_hole_spread"}
            cells = [f"{_fmt(st.get(key_of[c])) + ' (' + _fmt(r.get(c)) + ')':>17}" for c in cols]
            rows.append(f"{label[:40]:40} {sc['preset']:8} " + " ".join(cells))
        rows += [f"{label}: read as {sc['read_as']}" for label, sc in scans.items() if sc.get("read_as")]
    for name, lay in rep.get("layouts", {}).items():
        rows += ["", layout_table(name, lay)]
    for name, typical in rep.get("typical_kitti", {}).items():
        rows += ["", typical_table(name, typical)]
    return "\n".join(rows)
