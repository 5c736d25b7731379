"""Hole rates by surface class and range band (docs/realism.md change 30) on a synthetic scan whose holes
are placed by hand: a wall 6 m ahead, a facade 30 m to the left, and open road."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from real_frames import REAL

from rt_lidar.validation.realism import realism_statistics
from rt_lidar.validation.realism_grid import ScanGrid
from rt_lidar.validation.realism_holes import (
    FINE_BANDS_M,
    HOLE_CLASSES,
    class_counts,
    hole_rates,
    median_range_on_layout,
    near_share_on_layout,
    pooled_fine_rates,
)

H = 1.8
EL = np.radians(np.linspace(-25.0, 10.0, 64))
AZ = np.radians(np.arange(1800) * 0.2)


def _scene() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Directions, range of the first surface (inf: sky) and its kind (0 road, 1 wall 6 m ahead, 2
    facade 30 m off on the left) of every ray."""
    el, az = EL[:, None], AZ[None, :]
    d = np.stack(np.broadcast_arrays(np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)), -1)
    az_deg = np.degrees(np.arctan2(d[..., 1], d[..., 0]))
    with np.errstate(divide="ignore", invalid="ignore"):
        road = np.where(d[..., 2] < 0, H / -d[..., 2], np.inf)
        wall = np.where(d[..., 0] > 0, 6.0 / d[..., 0], np.inf)
        facade = np.where(d[..., 1] > 0, 30.0 / d[..., 1], np.inf)
        wall_ok = (np.abs(az_deg) < 30) & (wall * d[..., 2] < 3.0)
        fac_ok = (az_deg > 100) & (az_deg < 140) & (facade * d[..., 2] < 10.0)
    wall = np.where(wall_ok, wall, np.inf)
    facade = np.where(fac_ok, facade, np.inf)
    r = np.stack([road, wall, facade], -1)
    kind = np.argmin(r, -1)
    return d, np.min(r, -1), kind


def _holes(rng_m: np.ndarray, kind: np.ndarray, d: np.ndarray) -> dict[str, np.ndarray]:
    """Isolated holes (every 5th column, every 4th ring) inside each surface, away from its edges."""
    k, c = np.meshgrid(np.arange(len(EL)), np.arange(len(AZ)), indexing="ij")
    lattice = (k % 4 == 2) & (c % 5 == 2)
    z = np.where(np.isfinite(rng_m), np.nan_to_num(rng_m, posinf=0.0), 0.0) * d[..., 2] + H  # above the road
    inner = np.ones_like(lattice)
    for dk in (-1, 0, 1):
        for dc in (-1, 0, 1):
            inner &= np.roll(np.roll(kind, dk, 0), dc, 1) == kind
    inner[0], inner[-1] = False, False
    return {
        "object_0_10m": lattice & inner & (kind == 1) & (z > 0.6),
        "object_20_infm": lattice & inner & (kind == 2) & (z > 0.6),
        "ground_0_10m": lattice
        & inner
        & (kind == 0)
        & (rng_m < 9.0)
        & (np.cos(np.arctan2(d[..., 1], d[..., 0])) < -0.3),
    }


def _grid() -> tuple[ScanGrid, dict[str, np.ndarray], np.ndarray]:
    d, r, kind = _scene()
    holes = _holes(r, kind, d)
    drop = ~np.isfinite(r)
    for m in holes.values():
        drop |= m
    rng_m = np.where(drop, 0.0, r)
    xyz = np.where(drop[..., None], np.nan, d * np.where(drop, 0.0, r)[..., None])
    inten = np.where(drop, 0.0, 50.0)
    grid = ScanGrid("synthetic", xyz, rng_m, inten, d, np.ones(r.shape, bool), 1.0, "counts")
    return grid, holes, kind


def test_holes_land_in_the_class_of_their_surface() -> None:
    grid, holes, kind = _grid()
    st = realism_statistics(grid)
    counts = st["hole_class_counts"]
    assert set(counts) == set(HOLE_CLASSES)
    for name, mask in holes.items():
        assert mask.sum() >= 20
        assert counts[name][1] == int(mask.sum()), name
    assert sum(h for _, h in counts.values()) == sum(int(m.sum()) for m in holes.values())
    # returns: the wall's and the facade's (bar their feet, which the road's plane takes in)
    wall_ret = int(((kind == 1) & grid.returned).sum())
    assert 0.9 * wall_ret <= counts["object_0_10m"][0] <= wall_ret
    fac_ret = int(((kind == 2) & grid.returned).sum())
    assert 0.9 * fac_ret <= counts["object_20_infm"][0] <= fac_ret
    rates = st["hole_rate_by_class"]
    n_wall = counts["object_0_10m"]
    assert rates["object_0_10m"] == pytest.approx(n_wall[1] / (n_wall[0] + n_wall[1]))
    # the near-object share is the near classes' share of the classified holes
    near = sum(counts[k][1] for k in ("object_0_10m", "object_10_20m"))
    assert st["holes_near_object_share"] == pytest.approx(near / sum(h for _, h in counts.values()))
    # a scan's rates on its own layout give back its near-object share, and its median range around
    # holes to within the fine band that holds it
    assert near_share_on_layout(rates, counts) == pytest.approx(st["holes_near_object_share"])
    fine = st["hole_fine_counts"]
    med = median_range_on_layout(hole_rates(fine), fine)
    band = next((lo, hi) for lo, hi in FINE_BANDS_M if lo <= st["holes_median_neighbour_range_m"] < hi)
    assert med is not None and band[0] <= med <= band[1]


def test_median_range_on_layout_reads_the_expected_holes() -> None:
    """Rates 0.5 on objects at 5-7.5 m and 0.2 at 30-40 m: on a layout of 100 and 400 returns there,
    100 and 100 holes are expected; the median falls at the top of the 5-7.5 m band."""
    names = {f"object_{lo:g}_{hi:g}m": (lo, hi) for lo, hi in FINE_BANDS_M if hi != float("inf")}
    assert "object_5_7.5m" in names and "object_30_40m" in names
    rates = {"object_5_7.5m": 0.5, "object_30_40m": 0.2}
    layout = {"object_5_7.5m": (100, 0), "object_30_40m": (400, 0)}
    assert median_range_on_layout(rates, layout) == pytest.approx(7.5)
    layout = {"object_5_7.5m": (100, 0), "object_30_40m": (1200, 0)}  # 100 near, 300 far holes
    assert median_range_on_layout(rates, layout) == pytest.approx(30.0 + 10.0 * (200 - 100) / 300)


def test_a_fine_class_of_a_few_rays_takes_its_coarse_classs_rate() -> None:
    """Change 37: a scan whose far ground at 60-120 m holds 2 holes and no return has a rate of 1 there,
    so any layout with returns there expected infinitely many holes and the median was undefined (None).
    Pooled, that class takes the rate of ground 20 m on (the fine bands 20-inf together); classes with
    enough rays keep their own."""
    fine = {
        name: (0, 0)
        for name in (
            f"{s}_{lo:g}_{'inf' if hi == float('inf') else f'{hi:g}'}m"
            for s in ("object", "ground")
            for lo, hi in FINE_BANDS_M
        )
    }
    fine |= {"object_5_7.5m": (300, 100), "ground_20_25m": (900, 100), "ground_60_120m": (0, 2)}
    layout = {"object_5_7.5m": (100, 0), "ground_60_120m": (50, 0)}
    assert hole_rates(fine)["ground_60_120m"] == 1.0
    assert median_range_on_layout(hole_rates(fine), layout) is None
    pooled = pooled_fine_rates(fine)
    assert pooled["object_5_7.5m"] == pytest.approx(0.25)  # 400 rays: its own
    assert pooled["ground_60_120m"] == pytest.approx(102 / 1002)  # ground 20 m on, pooled
    assert pooled["ground_20_25m"] == pytest.approx(0.1)
    med = median_range_on_layout(pooled, layout)
    assert med is not None and 5.0 < med < 7.5  # 33 near holes against 5.7 far ones


def test_a_layout_full_of_near_cars_moves_the_share_not_the_rates() -> None:
    """The same rates (physics) on two layouts: the near-object share follows the layout."""
    rates = hole_rates(
        {"object_0_10m": (80, 20), "object_20_infm": (50, 50)}
        | {k: (100, 0) for k in HOLE_CLASSES if k not in ("object_0_10m", "object_20_infm")}
    )
    far_street = {k: (0, 0) for k in HOLE_CLASSES} | {"object_0_10m": (400, 0), "object_20_infm": (400, 0)}
    near_cars = {k: (0, 0) for k in HOLE_CLASSES} | {"object_0_10m": (1600, 0), "object_20_infm": (100, 0)}
    # expected holes: 400 x 0.25 = 100 near, 400 x 1 = 400 far; 1600 x 0.25 = 400 near, 100 far
    assert near_share_on_layout(rates, far_street) == pytest.approx(100 / 500)
    assert near_share_on_layout(rates, near_cars) == pytest.approx(400 / 500)
    # a class the layout fills without a rate to give it: no answer
    assert near_share_on_layout({k: None for k in HOLE_CLASSES}, near_cars) is None


def test_class_counts_by_range_and_ground() -> None:
    counts = class_counts(
        np.array([5.0, 15.0, 25.0, 5.0]),
        np.array([False, False, False, True]),
        np.array([9.9, 10.0, np.nan]),
        np.array([0.0, 0.5, 0.0]),
    )
    assert counts["object_0_10m"] == (1, 1)
    assert counts["object_10_20m"] == (1, 0)
    assert counts["object_20_infm"] == (1, 0)
    assert counts["ground_0_10m"] == (1, 0)
    assert counts["ground_10_20m"] == (0, 1)


@pytest.mark.skipif(REAL is None, reason="../shared/reference/real absent")
def test_validate_realism_compares_both_layouts_with_kitti(tmp_path: Path) -> None:
    from rt_lidar.validation.realism_experiment import RealismOptions, realism, realism_options

    with realism_options(RealismOptions(presets=("HDL-64E",))), pytest.warns(UserWarning, match="left out"):
        rep = realism(tmp_path)
    lay = rep["layouts"]["HDL-64E"]
    assert list(lay) == ["demo", "residential", "KITTI"]
    kitti, demo, res = lay["KITTI"], lay["demo"], lay["residential"]
    # the residential street fills the crop with near cars as KITTI's frame does; the demo street less
    assert abs(res["near_object_fill"] - kitti["near_object_fill"]) < 0.1
    assert demo["near_object_fill"] < res["near_object_fill"] - 0.1
    # so more of its holes are in near objects, and nearer
    assert res["holes_near_object_share"] > demo["holes_near_object_share"]
    assert res["holes_median_neighbour_range_m"] < demo["holes_median_neighbour_range_m"]
    # the real frame's rates on its own layout give back its near-object share
    assert kitti["holes_near_object_share_on_real_layout"] == pytest.approx(kitti["holes_near_object_share"])
    assert kitti["holes_median_range_on_real_layout"] == pytest.approx(
        kitti["holes_median_neighbour_range_m"], abs=1.25
    )
    # either street's rates on KITTI's returns put the holes nearer than the demo street's own view does
    for lay in (demo, res):
        assert lay["holes_median_range_on_real_layout"] < demo["holes_median_neighbour_range_m"]
    assert demo["drop_share"] == rep["sim_drop_share"][0]
    assert "raydrop in KITTI's crop by layout" in (tmp_path / "realism.txt").read_text()
