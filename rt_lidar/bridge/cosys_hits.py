"""A frame's hits from a Cosys-AirSim lidar answer (:mod:`rt_lidar.bridge.cosys`).

Cosys-AirSim answers a whole rotation on its own evenly spaced grid; the controller fires the preset's
schedule. Each firing of the frame is served by the grid cell nearest its direction (the nearest channel
by elevation, the nearest column by heading: :meth:`CosysGrid.cells_of`): its point gives the range and
the direction, its zeros a miss, its label (CPU lidar) or segmentation colour (GPU lidar) the material.
The incidence comes from the organised range image (:func:`rt_lidar.bridge.recover._normals_cos`), the
GPU lidar's own intensity is kept beside the hits (:attr:`Hits.source_intensity`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rt_lidar.bridge.cosys import CosysFrame, CosysGrid, colour_ids
from rt_lidar.bridge.material_rules import MaterialRules
from rt_lidar.bridge.recover import _normals_cos
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import Firings

__all__ = ["CellLabels", "cell_labels", "hits_from_cosys"]


@dataclass(frozen=True)
class CellLabels:
    """Per grid cell of one answer: material number (-1 for a miss) and segment id."""

    material: np.ndarray  # (cells,) int16
    segment: np.ndarray  # (cells,) uint32


def cell_labels(
    frame: CosysFrame,
    material_names: Sequence[str],
    rules: MaterialRules,
    segment_material: Mapping[int, str],
    segment_of_label: dict[str, int],
) -> CellLabels:
    """The material and segment of every cell of ``frame``: a CPU answer's labels through ``rules``
    (each actor name gets a segment id of its own, kept in ``segment_of_label`` across frames); a GPU
    answer's colours through Cosys's colour map to the ids set at connect, and ``segment_material``."""
    n = len(frame.points)
    returned = frame.returned
    if frame.labels is not None:
        material = rules.materials_of(frame.labels, material_names) if n else np.zeros(0, np.int16)
        for label in dict.fromkeys(frame.labels):
            segment_of_label.setdefault(label, len(segment_of_label) + 1)
        segment = np.array([segment_of_label[s] for s in frame.labels], np.uint32)
    else:
        assert frame.rgb is not None
        ids = colour_ids(frame.rgb)
        index = {m: i for i, m in enumerate(material_names)}
        default = index.get(rules.default, 0)
        lut = np.full(257, default, np.int16)
        for k, m in segment_material.items():
            if 0 <= int(k) <= 255 and m in index:
                lut[int(k)] = index[m]
        material = lut[np.where(ids >= 0, ids, 256)]
        segment = np.maximum(ids, 0).astype(np.uint32)
    material = np.where(returned, material, -1).astype(np.int16)
    return CellLabels(material, np.where(returned, segment, 0).astype(np.uint32))


def hits_from_cosys(
    frame: CosysFrame, labels: CellLabels, firings: Firings, preset: SensorPreset, grid: CosysGrid
) -> Hits:
    """The hits of ``firings`` served from the cells of ``frame`` (see the module's docstring)."""
    n = len(firings)
    gpu = frame.labels is None
    direction = firings.directions().copy()
    range_m = np.full(n, np.inf, np.float32)
    material = np.full(n, -1, np.int16)
    segment = np.zeros(n, np.uint32)
    cos_inc = np.zeros(n, np.float32)
    source_intensity = np.zeros(n, np.float32) if gpu else None
    if n and len(frame.points) == grid.size:
        cells = grid.cells_of(firings.azimuth_deg, firings.elevation_deg, gpu)
        hit = frame.returned[cells]
        p = frame.points[cells[hit]].astype(np.float64)
        r = np.linalg.norm(p, axis=1)
        range_m[hit] = r
        direction[hit] = (p / r[:, None]).astype(np.float32)
        material[hit] = labels.material[cells[hit]]
        segment[hit] = labels.segment[cells[hit]]
        cos_inc[hit] = _normals_cos(firings, range_m, direction, preset.n_rings)[hit]
        if source_intensity is not None and frame.intensity is not None:
            source_intensity[hit] = frame.intensity[cells[hit]]
    hits = Hits.without_glass(firings, direction, range_m, cos_inc, material, segment)
    hits.source_intensity = source_intensity
    return hits
