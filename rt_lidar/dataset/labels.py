"""Semantic classes of generated datasets: the SemanticKITTI label ids and the object/material class map.

A label is ``uint32``: semantic class in the low 16 bits, instance (the segmentation id of the surface
hit) in the high 16 bits. The class of a point comes from the first :class:`LabelRule` whose object-name
pattern and material pattern (``fnmatch`` globs) match the object and the material that was is made of
(its main material: the one most of its faces have). Classes are per object because a point carries
the segmentation id of what it hit, not the material. Points of no object (weather clutter, segment 0)
are ``outlier``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

import numpy as np

__all__ = [
    "DEFAULT_RULES",
    "OUTLIER",
    "SEMANTIC_KITTI_CLASSES",
    "LabelRule",
    "class_lut",
    "make_labels",
    "split_labels",
]

SEMANTIC_KITTI_CLASSES: dict[str, int] = {
    "unlabeled": 0,
    "outlier": 1,
    "car": 10,
    "bicycle": 11,
    "bus": 13,
    "motorcycle": 15,
    "on-rails": 16,
    "truck": 18,
    "other-vehicle": 20,
    "person": 30,
    "bicyclist": 31,
    "motorcyclist": 32,
    "road": 40,
    "parking": 44,
    "sidewalk": 48,
    "other-ground": 49,
    "building": 50,
    "fence": 51,
    "other-structure": 52,
    "lane-marking": 60,
    "vegetation": 70,
    "trunk": 71,
    "terrain": 72,
    "pole": 80,
    "traffic-sign": 81,
    "other-object": 99,
    "moving-car": 252,
    "moving-bicyclist": 253,
    "moving-person": 254,
    "moving-motorcyclist": 255,
    "moving-on-rails": 256,
    "moving-bus": 257,
    "moving-truck": 258,
    "moving-other-vehicle": 259,
}
"""SemanticKITTI's raw label ids (``semantic-kitti.yaml``, ``labels``)."""

OUTLIER = SEMANTIC_KITTI_CLASSES["outlier"]


@dataclass(frozen=True)
class LabelRule:
    """Objects named like ``object`` whose main material is named like ``material`` are of class
    ``label``."""

    object: str
    material: str
    label: str

    def matches(self, object_name: str, material_name: str) -> bool:
        """True when both globs match (case-sensitive)."""
        return fnmatchcase(object_name, self.object) and fnmatchcase(material_name, self.material)


DEFAULT_RULES: tuple[LabelRule, ...] = tuple(
    LabelRule(o, m, c)
    for o, m, c in (
        # the procedural street's objects (unreal_bridge.world.street)
        ("road", "*", "road"),
        ("lane_markings", "*", "lane-marking"),
        ("sidewalk_*", "*", "sidewalk"),
        ("ground", "*", "other-ground"),
        ("building_*", "*", "building"),
        ("car_moving_*", "*", "moving-car"),
        ("car_*", "*", "car"),
        ("street_light_*", "*", "pole"),
        ("sign_*", "*", "traffic-sign"),
        ("tree_*", "*", "vegetation"),
        ("rock_*", "*", "other-object"),
        # anything else by its material
        ("*", "asphalt", "road"),
        ("*", "lane_paint", "lane-marking"),
        ("*", "vegetation", "vegetation"),
        ("*", "bark", "trunk"),
        ("*", "metal_pole", "pole"),
        ("*", "sign_sheeting", "traffic-sign"),
        ("*", "brick", "building"),
        ("*", "building_plaster", "building"),
        ("*", "car_paint_*", "car"),
        ("*", "*", "other-object"),
    )
)


def class_lut(objects: Sequence[tuple[str, int, str]], rules: Sequence[LabelRule]) -> np.ndarray:
    """Semantic class per segment id (0..255) as a (256,) uint16 table.

    ``objects`` are (name, segment id, main material) in scene order; segment 0 is ``outlier``. Raises
    ValueError when two objects of one segment id fall in different classes (their points could not be
    told apart).
    """
    lut = np.full(256, OUTLIER, dtype=np.uint16)
    owner: dict[int, str] = {}
    for name, seg, material in objects:
        if seg == 0:
            continue
        label = _classify(name, material, rules)
        if seg in owner and int(lut[seg]) != label:
            raise ValueError(
                f"objects {owner[seg]!r} and {name!r} share segment id {seg} but have different classes"
            )
        owner.setdefault(seg, name)
        lut[seg] = label
    return lut


def _classify(name: str, material: str, rules: Sequence[LabelRule]) -> int:
    for rule in rules:
        if rule.matches(name, material):
            return SEMANTIC_KITTI_CLASSES[rule.label]
    return SEMANTIC_KITTI_CLASSES["unlabeled"]


def make_labels(segment: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """SemanticKITTI labels of points with segmentation ids ``segment``: class from ``lut``, instance =
    the segmentation id."""
    seg = np.asarray(segment, dtype=np.uint32)
    semantic = lut[np.minimum(seg, np.uint32(lut.shape[0] - 1))].astype(np.uint32)
    return semantic | (seg << np.uint32(16))


def split_labels(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(semantic, instance) uint16 arrays of SemanticKITTI labels."""
    lab = np.asarray(labels, dtype=np.uint32)
    return (lab & np.uint32(0xFFFF)).astype(np.uint16), (lab >> np.uint32(16)).astype(np.uint16)
