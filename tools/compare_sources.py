"""The same street and drive through every hit source the controller reads, side by side.

Sources: our extension (``rtLidarGetHits``), stock AirSim's ``getLidarData`` with the name rules and
without them (every surface concrete), Cosys-AirSim's CPU and GPU lidars (``rt-lidar serve --flavor
cosys`` in-process) and CARLA-shaped semantic lidar buffers swept in the same world. Each source's hits
of the same frames go through the same physics; the table gives points per scan, the share of firings
without a return, and the mean intensity by the material each source said the surface was (the
physics' intensity; for Cosys's GPU lidar also its own). One frame = one rotation (``--sim-hz`` = the
rotation rate), so a CARLA tick sweeps the whole scan.

    python tools/compare_sources.py --preset VLP-16 --frames 3 --out compare.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.bridge.carla import CarlaLidarSetup, carla_tag_materials, decode_semantic_lidar, hits_from_carla
from rt_lidar.bridge.carla_world import semantic_lidar_tick
from rt_lidar.bridge.material_rules import load_material_rules
from rt_lidar.bridge.source import BridgeSource
from rt_lidar.physics.model import SensorPhysics
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.materials import load_material_table
from rt_lidar.sensor.presets import SensorPreset, load_preset
from rt_lidar.sensor.scan_pattern import firings_between, scan_period_ns
from rt_lidar.server.cosys_flavor import serve_cosys
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer
from rt_lidar.unreal_bridge.world import World, street_scene

SHOWN = ("asphalt", "lane_paint", "concrete", "brick", "building_plaster", "car_paint_white", "vegetation")
Frames = Callable[[SensorPreset, list[tuple[int, int]]], tuple[list[Hits], list[str]]]


def _bridged(seed: int, cosys: bool, **source_args: Any) -> Frames:
    def run(preset: SensorPreset, spans: list[tuple[int, int]]) -> tuple[list[Hits], list[str]]:
        sim = EmbeddedSim(World(street_scene(seed=seed)), preset, paused=True)
        server = AirSimServer(sim, port=0)
        if cosys:
            serve_cosys(server, sim)
        server.start()
        try:
            with AirSimClient(port=server.port) as client:
                src = BridgeSource(
                    client, preset, lockstep=True, sim_hz=1e9 / scan_period_ns(preset), **source_args
                )
                s = src.start_ns
                out = [src.hits(firings_between(preset, t0 + s, t1 + s), t0 + s, t1 + s) for t0, t1 in spans]
                return out, src.material_names
        finally:
            server.close()

    return run


def _carla(seed: int) -> Frames:
    def run(preset: SensorPreset, spans: list[tuple[int, int]]) -> tuple[list[Hits], list[str]]:
        world = World(street_scene(seed=seed))
        setup = CarlaLidarSetup.of_preset(preset)
        names = load_material_table().names
        lut = carla_tag_materials(names)
        out = []
        for t0, t1 in spans:
            tick = semantic_lidar_tick(
                world, setup, t1 * 1e-9, (t1 - t0) * 1e-9, 0.0, world.scene.sensor_mount
            )
            sweep = decode_semantic_lidar(tick.raw_data, tick.channel_counts)
            out.append(hits_from_carla(sweep, firings_between(preset, t0, t1), preset, setup, lut))
        return out, names

    return run


def compare(preset_name: str, frames: int, seed: int) -> dict[str, Any]:
    """Every source's figures (see the module's docstring)."""
    preset = load_preset(preset_name)
    period = scan_period_ns(preset)
    names = load_material_table().names
    rules = load_material_rules(None, names)
    spans = [(k * period, (k + 1) * period) for k in range(frames)]
    sources: dict[str, Frames] = {
        "rt-lidar extension": _bridged(seed, False),
        "stock AirSim + name rules": _bridged(seed, False, use_extension=False, material_rules=rules),
        "stock AirSim, no map": _bridged(seed, False, use_extension=False),
        "Cosys-AirSim CPU": _bridged(seed, True, use_extension=False, material_rules=rules, flavor="cosys"),
        "Cosys-AirSim GPU": _bridged(
            seed, True, use_extension=False, material_rules=rules, flavor="cosys-gpu"
        ),
        "CARLA-shaped buffers": _carla(seed),
    }
    report: dict[str, Any] = {"preset": preset.name, "frames": frames, "seed": seed, "sources": {}}
    for label, run in sources.items():
        hits_list, mats = run(preset, spans)
        physics = SensorPhysics.from_preset(preset, mats)
        rng = np.random.default_rng(seed)
        fired = points = 0
        by_mat: dict[str, list[float]] = {}
        own: dict[str, list[float]] = {}
        for hits in hits_list:
            labelled = _material_as_segment(hits)
            result = physics.apply(labelled, rng)
            fired += result.fired
            pts = result.points
            points += len(pts)
            for m in np.unique(pts["segment"]):
                if m > 0:
                    sel = pts["segment"] == m
                    by_mat.setdefault(mats[int(m) - 1], []).extend(pts["intensity"][sel].tolist())
            if hits.source_intensity is not None:
                hit = np.isfinite(hits.range_m) & (hits.material >= 0)
                for m in np.unique(hits.material[hit]):
                    sel = hit & (hits.material == m)
                    own.setdefault(mats[int(m)], []).extend(hits.source_intensity[sel].tolist())
        entry = {
            "points_per_scan": points / frames,
            "no_return_share": 1.0 - points / max(fired, 1),
            "intensity_by_material": {m: float(np.mean(v)) for m, v in sorted(by_mat.items())},
        }
        if own:
            entry["own_intensity_by_material"] = {m: float(np.mean(v)) for m, v in sorted(own.items())}
        report["sources"][label] = entry
    return report


def _material_as_segment(hits: Hits) -> Hits:
    """The hits with each ray's material number + 1 as its segment: the points then say their material."""
    import copy

    out = copy.copy(hits)
    out.segment = (hits.material.astype(np.int64) + 1).clip(0).astype(np.uint32)
    out.glass_segment = (hits.glass_material.astype(np.int64) + 1).clip(0).astype(np.uint32)  # its echoes too
    if hits.glass_mirror_material is not None:  # and the ghosts over the panes' mirrors
        out.glass_mirror_segment = (hits.glass_mirror_material.astype(np.int64) + 1).clip(0).astype(np.uint32)
    return out


def table(report: dict[str, Any]) -> str:
    """The report as a Markdown table."""
    head = "| source | points/scan | no return | " + " | ".join(SHOWN) + " |"
    lines = [head, "|" + "---|" * (3 + len(SHOWN))]
    for label, e in report["sources"].items():
        ints = e["intensity_by_material"]
        cells = [f"{ints[m]:.0f}" if m in ints else "-" for m in SHOWN]
        lines.append(
            f"| {label} | {e['points_per_scan']:.0f} | {100 * e['no_return_share']:.1f} % | "
            + " | ".join(cells)
            + " |"
        )
        if "own_intensity_by_material" in e:
            own = e["own_intensity_by_material"]
            cells = [f"{own[m]:.2f}" if m in own else "-" for m in SHOWN]
            lines.append("| ... its own intensity (0..1) | | | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, write the JSON, print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="VLP-16")
    p.add_argument("--frames", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the figures as JSON here")
    args = p.parse_args(argv)
    report = compare(args.preset, args.frames, args.seed)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
