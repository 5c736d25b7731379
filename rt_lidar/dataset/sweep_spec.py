"""The sweep file (TOML): which scenes, ego trajectories, sensors, weathers and seeds to generate.

::

    [sweep]
    name = "small"
    frames = 3                 # scans per run
    sim_hz = 20.0              # simulation frame rate
    seeds = [0, 1]             # physics seeds; every run is repeated for each
    sinks = ["pcd", "las"]     # optional: extra recordings of each run in sequences/NN/recordings/
                               # (pcd, kitti, las, rosbag2; options as on --sink: "rosbag2:storage=sqlite3")

    [camera]                   # optional: image_2/ PNGs and a P2 that matches them
    enabled = true
    width = 320
    height = 180
    fov_deg = 90.0
    mount = { xyz = [0.2, 0.0, 1.7], rpy_deg = [0, 0, 0] }

    [[scenes]]                 # procedural street: kind = "street", seed or seeds, length_m, ego_speed
    name = "street"
    kind = "street"
    seeds = [1, 2]
    [[scenes]]                 # a user mesh (path relative to this file), one class for all of it
    name = "yard"
    kind = "mesh"
    path = "yard.glb"
    class = "building"

    [[trajectories]]           # ego motion; default: each scene's own ("scene")
    name = "slow"
    kind = "constant_velocity" # or "static", "waypoints" (times, positions), "scene"
    start = [0.0, -1.75, 0.0]
    yaw_deg = 0.0
    speed_mps = 5.0

    [[sensors]]
    preset = "VLP-16"
    mount = { xyz = [0, 0, 1.8], rpy_deg = [0, 0, 0] }

    [weather]                  # a grid: every combination of the listed values
    rain_mm_h = [0.0, 20.0]
    fog_visibility_m = ["none", 150.0]
    snow_mm_h = [0.0]
    road_wetness = [0.0]       # 0..1: wet road and tyre spray (rt_lidar.physics.wet_road / spray)

    [[labels]]                 # extra class rules, tried before the defaults (rt_lidar.dataset.labels)
    object = "crate_*"
    material = "*"
    class = "other-object"

Every error names the file, the field and what is allowed (:class:`SweepError`).
"""

from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rt_lidar.config import DEFAULT_SEED, DEFAULT_SIM_HZ
from rt_lidar.dataset.errors import SweepError
from rt_lidar.dataset.labels import SEMANTIC_KITTI_CLASSES, LabelRule
from rt_lidar.errors import ConfigError
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.schema import check_value
from rt_lidar.sensor.presets import list_presets, load_preset

__all__ = [
    "CameraSettings",
    "MountSpec",
    "SceneSpec",
    "SensorSpec",
    "SweepSpec",
    "TrajectorySpec",
    "load_sweep",
    "parse_sweep",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*$")
SCENE_KINDS = ("street", "mesh")
TRAJECTORY_KINDS = ("scene", "static", "constant_velocity", "waypoints")
Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class MountSpec:
    """A pose on the ego vehicle: translation (m) and roll, pitch, yaw (degrees)."""

    xyz: Vec3 = (0.0, 0.0, 1.8)
    rpy_deg: Vec3 = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class SceneSpec:
    """One scene: a procedural street of a seed, or a user mesh (absolute path)."""

    name: str
    kind: str = "street"
    seed: int = 0
    length_m: float = 200.0
    ego_speed: float = 10.0
    path: str = ""
    label: str = "other-object"
    material: str = "concrete"
    y_up: bool = False


@dataclass(frozen=True)
class TrajectorySpec:
    """The ego's motion; ``kind = "scene"`` keeps the scene's own."""

    name: str = "scene"
    kind: str = "scene"
    start: Vec3 = (0.0, 0.0, 0.0)
    yaw_deg: float = 0.0
    speed_mps: float = 0.0
    yaw_rate_deg_s: float = 0.0
    times: tuple[float, ...] = ()
    positions: tuple[Vec3, ...] = ()


@dataclass(frozen=True)
class SensorSpec:
    """A lidar preset (name or TOML path) at a mount on the ego."""

    name: str
    preset: str
    mount: MountSpec = field(default_factory=MountSpec)


@dataclass(frozen=True)
class CameraSettings:
    """The camera whose images go to ``image_2/`` (and whose projection is ``P2``)."""

    enabled: bool = False
    width: int = 640
    height: int = 360
    fov_deg: float = 90.0
    mount: MountSpec = field(default_factory=lambda: MountSpec((0.2, 0.0, 1.7)))


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: runs are every scene x trajectory x sensor x weather x seed."""

    source: str
    name: str
    frames: int
    sim_hz: float
    seeds: tuple[int, ...]
    scenes: tuple[SceneSpec, ...]
    trajectories: tuple[TrajectorySpec, ...]
    sensors: tuple[SensorSpec, ...]
    weathers: tuple[WeatherConfig, ...]
    camera: CameraSettings
    labels: tuple[LabelRule, ...] = ()
    sinks: tuple[str, ...] = ()
    """Extra recordings of every run (``kind[:options]``), written into the run's sequence folder."""


RECORDING_SINKS = ("pcd", "kitti", "las", "rosbag2")
"""Sinks a sweep may ask for (file recordings: deterministic, so runs stay byte-identical)."""


class _Table:
    """One TOML table being read: typed getters that raise SweepError naming file and field."""

    def __init__(self, source: str, where: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise SweepError(source, where, f"must be a table, got {type(data).__name__}")
        self.source, self.where, self.data = source, where, data
        self.used: set[str] = set()

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, problem: str) -> SweepError:
        return SweepError(self.source, self.path(key), problem)

    def raw(self, key: str, default: Any = None) -> Any:
        self.used.add(key)
        return self.data.get(key, default)

    def check(self, key: str, value: Any, tp: Any, **meta: Any) -> Any:
        """``value`` checked by the one schema (:func:`rt_lidar.schema.check_value`): type, finiteness,
        range (``lo``, ``hi``) and ``choices``, reported as a SweepError naming file and field."""
        return check_value(value, tp, meta, self.source, self.path(key), SweepError)

    def text(self, key: str, default: str | None = None, choices: tuple[str, ...] = ()) -> str:
        v = self.raw(key, default)
        if v is None:
            raise self.fail(key, "is required" + (f"; allowed: {', '.join(choices)}" if choices else ""))
        return str(self.check(key, v, str, choices=choices or None))

    def name(self, key: str, default: str | None = None) -> str:
        v = self.text(key, default)
        if not _NAME.match(v):
            raise self.fail(key, f"must be letters, digits, '.' and '-' (no '_' or spaces), got {v!r}")
        return v

    def number(self, key: str, default: float | None, lo: float, hi: float) -> float:
        v = self.raw(key, default)
        if v is None:
            raise self.fail(key, f"is required: a number in [{lo:g}, {hi:g}]")
        return _number(self, key, v, lo, hi)

    def integer(self, key: str, default: int | None, lo: int, hi: int) -> int:
        return int(self.check(key, self.raw(key, default), int, lo=lo, hi=hi))

    def flag(self, key: str, default: bool) -> bool:
        return bool(self.check(key, self.raw(key, default), bool))

    def vec3(self, key: str, default: Vec3, limit: float = 1e5) -> Vec3:
        v = self.raw(key, list(default))
        if not isinstance(v, list) or len(v) != 3:
            raise self.fail(key, f"must be a list of 3 numbers, got {v!r}")
        x, y, z = (_number(self, key, e, -limit, limit) for e in v)
        return (x, y, z)

    def tables(self, key: str) -> list[_Table]:
        v = self.raw(key, [])
        if not isinstance(v, list):
            raise self.fail(key, "must be an array of tables ([[...]])")
        return [_Table(self.source, f"{self.path(key)}[{i}]", e) for i, e in enumerate(v)]

    def done(self) -> None:
        extra = sorted(set(self.data) - self.used)
        if extra:
            raise self.fail(extra[0], f"unknown key; allowed: {', '.join(sorted(self.used))}")


def _number(t: _Table, key: str, v: Any, lo: float, hi: float) -> float:
    return float(t.check(key, v, float, lo=lo, hi=hi))


def _listed(t: _Table, key: str, default: list[Any]) -> list[Any]:
    v = t.raw(key, default)
    out = v if isinstance(v, list) else [v]
    if not out:
        raise t.fail(key, "must list at least one value")
    return out


def _mount(t: _Table, key: str, default: MountSpec) -> MountSpec:
    if key not in t.data:
        t.used.add(key)
        return default
    m = _Table(t.source, t.path(key), t.raw(key))
    out = MountSpec(m.vec3("xyz", default.xyz, 100.0), m.vec3("rpy_deg", default.rpy_deg, 360.0))
    m.done()
    return out


def _scenes(top: _Table, base: Path) -> list[SceneSpec]:
    out: list[SceneSpec] = []
    for t in top.tables("scenes"):
        name = t.name("name")
        kind = t.text("kind", "street", SCENE_KINDS)
        if kind == "street":
            seeds = _listed(t, "seeds", [t.integer("seed", 0, 0, 2**31 - 1)])
            length = t.number("length_m", 200.0, 20.0, 5000.0)
            speed = t.number("ego_speed", 10.0, 0.0, 80.0)
            for i, s in enumerate(seeds):
                t.check(f"seeds[{i}]", s, int, lo=0, hi=2**31 - 1)
                label = f"{name}.{s}" if len(seeds) > 1 or "seeds" in t.data else name
                out.append(SceneSpec(label, "street", s, length, speed))
        else:
            path = Path(t.text("path"))
            path = path if path.is_absolute() else base / path
            if not path.is_file():
                raise t.fail("path", f"no such mesh file: {path}")
            label = t.text("class", "other-object", tuple(SEMANTIC_KITTI_CLASSES))
            material = t.text("material", "concrete")
            out.append(
                SceneSpec(
                    name, "mesh", 0, 0.0, 0.0, str(path.resolve()), label, material, t.flag("y_up", False)
                )
            )
        t.done()
    if not out:
        raise top.fail("scenes", "needs at least one [[scenes]] table (kind = street or mesh)")
    return out


def _trajectories(top: _Table) -> list[TrajectorySpec]:
    out: list[TrajectorySpec] = []
    for t in top.tables("trajectories"):
        kind = t.text("kind", "scene", TRAJECTORY_KINDS)
        name = t.name("name", kind)
        if kind == "scene":
            spec = TrajectorySpec(name, kind)
        elif kind == "static" or kind == "constant_velocity":
            moving = kind == "constant_velocity"
            spec = TrajectorySpec(
                name,
                kind,
                t.vec3("start", (0.0, 0.0, 0.0)),
                t.number("yaw_deg", 0.0, -360.0, 360.0),
                t.number("speed_mps", 10.0, -80.0, 80.0) if moving else 0.0,
                t.number("yaw_rate_deg_s", 0.0, -180.0, 180.0) if moving else 0.0,
            )
        else:
            times = [_number(t, "times", v, 0.0, 1e6) for v in _listed(t, "times", [])]
            pos = t.raw("positions", [])
            if not isinstance(pos, list) or len(pos) != len(times) or len(times) < 2:
                raise t.fail("positions", f"must list one [x, y, z] per entry of times (>= 2), got {pos!r}")
            if any(b <= a for a, b in itertools.pairwise(times)):
                raise t.fail("times", f"must increase strictly, got {times}")
            rows = [_Table(t.source, t.path("positions"), {"p": p}).vec3("p", (0, 0, 0)) for p in pos]
            spec = TrajectorySpec(name, kind, times=tuple(times), positions=tuple(rows))
        t.done()
        out.append(spec)
    return out or [TrajectorySpec()]


def _sensors(top: _Table) -> list[SensorSpec]:
    out: list[SensorSpec] = []
    for t in top.tables("sensors"):
        preset = t.text("preset")
        try:
            loaded = load_preset(preset)
        except (ConfigError, FileNotFoundError, OSError) as exc:
            raise t.fail("preset", f"{exc} (packaged presets: {', '.join(list_presets())})") from None
        name = t.name("name", re.sub(r"[^A-Za-z0-9.-]", "-", loaded.name.lower()))
        out.append(SensorSpec(name, preset, _mount(t, "mount", MountSpec())))
        t.done()
    if not out:
        raise top.fail("sensors", "needs at least one [[sensors]] table with a preset")
    return out


def _weathers(top: _Table) -> list[WeatherConfig]:
    if "weather" not in top.data:
        top.used.add("weather")
        return [WeatherConfig()]
    t = _Table(top.source, "weather", top.raw("weather"))
    rain = _listed(t, "rain_mm_h", [0.0])
    fog = [None if v == "none" else v for v in _listed(t, "fog_visibility_m", ["none"])]
    snow = _listed(t, "snow_mm_h", [0.0])
    wet = _listed(t, "road_wetness", [0.0])
    t.done()
    out: list[WeatherConfig] = []
    for r, f, s, w in itertools.product(rain, fog, snow, wet):
        try:
            out.append(WeatherConfig(rain_mm_h=r, fog_visibility_m=f, snow_mm_h=s, road_wetness=w))
        except ConfigError as exc:
            raise t.fail("*", f'{exc} (fog_visibility_m may also be "none")') from None
    return out


def _camera(top: _Table) -> CameraSettings:
    if "camera" not in top.data:
        top.used.add("camera")
        return CameraSettings()
    t = _Table(top.source, "camera", top.raw("camera"))
    d = CameraSettings()
    cam = CameraSettings(
        t.flag("enabled", True),
        t.integer("width", d.width, 8, 4096),
        t.integer("height", d.height, 8, 4096),
        t.number("fov_deg", d.fov_deg, 10.0, 170.0),
        _mount(t, "mount", d.mount),
    )
    t.done()
    return cam


def _labels(top: _Table) -> list[LabelRule]:
    out = []
    for t in top.tables("labels"):
        out.append(
            LabelRule(
                t.text("object", "*"),
                t.text("material", "*"),
                t.text("class", None, tuple(SEMANTIC_KITTI_CLASSES)),
            )
        )
        t.done()
    return out


def parse_sweep(data: dict[str, Any], source: str = "<sweep>", base: Path | None = None) -> SweepSpec:
    """Validate a parsed sweep; relative mesh paths are taken from ``base`` (default: the cwd)."""
    top = _Table(source, "", data)
    head = _Table(source, "sweep", top.raw("sweep", {}))
    seeds = _listed(head, "seeds", [DEFAULT_SEED])
    for i, s in enumerate(seeds):
        head.check(f"seeds[{i}]", s, int, lo=0, hi=2**31 - 1)
    name = head.name("name", "sweep")
    frames = head.integer("frames", 10, 1, 100_000)
    sim_hz = head.number("sim_hz", DEFAULT_SIM_HZ, 1.0, 1000.0)
    sinks = [str(s) for s in head.raw("sinks", [])] if isinstance(head.raw("sinks", []), list) else None
    if sinks is None:
        raise head.fail("sinks", 'must be a list such as ["pcd", "rosbag2:storage=sqlite3"]')
    for i, s in enumerate(sinks):
        kind = s.partition(":")[0]
        if kind not in RECORDING_SINKS:
            raise head.fail(
                f"sinks[{i}]", f"'{kind}' is not a recording sink; allowed: {', '.join(RECORDING_SINKS)}"
            )
    head.done()
    spec = SweepSpec(
        source=source,
        name=name,
        frames=frames,
        sim_hz=sim_hz,
        seeds=tuple(seeds),
        scenes=tuple(_scenes(top, base or Path.cwd())),
        trajectories=tuple(_trajectories(top)),
        sensors=tuple(_sensors(top)),
        weathers=tuple(_weathers(top)),
        camera=_camera(top),
        labels=tuple(_labels(top)),
        sinks=tuple(sinks),
    )
    top.done()
    named = {
        "scenes": [s.name for s in spec.scenes],
        "trajectories": [t.name for t in spec.trajectories],
        "sensors": [s.name for s in spec.sensors],
    }
    for key, names in named.items():
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SweepError(source, key, f"names must be unique; repeated: {', '.join(dup)}")
    return spec


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and validate a sweep TOML file."""
    p = Path(path)
    if not p.is_file():
        raise SweepError(str(p), "-", "no such sweep file")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(str(p), "-", f"not valid TOML: {exc}") from None
    return parse_sweep(data, str(p), p.resolve().parent)
