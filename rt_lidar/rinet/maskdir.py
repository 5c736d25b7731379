"""Mask directories: the training data format shared by ``build-mask`` and ``generate-pairs``.

``DIR/masks.json`` lists the frames: ``name``, ``image`` (path, relative to DIR or absolute), ``mask``
(``masks/NAME.npz``, see :class:`~rt_lidar.rinet.masks.IntensityMask`), ``points_in_image``,
``drop_rays``, ``drop_pixels`` and ``return_pixels``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tqdm import tqdm

from rt_lidar.rinet.datasets import iter_frames
from rt_lidar.rinet.masks import IntensityMask, build_mask

__all__ = ["build_mask_dir", "frame_entry", "write_index"]


def frame_entry(name: str, image: str, mask: IntensityMask) -> dict[str, Any]:
    """One ``masks.json`` record."""
    return {
        "name": name,
        "image": image,
        "mask": f"masks/{name}.npz",
        "points_in_image": mask.points_in_image,
        "drop_rays": mask.drop_rays,
        "drop_pixels": mask.drop_pixels,
        "return_pixels": mask.return_pixels,
        "height": int(mask.label.shape[0]),
        "width": int(mask.label.shape[1]),
    }


def write_index(out: Path, frames: list[dict[str, Any]], source: dict[str, Any]) -> Path:
    """Write ``out/masks.json``; returns its path."""
    path = out / "masks.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"source": source, "frames": frames}, indent=2))
    tmp.replace(path)
    return path


def build_mask_dir(
    layout: str,
    root: str | Path,
    out: str | Path,
    *,
    sequence: str = "00",
    radius: int = 3,
    limit: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """Masks of every frame of a dataset (``limit`` > 0: the first ``limit``); returns the index."""
    out_dir = Path(out)
    (out_dir / "masks").mkdir(parents=True, exist_ok=True)
    frames: list[dict[str, Any]] = []
    for fr in tqdm(
        iter_frames(layout, root, sequence), disable=not progress, desc="build-mask", unit="frame"
    ):
        h, w = fr.image.shape[:2]
        mask = build_mask(fr.points[:, :3], fr.points[:, 3], fr.calib.projection(), w, h, radius=radius)
        mask.save(out_dir / "masks" / f"{fr.name}.npz")
        frames.append(frame_entry(fr.name, str(fr.image_path.resolve()), mask))
        if limit and len(frames) >= limit:
            break
    source = {"layout": layout, "root": str(Path(root).resolve()), "sequence": sequence, "radius": radius}
    write_index(out_dir, frames, source)
    return {"source": source, "frames": frames}
