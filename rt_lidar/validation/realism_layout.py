"""The raydrop placement of ``validate --only realism`` on two street layouts beside KITTI's frame: the
demo street and the residential one (``street_scene(layout="residential")``, cars parked nose to tail
close to the lane as in KITTI's frame 000008), with the hole rates by surface class and range band
(:mod:`rt_lidar.validation.realism_holes`) and the near-object share each layout's rates give on the
real frame's mix of returns (the layout taken out: what is left is physics). docs/realism.md, change 30.
"""

from __future__ import annotations

from typing import Any

from rt_lidar.validation.realism_holes import (
    HOLE_CLASSES,
    hole_rates,
    median_range_on_layout,
    near_share_on_layout,
    pooled_fine_rates,
)

__all__ = ["CLASS_KEYS", "LAYOUT_DROP_KEYS", "layout_report", "layout_table", "summed_counts"]

CLASS_KEYS = ("hole_class_counts", "hole_rate_by_class", "hole_fine_counts")
LAYOUT_DROP_KEYS = ("drop_share", "hole_share", "holes_near_object_share", "holes_median_neighbour_range_m")


def summed_counts(stats: list[dict[str, Any]], key: str = "hole_class_counts") -> dict[str, tuple[int, int]]:
    """(returns, holes) per class summed over scans (their measured ``key``: the classes' counts, or
    ``hole_fine_counts``)."""
    out: dict[str, tuple[int, int]] = {}
    for s in stats:
        for k, (r, h) in (s.get(key) or {}).items():
            a, b = out.get(k, (0, 0))
            out[k] = (a + int(r), b + int(h))
    return out


def _pairs(d: dict[str, Any] | None) -> dict[str, tuple[int, int]]:
    return {k: (int(v[0]), int(v[1])) for k, v in (d or {}).items()}


def _crop_fill(counts: dict[str, tuple[int, int]]) -> dict[str, float]:
    """The share of classified rays (returns and holes) whose surface is an object within 10 m and
    within 20 m: how much of the view near objects fill."""
    total = sum(r + h for r, h in counts.values())
    near10 = sum(counts["object_0_10m"])
    near20 = near10 + sum(counts["object_10_20m"])
    return {
        "near_object_fill_10m": near10 / total if total else 0.0,
        "near_object_fill": near20 / total if total else 0.0,
    }


def layout_report(
    sims: dict[str, dict[str, Any]], sim_stats: dict[str, list[dict[str, Any]]], real: dict[str, Any]
) -> dict[str, Any]:
    """Per layout (``sims``: its summary, ``sim_stats``: its scans' statistics in KITTI's crop) and for
    the real frame (``real``: its statistics): the crop's raydrop statistics, the counts and hole rates
    by class, the share of classified rays that near objects fill, and the near-object share of each
    layout's rates on the real frame's returns."""
    real_counts = _pairs(real.get("hole_class_counts"))
    real_fine = _pairs(real.get("hole_fine_counts"))
    out: dict[str, Any] = {}
    for name, summary in sims.items():
        counts = summed_counts(sim_stats[name])
        fine = summed_counts(sim_stats[name], "hole_fine_counts")
        out[name] = {
            **{k: summary.get(k) for k in LAYOUT_DROP_KEYS},
            "hole_class_counts": counts,
            "hole_rate_by_class": hole_rates(counts),
            **_crop_fill(counts),
            "holes_near_object_share_on_real_layout": (
                near_share_on_layout(hole_rates(counts), real_counts) if real_counts else None
            ),
            "holes_median_range_on_real_layout": (
                median_range_on_layout(pooled_fine_rates(fine), real_fine) if real_fine else None
            ),
        }
    if real_counts:
        rates = hole_rates(real_counts)
        out["KITTI"] = {
            **{k: real.get(k) for k in LAYOUT_DROP_KEYS},
            "hole_class_counts": real_counts,
            "hole_rate_by_class": rates,
            **_crop_fill(real_counts),
            "holes_near_object_share_on_real_layout": near_share_on_layout(rates, real_counts),
            "holes_median_range_on_real_layout": median_range_on_layout(hole_rates(real_fine), real_fine),
        }
    return out


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}"


def layout_table(preset: str, rep: dict[str, Any]) -> str:
    """The layout report as text: one column per layout and the real frame."""
    cols = list(rep)
    rows = [f"{preset} raydrop in KITTI's crop by layout: " + " | ".join(cols)]
    keys = [
        *LAYOUT_DROP_KEYS,
        "near_object_fill_10m",
        "near_object_fill",
        "holes_near_object_share_on_real_layout",
        "holes_median_range_on_real_layout",
    ]
    for k in keys:
        rows.append(f"  {k:40} " + " ".join(f"{_fmt(rep[c].get(k)):>12}" for c in cols))
    for k in HOLE_CLASSES:
        cells = []
        for c in cols:
            r, h = rep[c]["hole_class_counts"].get(k, (0, 0))
            cells.append(f"{_fmt(rep[c]['hole_rate_by_class'].get(k)) + f' ({r + h})':>12}")
        rows.append(f"  {'hole rate ' + k:40} " + " ".join(cells))
    return "\n".join(rows)
