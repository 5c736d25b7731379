"""Materials for a simulator that knows none: actor names -> materials by name rules.

Stock AirSim's ``getLidarData`` gives each point a segmentation id, Cosys-AirSim's the name of the actor
it hit; neither says what the surface is made of. A rule is a regular expression on the actor's name and
the material the objects it matches get (``[[rules]] pattern = "..." material = "..."`` in a TOML file).
The shipped rules (``material_rules.toml`` beside this module) name the meshes of AirSim's stock
environments; a user's file (``--material-rules FILE``) comes first. At connect the controller lists the
scene's objects (``simListSceneObjects``), sets every object's segmentation id to 0 and each matched
object's to its material's id (``simSetSegmentationObjectID``), and reads the points' ids back through
the map this builds (:func:`assign_segmentation`); a name read from the wire (Cosys-AirSim's
``groundtruth``) goes through the same rules (:meth:`MaterialRules.materials_of`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rt_lidar.errors import ConfigError

__all__ = [
    "DEFAULT_MATERIAL",
    "DEFAULT_RULES",
    "MaterialAssignment",
    "MaterialRule",
    "MaterialRules",
    "assign_segmentation",
    "load_material_rules",
    "match_scene",
]

DEFAULT_RULES = Path(__file__).with_name("material_rules.toml")
"""The shipped rules: the meshes of AirSim's stock environments (Blocks, CityEnviron, Neighborhood,
LandscapeMountains) and common Unreal asset names."""
DEFAULT_MATERIAL = "concrete"
"""What an object no rule matches is taken to be (as the stock path always did)."""
UNMATCHED_ID = 0
"""The segmentation id every object gets first; only matched objects are given another."""


@dataclass(frozen=True)
class MaterialRule:
    """One rule: objects whose whole name matches ``pattern`` (case-insensitive) are ``material``."""

    pattern: str
    material: str
    origin: str
    """Where the rule came from: ``FILE rules[K]``."""
    regex: re.Pattern[str] = field(compare=False, repr=False)


@dataclass(frozen=True)
class MaterialRules:
    """Rules in the order they are tried (the first match wins), and the default material."""

    rules: tuple[MaterialRule, ...]
    default: str = DEFAULT_MATERIAL

    def material_of(self, name: str) -> str | None:
        """The material of the object ``name``, None when no rule matches it."""
        for rule in self.rules:
            if rule.regex.fullmatch(name):
                return rule.material
        return None

    def materials_of(self, names: Sequence[str], material_names: Sequence[str]) -> np.ndarray:
        """Material numbers (index into ``material_names``; the default's where no rule matches) of
        ``names``, each distinct name matched once (a lidar's labels repeat)."""
        index = {m: i for i, m in enumerate(material_names)}
        default = index.get(self.default, 0)
        unique, inverse = np.unique(np.asarray(names, dtype=object).astype(str), return_inverse=True)
        numbers = np.array([index.get(self.material_of(str(n)) or "", default) for n in unique], np.int16)
        return numbers[inverse.reshape(-1)] if len(unique) else np.zeros(0, np.int16)


def _rules_of(path: Path, known: Sequence[str]) -> list[MaterialRule]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the material rules: {exc}") from exc
    table = data.get("rules")
    if not isinstance(table, list) or not all(isinstance(r, dict) for r in table):
        raise ConfigError(f'{path}: needs [[rules]] tables of pattern = "REGEX", material = "NAME"')
    out = []
    for k, entry in enumerate(table):
        where = f"{path}: field 'rules[{k}]"
        pattern, material = entry.get("pattern"), entry.get("material")
        extra = sorted(set(entry) - {"pattern", "material"})
        if extra:
            raise ConfigError(f"{where}.{extra[0]}': unknown field (a rule has pattern and material)")
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(f"{where}.pattern': must be a regular expression (a non-empty string)")
        if not isinstance(material, str) or material not in known:
            raise ConfigError(f"{where}.material': unknown material {material!r} (valid: {', '.join(known)})")
        try:
            regex = re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            raise ConfigError(f"{where}.pattern': bad regular expression {pattern!r}: {exc}") from None
        out.append(MaterialRule(pattern, material, f"{path.name} rules[{k}]", regex))
    return out


def load_material_rules(
    user_file: str | Path | None, material_names: Sequence[str], shipped: bool = True
) -> MaterialRules:
    """The user's rules (``user_file``, tried first) and the shipped ones (unless ``shipped`` is False),
    every material checked against ``material_names`` (an unknown one is an error listing the valid)."""
    rules: list[MaterialRule] = []
    if user_file is not None:
        rules += _rules_of(Path(user_file), material_names)
    if shipped:
        rules += _rules_of(DEFAULT_RULES, material_names)
    default = DEFAULT_MATERIAL if DEFAULT_MATERIAL in material_names else material_names[0]
    return MaterialRules(tuple(rules), default)


class SegmentationClient(Protocol):
    """The three calls :func:`assign_segmentation` makes (``AirSimClient`` has them)."""

    def sim_list_scene_objects(self, name_regex: str = ".*") -> list[str]:
        """``simListSceneObjects``."""
        ...

    def sim_set_segmentation_object_id(
        self, mesh_name: str, object_id: int, is_name_regex: bool = False
    ) -> bool:
        """``simSetSegmentationObjectID``."""
        ...


@dataclass
class MaterialAssignment:
    """What :func:`assign_segmentation` did: objects by material, the id each material got, the rest."""

    objects: dict[str, list[str]]
    """Matched object names by material."""
    ids: dict[str, int]
    """The segmentation id of each material that matched something."""
    unmatched: list[str]
    default: str
    refused: list[str] = field(default_factory=list)
    """Objects the server would not set an id on (``simSetSegmentationObjectID`` answered False)."""

    @property
    def segment_material(self) -> dict[int, str]:
        """The material map the stock path reads the points' ids through (id -> material)."""
        return {i: m for m, i in self.ids.items()}

    def summary_line(self) -> str:
        """One line: how many objects got which material, how many stayed on the default."""
        total = sum(len(v) for v in self.objects.values()) + len(self.unmatched)
        parts = ", ".join(
            f"{len(v)} {m}" for m, v in sorted(self.objects.items(), key=lambda kv: -len(kv[1]))
        )
        line = f"materials by name rules: {total} objects: {parts or 'none matched'}"
        line += f"; {len(self.unmatched)} on the default ({self.default})"
        if self.unmatched:
            shown = ", ".join(self.unmatched[:5]) + (", ..." if len(self.unmatched) > 5 else "")
            line += f": {shown}"
        if self.refused:
            line += f"; {len(self.refused)} refused an id"
        return line

    def as_dict(self) -> dict[str, Any]:
        """For summary.json."""
        return {
            "by_material": {m: len(v) for m, v in self.objects.items()},
            "ids": dict(self.ids),
            "default": self.default,
            "on_default": len(self.unmatched),
            "on_default_names": self.unmatched[:50],
            "refused": self.refused,
        }


def material_ids(material_names: Sequence[str]) -> dict[str, int]:
    """The segmentation id of each material: its number in the table + 1 (0 is left for the unmatched)."""
    if len(material_names) > 255:
        raise ConfigError(f"{len(material_names)} materials do not fit AirSim's segmentation ids 1..255")
    return {m: i + 1 for i, m in enumerate(material_names)}


def match_objects(names: Iterable[str], rules: MaterialRules) -> tuple[dict[str, list[str]], list[str]]:
    """``names`` split by the rules: matched names by material, and the names no rule matches."""
    objects: dict[str, list[str]] = {}
    unmatched: list[str] = []
    for name in names:
        material = rules.material_of(name)
        if material is None:
            unmatched.append(name)
        else:
            objects.setdefault(material, []).append(name)
    return objects, unmatched


def match_scene(client: SegmentationClient, rules: MaterialRules) -> MaterialAssignment:
    """What the rules make of the scene's objects (``simListSceneObjects``), no ids set: a source that
    names the hit actors itself (Cosys-AirSim's ``groundtruth``) is read through the rules directly."""
    objects, unmatched = match_objects([str(n) for n in client.sim_list_scene_objects(".*")], rules)
    return MaterialAssignment(objects, {}, unmatched, rules.default)


def assign_segmentation(
    client: SegmentationClient,
    rules: MaterialRules,
    material_names: Sequence[str],
    names: Sequence[str] | None = None,
) -> MaterialAssignment:
    """List the scene's objects, match them to materials and set their segmentation ids on the server:
    every object to 0 first (one regex call: a stock level starts with ids hashed from the names, which
    would collide with the materials'), then each matched object to its material's id, one call each
    (a level's own regex dialect never decides what matched). ``names``: the objects to match (default:
    ``simListSceneObjects``; Cosys-AirSim's segmentation knows its meshes by other names)."""
    names = [str(n) for n in (client.sim_list_scene_objects(".*") if names is None else names)]
    objects, unmatched = match_objects(names, rules)
    ids = material_ids(material_names)
    client.sim_set_segmentation_object_id(".*", UNMATCHED_ID, True)
    refused: list[str] = []
    for material, members in objects.items():
        for name in members:
            if not client.sim_set_segmentation_object_id(name, ids[material], False):
                refused.append(name)
    used = {m: ids[m] for m in objects}
    return MaterialAssignment(objects, used, unmatched, rules.default, refused)
