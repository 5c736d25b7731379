"""Training pairs from the embedded world: camera image + physics scan -> intensity mask.

For each kept scan the camera is rendered when the sweep crosses its view; the scan's points (ring
known, intensity / ``intensity_max``) are projected into it; the fired-but-empty cells of the organised
range image are the dropped rays; sky pixels (the rendered depth is inf) are no ray's business and
stay unlabelled. Writes a mask directory (:mod:`rt_lidar.rinet.maskdir`): ``image_2/NAME.png``,
``masks/NAME.npz``, ``masks.json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from tqdm import tqdm

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.scan_loop import run_scans
from rt_lidar.rinet.maskdir import frame_entry, write_index
from rt_lidar.rinet.masks import build_mask, project
from rt_lidar.rinet.stage import camera_projection
from rt_lidar.schema import check_fields, spec
from rt_lidar.unreal_bridge.world import CameraSpec

__all__ = ["PairsConfig", "generate_pairs"]


@dataclass(frozen=True)
class PairsConfig:
    """What ``rinet generate-pairs`` renders."""

    preset: str = "HDL-64E"
    scene: str = "street"
    seeds: tuple[int, ...] = spec((0,), 0, 2**63 - 1, min_items=1)
    """One street layout per seed."""
    scans_per_seed: int = spec(10, 1, 10**6)
    every: int = spec(3, 1, 10**6)
    """Keep every k-th scan (consecutive scans look alike)."""
    width: int = spec(512, 8, 8192, "px")
    height: int = spec(288, 8, 8192, "px")
    fov_deg: float = spec(90.0, 1.0, 179.0, "deg")
    radius: int = spec(1, 0, 64, "px")
    sim_hz: float = spec(20.0, 0.1, 10_000.0, "Hz")
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self, "rinet generate-pairs")  # lists of seeds are stored as tuples


def generate_pairs(out: str | Path, cfg: PairsConfig, progress: bool = False) -> dict[str, Any]:
    """Render ``cfg.scans_per_seed`` pairs per seed into ``out``; returns the index."""
    out_dir = Path(out)
    (out_dir / "image_2").mkdir(parents=True, exist_ok=True)
    (out_dir / "masks").mkdir(parents=True, exist_ok=True)
    camera = CameraSpec(width=cfg.width, height=cfg.height, fov_deg=cfg.fov_deg)
    frames: list[dict[str, Any]] = []
    bar = tqdm(total=len(cfg.seeds) * cfg.scans_per_seed, disable=not progress, desc="pairs", unit="pair")
    for seed in cfg.seeds:
        _seed_pairs(out_dir, cfg, camera, int(seed), frames, bar)
    bar.close()
    source = {"generator": "embedded-world", **asdict(cfg), "seeds": [int(s) for s in cfg.seeds]}
    write_index(out_dir, frames, source)
    return {"source": source, "frames": frames}


def _seed_pairs(
    out_dir: Path, cfg: PairsConfig, camera: CameraSpec, seed: int, frames: list[dict[str, Any]], bar: tqdm
) -> None:
    """The pairs of one scene seed: every ``cfg.every``-th scan from the first, with its camera image."""
    built = build_pipeline(cfg.preset, cfg.scene, seed=seed, sim_hz=cfg.sim_hz)
    proj = camera_projection(camera, built.world.scene.sensor_mount)
    elev = np.radians([b.elevation_deg for b in built.preset.beams])
    imax = float(built.preset.output.intensity_max)
    every = max(cfg.every, 1)
    n_scans = 0

    def take(scan: Scan) -> None:
        nonlocal n_scans
        n_scans += 1
        if (n_scans - 1) % every:
            return
        pts = scan.points
        xyz = np.stack([pts["x"], pts["y"], pts["z"]], axis=1).astype(np.float64)
        inside = project(xyz, proj, camera.width, camera.height)[3]
        t_ns = scan.start_ns + (int(np.median(pts["t"][inside])) if inside.any() else 0)
        img = built.world.render_camera(camera, t_ns * 1e-9)
        mask = build_mask(
            xyz,
            pts["intensity"] / imax,
            proj,
            camera.width,
            camera.height,
            ring=pts["ring"].astype(np.int64),
            row_elevation=elev,
            radius=cfg.radius,
            no_ray=~np.isfinite(img.depth),
        )
        name = f"{seed:02d}{(n_scans - 1) // every:04d}"
        Image.fromarray(img.rgb).save(out_dir / "image_2" / f"{name}.png")
        mask.save(out_dir / "masks" / f"{name}.npz")
        frames.append(frame_entry(name, f"image_2/{name}.png", mask))
        bar.update(1)

    # the scans up to the last pair's (every k-th from the first)
    run_scans(built.pipeline, (cfg.scans_per_seed - 1) * every + 1, on_scan=take)
