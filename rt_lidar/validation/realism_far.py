"""The far objects' rays by the surface each met (docs/realism.md, change 66).

The raydrop statistics class a hole by its returning neighbours (:mod:`rt_lidar.validation.realism_holes`:
``object_20_infm``, objects 20 m and more off, is a hole whose neighbours' median range is 20 m or more
and less than half of them ground, or a return from 20 m or more off the ground), which is all a real
frame allows. A simulated scan also knows what each ray met. Here every ray of that class in KITTI's
camera view, hole or return, is traced back to the pulse that fired it (its laser's ring, the nearest
firing in azimuth that did or did not return as the cell did) and gets what the cast found there:

- ``group``: the first surface's kind (:func:`surface_group`: building glazing to the room behind it or to
  something else, a car's glazing to its cabin or beyond, car paint, tyres, facades, vegetation, nothing
  within range, other);
- ``material``: the first surface's material, ``"pane > behind"`` where the ray crossed glass;
- ``range_m`` and ``cos_incidence`` at the first surface (the pane where there is one; inf and 0 for a ray
  that met nothing);
- ``ring`` and ``elevation_deg`` of its laser.

:func:`far_decomposition` counts rays and holes per group, per incidence band and per range band, each
hole's share of the class's rate (holes over all the class's rays), so the bands add up to the rate.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.frame_loop import Sensed
from rt_lidar.sensor.materials import MaterialTable
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.validation.realism import fit_ground, ground_returns, hole_neighbour_classes, street_holes
from rt_lidar.validation.realism_experiment import FRAMES, SEED, scan_grid, simulated_scans
from rt_lidar.validation.realism_grid import ScanGrid, camera_view

__all__ = [
    "COS_BANDS",
    "FAR_M",
    "RANGE_BANDS_M",
    "FarRays",
    "far_decomposition",
    "far_object_rays",
    "surface_group",
]

FAR_M = 20.0
"""The far-object class's inner range (``object_20_infm``)."""
MATCH_DEG = 0.1
"""A cell and the firing it stands for lie this close in azimuth at most (half a step at 0.17 deg)."""
COS_BANDS = ((0.0, 0.1), (0.1, 0.2), (0.2, 0.35), (0.35, 0.5), (0.5, 0.7), (0.7, 1.01))
"""Incidence-cosine bands of :func:`far_decomposition`."""
RANGE_BANDS_M = (
    (0.0, 10.0),
    (10.0, 20.0),
    (20.0, 30.0),
    (30.0, 40.0),
    (40.0, 60.0),
    (60.0, 80.0),
    (80.0, np.inf),
)
"""Bands of the first surface's own range (a far-classed hole may lie on a near surface at grazing)."""
CAMERA_SIZE = (1242, 375)
"""KITTI camera 2's image (pixels), as ``validate`` crops."""

_GROUPS = (
    ("facades", ("brick", "building_plaster", "concrete")),
    ("car paint", ("car_paint_black", "car_paint_white", "car_paint_red", "car_paint_silver")),
    ("tyres", ("rubber",)),
    ("vegetation", ("vegetation", "grass", "bark")),
)


def surface_group(material: str) -> str:
    """The kind of the surface a ray met, from :class:`FarRays`' ``material`` ("pane > behind" for glass)."""
    if " > " in material:
        pane, behind = material.split(" > ")
        if pane == "glass":
            return "building glazing: room" if behind == "interior" else "building glazing: reveal, beyond"
        return "car glazing: cabin" if behind == "car_interior" else "car glazing: beyond the car"
    if material == "-":
        return "nothing within range"
    return next((g for g, names in _GROUPS if material in names), "other")


@dataclass(frozen=True)
class FarRays:
    """The far-object rays of some scans, holes and returns, with what each met (module docstring)."""

    hole: np.ndarray
    material: np.ndarray
    group: np.ndarray
    range_m: np.ndarray
    cos_incidence: np.ndarray
    ring: np.ndarray
    elevation_deg: np.ndarray


def _pulses(hits: list[Any]) -> dict[str, np.ndarray]:
    """Every fired pulse of ``hits`` (one ray a pulse): time, ring, azimuth and what it met first (the
    pane where it crossed glass: its range and incidence, and the surface behind it)."""
    cat = np.concatenate
    glass = cat([h.glass_material for h in hits])
    crossed = glass >= 0
    rng = cat([h.range_m for h in hits])
    return {
        "t": cat([h.firings.t_ns for h in hits]).astype(np.int64),
        "ring": cat([h.firings.ring for h in hits]).astype(np.int64),
        "az": cat([np.degrees(np.arctan2(h.direction[:, 1], h.direction[:, 0])) for h in hits]),
        "glass": glass,
        "surface": np.where(np.isfinite(rng), cat([h.material for h in hits]), -1),
        "range_m": np.where(crossed, cat([h.glass_range_m for h in hits]), rng),
        "cos": np.where(crossed, cat([h.glass_cos for h in hits]), cat([h.cos_incidence for h in hits])),
    }


def _label(names: tuple[str, ...] | list[str], glass: int, surface: int) -> str:
    """A ray's first surface: its material's name, "pane > behind" across glass, "-" for none."""
    behind = names[surface] if surface >= 0 else "-"
    return f"{names[glass]} > {behind}" if glass >= 0 else behind


def _far_cells(grid: ScanGrid) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rings, columns, hole flags, rings' elevation sines) of the far-object class's cells of ``grid``,
    classed as :func:`~rt_lidar.validation.realism.realism_statistics` classes them."""
    plane = fit_ground(grid.xyz[grid.returned & grid.in_view], 0)
    if plane is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0)
    ground = ground_returns(grid, plane)
    holes, ret, az, order, elev = street_holes(grid)
    med, g_share = hole_neighbour_classes(grid, holes, ret, az, order, ground)  # NaN: in no class
    hk, hc = np.nonzero(holes)
    far_hole = np.isfinite(med) & (med >= FAR_M) & (g_share < 0.5)
    rk, rc = np.nonzero(ret & ~ground & (grid.range_m >= FAR_M))
    k = np.concatenate([hk[far_hole], rk])
    c = np.concatenate([hc[far_hole], rc])
    hole = np.concatenate([np.ones(int(far_hole.sum()), bool), np.zeros(rk.size, bool)])
    return k, c, hole, elev


def _scan_rays(
    preset: SensorPreset,
    scan: Scan,
    pulses: dict[str, np.ndarray],
    calib: dict[str, np.ndarray],
    names: tuple[str, ...] | list[str],
) -> dict[str, np.ndarray]:
    """The far-object rays of one scan, each matched to its firing among ``pulses``."""
    grid = scan_grid(preset, scan)
    grid = dataclasses.replace(grid, in_view=grid.in_view & camera_view(grid.direction, calib, CAMERA_SIZE))
    k, c, hole, elev = _far_cells(grid)
    if not preset.scan.rotation_hz:
        raise ValueError(f"{preset.name}: far_object_rays reads a rotating sensor's scans")
    period = round(1e9 / preset.scan.rotation_hz)
    mine = (pulses["t"] >= scan.start_ns) & (pulses["t"] < scan.start_ns + period)
    q = {key: v[mine] for key, v in pulses.items()}
    p = scan.points[scan.points["return_id"] == 0]
    returned = np.isin(
        q["t"] * 1024 + q["ring"], (scan.start_ns + p["t"].astype(np.int64)) * 1024 + p["ring"]
    )
    rings = np.unique(p["ring"]).astype(np.int64)
    cell_az = np.degrees(np.arctan2(grid.direction[..., 1], grid.direction[..., 0]))
    idx = np.full(k.size, -1)
    for kk in np.unique(k):
        for want in (True, False):  # a hole is a firing that returned nothing, a return one that did
            sel = np.flatnonzero((k == kk) & (hole != want))
            cand = np.flatnonzero((q["ring"] == rings[kk]) & (returned == want))
            if sel.size == 0 or cand.size == 0:
                continue
            d = np.abs((cell_az[kk, c[sel]][:, None] - q["az"][cand][None, :] + 180.0) % 360.0 - 180.0)
            j = np.argmin(d, axis=1)
            ok = d[np.arange(j.size), j] < MATCH_DEG
            idx[sel[ok]] = cand[j[ok]]
    if (idx < 0).any():
        raise RuntimeError(f"{int((idx < 0).sum())} far-object cells without their firing")
    if np.unique(idx).size != idx.size:
        raise RuntimeError(f"{idx.size - np.unique(idx).size} far-object cells matched to a firing twice")
    return {
        "hole": hole,
        "material": np.asarray(
            [
                _label(names, g, m)
                for g, m in zip(q["glass"][idx].tolist(), q["surface"][idx].tolist(), strict=True)
            ],
            dtype=object,
        ),
        "range_m": q["range_m"][idx],
        "cos_incidence": q["cos"][idx],
        "ring": rings[k],
        "elevation_deg": np.degrees(np.arcsin(np.clip(elev[k], -1.0, 1.0))),
    }


def far_object_rays(
    preset_name: str,
    calib: dict[str, np.ndarray] | None = None,
    frames: int = FRAMES,
    seed: int = SEED,
    materials: MaterialTable | None = None,
) -> FarRays:
    """The far-object rays in KITTI's camera view (``calib``: its calibration; None: frame 000008's,
    :func:`~rt_lidar.validation.kitti_typical.camera2_view`) of the scans ``validate --only realism``
    measures for ``preset_name`` (:func:`~rt_lidar.validation.realism_experiment.simulated_scans`;
    ``materials``: another material table), each with what it met."""
    if calib is None:
        from rt_lidar.validation.kitti_typical import camera2_view

        calib = camera2_view()
    if frames < 1:
        raise ValueError(f"far_object_rays reads at least one scan, not {frames}")
    hits: list[Any] = []

    def keep(sensed: Sensed) -> None:
        if sensed.hits.subrays != 1:
            raise ValueError("far_object_rays reads one ray a pulse")
        hits.append(sensed.hits)

    preset, scans = simulated_scans(preset_name, frames, seed, materials=materials, on_sensed=keep)
    from rt_lidar.pipeline.builder import build_world  # the world's material names, as the cast used them

    names = build_world("street", seed=seed).material_names
    pulses = _pulses(hits)
    rays = [_scan_rays(preset, s, pulses, calib, names) for s in scans]
    out = {key: np.concatenate([r[key] for r in rays]) for key in rays[0]}
    group = np.asarray([surface_group(m) for m in out["material"].tolist()], dtype=object)
    return FarRays(group=group, **out)


def _rows(rays: FarRays, keys: list[tuple[str, np.ndarray]]) -> list[dict[str, Any]]:
    n = max(rays.hole.size, 1)
    total = max(int(rays.hole.sum()), 1)
    out = []
    for name, sel in keys:
        r, h = int(sel.sum()), int((sel & rays.hole).sum())
        out.append(
            {
                "name": name,
                "rays": r,
                "holes": h,
                "rate": h / r if r else None,
                "share": h / total,
                "of_rate": h / n,
            }
        )
    return out


def far_decomposition(rays: FarRays) -> dict[str, Any]:
    """The class's hole rate and its holes split by surface group, by incidence band and by the first
    surface's range band: each row's rays, holes, own rate, share of the holes and part of the rate."""
    groups = sorted(set(rays.group.tolist()), key=lambda g: -int((rays.group == g)[rays.hole].sum()))
    cos = [
        (f"cos {lo:g}-{min(hi, 1.0):g}", (rays.cos_incidence >= lo) & (rays.cos_incidence < hi))
        for lo, hi in COS_BANDS
    ]
    rng = [
        (
            f"{lo:g}-{hi:g} m" if np.isfinite(hi) else f"{lo:g} m on, or nothing",
            (rays.range_m >= lo) & ((rays.range_m < hi) | (hi == np.inf)),
        )
        for lo, hi in RANGE_BANDS_M
    ]
    return {
        "rays": int(rays.hole.size),
        "holes": int(rays.hole.sum()),
        "rate": float(rays.hole.mean()) if rays.hole.size else None,
        "by_group": _rows(rays, [(g, rays.group == g) for g in groups]),
        "by_incidence": _rows(rays, cos),
        "by_range": _rows(rays, rng),
    }
