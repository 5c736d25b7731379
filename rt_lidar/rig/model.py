"""The rig file: several lidars on one vehicle, each with its preset, mount, phase and sinks.

```toml
[[sensor]]
name = "top"                                   # unique; the output folder, topic and TF frame
preset = "HDL-64E"                             # a shipped preset, or a .toml path (relative to this file)
mount = { xyz = [0.0, 0.0, 1.9], rpy_deg = [0.0, 0.0, 0.0] }   # vehicle frame (x fwd, y left, z up)
phase_deg = 0.0                                # rotating only: head azimuth at the top of each second
rotation_hz = 10.0                             # rotating only: overrides the preset's rate
sinks = ["velodyne-udp:127.0.0.1:2368"]        # extra --sink outputs of this sensor
```

``phase_deg`` is the phase lock of Velodyne and Ouster heads: every turn-per-second rate puts the
head at this azimuth (the sensor frame's math convention: 0 = forward, 90 = left) at every whole
second of sim time; it becomes the preset's ``scan.scan_start_azimuth_deg``. Every error names the
file, the sensor and the field.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rt_lidar.errors import FieldError, PresetError
from rt_lidar.rig.errors import RigError
from rt_lidar.schema import build, spec
from rt_lidar.sensor.presets import SensorPreset, load_preset, preset_from_dict, preset_to_dict
from rt_lidar.sensor.vendor import is_vendor_ref, split_ref
from rt_lidar.unreal_bridge.world import Pose

__all__ = ["Mount", "Rig", "RigSensor", "SensorEntry", "load_rig", "rig_from_dict"]

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
"""Sensor names: a folder name, a ROS frame id and a topic segment at once."""


@dataclass(frozen=True)
class Mount:
    """Where a sensor sits on the vehicle: translation (m) and roll, pitch, yaw (deg, Z-Y-X)."""

    xyz: tuple[float, float, float] = spec((0.0, 0.0, 0.0), -100.0, 100.0, "m")
    rpy_deg: tuple[float, float, float] = spec((0.0, 0.0, 0.0), -360.0, 360.0, "deg")

    def pose(self) -> Pose:
        """The mount as a vehicle <- sensor :class:`Pose`."""
        r, p, y = (math.radians(a) for a in self.rpy_deg)
        return Pose.from_xyz_rpy(*self.xyz, roll=r, pitch=p, yaw=y)


@dataclass(frozen=True)
class SensorEntry:
    """One ``[[sensor]]`` table as written."""

    name: str
    preset: str
    mount: Mount = field(default_factory=Mount)
    phase_deg: float | None = spec(None, 0.0, 360.0, "deg")
    rotation_hz: float | None = spec(None, 0.1, 100.0, "Hz")
    sinks: tuple[str, ...] = ()
    faults: str | None = None
    """A faults file (``[[fault]]`` tables, docs/faults.md; relative to the rig file) for this sensor."""


@dataclass(frozen=True)
class RigSensor:
    """A resolved sensor of a rig: its entry, its preset (phase and rate applied) and its mount pose."""

    entry: SensorEntry
    preset: SensorPreset
    mount: Pose
    faults: tuple[Any, ...] = ()
    """The faults of its ``faults`` file (:mod:`rt_lidar.faults`), checked against its preset."""

    @property
    def name(self) -> str:
        """The sensor's name."""
        return self.entry.name


@dataclass(frozen=True)
class Rig:
    """Every sensor of one vehicle, in file order."""

    source: str
    sensors: tuple[RigSensor, ...]

    @property
    def names(self) -> list[str]:
        """Sensor names, in file order."""
        return [s.name for s in self.sensors]

    def sensor(self, name: str) -> RigSensor:
        """The sensor called ``name``."""
        for s in self.sensors:
            if s.name == name:
                return s
        raise KeyError(f"rig {self.source}: no sensor named {name!r}; sensors: {', '.join(self.names)}")

    def to_plain(self) -> dict[str, Any]:
        """The rig as written plus each resolved preset (what a run writes beside its outputs)."""
        return {
            "source": self.source,
            "sensor": [
                {**dataclasses.asdict(s.entry), "resolved_preset": preset_to_dict(s.preset)}
                for s in self.sensors
            ],
        }


def _resolve_preset(entry: SensorEntry, base: Path | None, source: str) -> SensorPreset:
    ref = entry.preset
    file_part = split_ref(ref)[0]
    is_file = ref.endswith(".toml") or is_vendor_ref(ref)  # a vendor calibration file too
    if is_file and base is not None and not Path(file_part).is_absolute():
        ref = str(base / ref)
    try:
        preset = load_preset(ref)
    except PresetError as exc:
        raise RigError(source, "preset", str(exc), entry.name) from exc
    s = preset.scan
    if (entry.rotation_hz is not None or entry.phase_deg is not None) and s.pattern != "rotating":
        key = "rotation_hz" if entry.rotation_hz is not None else "phase_deg"
        raise RigError(
            source, key, f"applies to rotating sensors only; {preset.name} is '{s.pattern}'", entry.name
        )
    if entry.rotation_hz is not None and entry.rotation_hz != s.rotation_hz:
        d = preset_to_dict(preset)
        d["scan"]["rotation_hz"] = entry.rotation_hz
        try:
            preset = preset_from_dict(d, f"{source} sensor '{entry.name}'")
        except PresetError as exc:
            raise RigError(source, "rotation_hz", exc.problem, entry.name) from exc
    if entry.phase_deg is not None:
        if entry.phase_deg >= 360.0:
            raise RigError(
                source, "phase_deg", f"must be in [0, 360) deg, got {entry.phase_deg:g}", entry.name
            )
        hz = preset.scan.rotation_hz
        assert hz is not None
        if abs(hz - round(hz)) > 1e-9 or round(1e9 / hz) * round(hz) != 1_000_000_000:
            raise RigError(
                source,
                "phase_deg",
                f"phase lock needs a whole number of turns a second (and of ns a turn); "
                f"rotation is {hz:g} Hz",
                entry.name,
            )
        scan = dataclasses.replace(s, rotation_hz=hz, scan_start_azimuth_deg=float(entry.phase_deg))
        preset = dataclasses.replace(preset, scan=scan)
    return preset


def _sensor_faults(entry: SensorEntry, base: Path | None, preset: SensorPreset) -> tuple[Any, ...]:
    """A sensor's own faults file, read and checked against its preset (its faults target it alone)."""
    if entry.faults is None:
        return ()
    from rt_lidar.faults.spec import check_rings, load_faults

    path = Path(entry.faults)
    if not path.is_absolute() and base is not None:
        path = base / path
    faults = load_faults(path)
    check_rings(faults, preset.n_rings, preset.name, str(path))
    return tuple(dataclasses.replace(f, sensor=entry.name) for f in faults)


def rig_from_dict(table: Any, source: str = "<rig>", base: Path | None = None) -> Rig:
    """Validate a rig given as a TOML-shaped dict; ``base`` resolves relative preset paths."""
    if not isinstance(table, dict):
        raise RigError(source, "(top level)", "must be a table")
    unknown = sorted(set(table) - {"sensor"})
    if unknown:
        raise RigError(source, unknown[0], "unknown key; a rig file holds [[sensor]] tables")
    raw = table.get("sensor")
    if not isinstance(raw, list) or not raw:
        raise RigError(source, "sensor", "is required: one [[sensor]] table per lidar")
    sensors: list[RigSensor] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        name = item.get("name") if isinstance(item, dict) else None
        label = name if isinstance(name, str) else f"#{i + 1}"

        def err(src: str, where: str, problem: str, label: str = label) -> RigError:
            return RigError(src, where, problem, label)

        try:
            entry: SensorEntry = build(SensorEntry, item, source, "", err)
        except RigError:
            raise
        except FieldError as exc:  # pragma: no cover - build raises through ``err``
            raise RigError(source, exc.field, exc.problem, label) from exc
        if not NAME_RE.match(entry.name):
            raise RigError(
                source,
                "name",
                "must start with a letter and hold only letters, digits, _ and - "
                f"(it names a folder, a topic and a TF frame), got {entry.name!r}",
                label,
            )
        if entry.name in seen:
            raise RigError(
                source, "name", f"duplicate sensor name (also sensor #{seen[entry.name] + 1})", entry.name
            )
        seen[entry.name] = i
        for j, sink in enumerate(entry.sinks):
            if ":" not in sink:
                raise RigError(source, f"sinks[{j}]", f"expected KIND:TARGET, got {sink!r}", entry.name)
        preset = _resolve_preset(entry, base, source)
        sensors.append(RigSensor(entry, preset, entry.mount.pose(), _sensor_faults(entry, base, preset)))
    return Rig(source, tuple(sensors))


def load_rig(path: str | Path) -> Rig:
    """Read and validate a rig TOML file."""
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise RigError(source, "<file>", "no such rig file")
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RigError(source, "<file>", f"not valid TOML: {exc}") from exc
    return rig_from_dict(table, source, path.parent)
