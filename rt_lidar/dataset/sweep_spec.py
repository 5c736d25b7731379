"""The sweep file (TOML): which scenes, ego trajectories, sensors, weathers and seeds to generate.

::

    [sweep]
    name = "small"
    frames = 3                 # scans per run
    sim_hz = 20.0              # simulation frame rate
    seeds = [0, 1]             # physics seeds; every run is repeated for each
    sinks = ["pcd", "las"]     # optional: extra recordings of each run in sequences/NN/recordings/
                               # (pcd, kitti, las, rosbag2; options as on --sink: "rosbag2:storage=sqlite3")
    faults = "faults.toml"     # optional: injected sensor faults of every run (docs/faults.md)

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
    [[sensors]]                # or a whole rig (path relative to this file): every run of this entry
    rig = "rigs/roof-and-corners.toml"   # drives every sensor of the rig in one frame loop and writes
                               # each sensor's sequence into sequences/NN/<sensor>/ (rt_lidar.rig)

    [weather]                  # a grid: every combination of the listed values
    rain_mm_h = [0.0, 20.0]
    fog_visibility_m = ["none", 150.0]
    snow_mm_h = [0.0]
    road_wetness = [0.0]       # 0..1: wet road and tyre spray (rt_lidar.physics.wet_road / spray)

    [[labels]]                 # extra class rules, tried before the defaults (rt_lidar.dataset.labels)
    object = "crate_*"
    material = "*"
    class = "other-object"

Every error names the file, the field and what is allowed (:class:`SweepError`): the file's tables are
read by the one schema (:mod:`rt_lidar.schema`), a scene or trajectory table by the class of its
``kind``.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rt_lidar.config import DEFAULT_SEED, DEFAULT_SIM_HZ
from rt_lidar.dataset.errors import SweepError
from rt_lidar.dataset.labels import SEMANTIC_KITTI_CLASSES, LabelRule
from rt_lidar.errors import ConfigError, FieldError
from rt_lidar.physics.weather import WEATHER_LIMITS, WeatherConfig
from rt_lidar.rig.model import load_rig
from rt_lidar.schema import Where, build, spec
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

    xyz: tuple[float, float, float] = spec((0.0, 0.0, 1.8), -100.0, 100.0, "m")
    rpy_deg: tuple[float, float, float] = spec((0.0, 0.0, 0.0), -360.0, 360.0, "deg")


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
    """A lidar preset (name or TOML path) at a mount on the ego, or a rig file (``rig``: an absolute
    path; ``preset`` is then empty and the mounts are the rig's)."""

    name: str
    preset: str
    mount: MountSpec = field(default_factory=MountSpec)
    rig: str = ""


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
    faults: tuple[Any, ...] = ()
    """Injected faults of every run (``[sweep] faults``, :mod:`rt_lidar.faults`)."""


RECORDING_SINKS = ("pcd", "kitti", "las", "rosbag2")
"""Sinks a sweep may ask for (file recordings: deterministic, so runs stay byte-identical)."""


SEED_MAX = 2**31 - 1


def _name_problem(v: str) -> str | None:
    ok = _NAME.match(v)
    return None if ok else f"must be letters, digits, '.' and '-' (no '_' or spaces), got {v!r}"


def _sink_problem(s: str) -> str | None:
    kind = s.partition(":")[0]
    if kind in RECORDING_SINKS:
        return None
    return f"'{kind}' is not a recording sink; allowed: {', '.join(RECORDING_SINKS)}"


def _preset_problem(name: str) -> str | None:
    try:
        load_preset(name)
    except (ConfigError, FileNotFoundError, OSError) as exc:
        return f"{exc} (packaged presets: {', '.join(list_presets())})"
    return None


# The sweep file's tables, as the schema (rt_lidar.schema) reads them; parse_sweep turns them into the
# specs above. A table whose fields depend on its `kind` is a union of one class per kind.


@dataclass(frozen=True, kw_only=True)
class _Head:
    """``[sweep]``."""

    name: str = spec("sweep", check=_name_problem)
    frames: int = spec(10, 1, 100_000)
    sim_hz: float = spec(DEFAULT_SIM_HZ, 1.0, 1000.0, "Hz")
    seeds: tuple[int, ...] = spec((DEFAULT_SEED,), 0, SEED_MAX, wrap=True, min_items=1)
    sinks: tuple[str, ...] = spec((), check=_sink_problem)
    faults: str | None = None
    """A faults file (relative to the sweep file) whose faults act in every run (docs/faults.md)."""


@dataclass(frozen=True, kw_only=True)
class _Street:
    """``[[scenes]] kind = "street"``: a procedural street of one seed, or of several (``seeds``)."""

    name: str = spec(check=_name_problem)
    kind: str = "street"
    seed: int = spec(0, 0, SEED_MAX)
    seeds: tuple[int, ...] | None = spec(None, 0, SEED_MAX, wrap=True, min_items=1)
    length_m: float = spec(200.0, 20.0, 5000.0, "m")
    ego_speed: float = spec(10.0, 0.0, 80.0, "m/s")


@dataclass(frozen=True, kw_only=True)
class _Mesh:
    """``[[scenes]] kind = "mesh"``: a user mesh (relative to the sweep file), one class for all of it."""

    name: str = spec(check=_name_problem)
    kind: str = "mesh"
    path: str = spec()
    label: str = spec("other-object", choices=tuple(SEMANTIC_KITTI_CLASSES), key="class")
    material: str = "concrete"
    y_up: bool = False

    def validate(self, what: Where) -> None:
        """The mesh file must exist (relative paths are taken from ``what.context``, the file's folder)."""
        if not _mesh_path(self.path, what.context).is_file():
            raise what.fail("path", f"no such mesh file: {_mesh_path(self.path, what.context)}")


def _mesh_path(path: str, base: Path) -> Path:
    p = Path(path)
    return p if p.is_absolute() else base / p


def _yaw() -> Any:
    return spec(0.0, -360.0, 360.0, "deg")


@dataclass(frozen=True, kw_only=True)
class _SceneMotion:
    """``[[trajectories]] kind = "scene"``: the scene's own ego motion."""

    kind: str = "scene"
    name: str = spec("scene", check=_name_problem)


@dataclass(frozen=True, kw_only=True)
class _Static:
    """``kind = "static"``: parked at ``start``, heading ``yaw_deg``."""

    kind: str = "static"
    name: str = spec("static", check=_name_problem)
    start: tuple[float, float, float] = spec((0.0, 0.0, 0.0), -1e5, 1e5, "m")
    yaw_deg: float = _yaw()


@dataclass(frozen=True, kw_only=True)
class _ConstantVelocity:
    """``kind = "constant_velocity"``: from ``start`` at a speed and a yaw rate."""

    kind: str = "constant_velocity"
    name: str = spec("constant-velocity", check=_name_problem)
    start: tuple[float, float, float] = spec((0.0, 0.0, 0.0), -1e5, 1e5, "m")
    yaw_deg: float = _yaw()
    speed_mps: float = spec(10.0, -80.0, 80.0, "m/s")
    yaw_rate_deg_s: float = spec(0.0, -180.0, 180.0, "deg/s")


@dataclass(frozen=True, kw_only=True)
class _Waypoints:
    """``kind = "waypoints"``: one position for each of (strictly increasing) times."""

    kind: str = "waypoints"
    name: str = spec("waypoints", check=_name_problem)
    times: tuple[float, ...] = spec((), 0.0, 1e6, "s", wrap=True, min_items=2)
    positions: tuple[Vec3, ...] = spec((), -1e5, 1e5, "m", same_len_as="times")

    def validate(self, what: Where) -> None:
        """Times must increase strictly."""
        if any(b <= a for a, b in itertools.pairwise(self.times)):
            raise what.fail("times", f"must increase strictly, got {list(self.times)}")


def _rig_path(path: str, base: Path) -> Path:
    return _mesh_path(path, base)


@dataclass(frozen=True, kw_only=True)
class _Sensor:
    """``[[sensors]]``: a ``preset`` or a ``rig`` file; the name defaults to the preset's, lower case,
    or to the rig file's stem."""

    preset: str | None = spec(None, check=_preset_problem)
    rig: str | None = None
    name: str | None = spec(None, check=_name_problem)
    mount: MountSpec | None = None

    def validate(self, what: Where) -> None:
        """Exactly one of ``preset`` and ``rig``; a rig file must load (its own error is quoted: it
        names the rig file, the sensor and the field)."""
        if (self.preset is None) == (self.rig is None):
            raise what.fail_table("needs exactly one of 'preset' (a lidar) and 'rig' (a rig file)")
        if self.rig is None:
            return
        if self.mount is not None:
            raise what.fail("mount", "a rig's sensors take their mounts from the rig file; remove it")
        path = _rig_path(self.rig, what.context)
        if not path.is_file():
            raise what.fail("rig", f"no such rig file: {path}")
        try:
            load_rig(path)
        except FieldError as exc:
            raise what.fail("rig", str(exc)) from None


@dataclass(frozen=True, kw_only=True)
class _WeatherGrid:
    """``[weather]``: every combination of the listed values (a single value is a list of one)."""

    rain_mm_h: tuple[float, ...] = spec((0.0,), *WEATHER_LIMITS["rain_mm_h"], "mm/h", wrap=True, min_items=1)
    fog_visibility_m: tuple[float | Literal["none"], ...] = spec(
        ("none",), *WEATHER_LIMITS["fog_visibility_m"], "m", wrap=True, min_items=1
    )
    snow_mm_h: tuple[float, ...] = spec((0.0,), *WEATHER_LIMITS["snow_mm_h"], "mm/h", wrap=True, min_items=1)
    road_wetness: tuple[float, ...] = spec((0.0,), *WEATHER_LIMITS["road_wetness"], wrap=True, min_items=1)


@dataclass(frozen=True)
class _CameraMount(MountSpec):
    """The camera's mount: another default position."""

    xyz: tuple[float, float, float] = spec((0.2, 0.0, 1.7), -100.0, 100.0, "m")


_CAMERA = CameraSettings()


@dataclass(frozen=True, kw_only=True)
class _Camera:
    """``[camera]``: present means enabled unless it says otherwise."""

    enabled: bool = True
    width: int = spec(_CAMERA.width, 8, 4096)
    height: int = spec(_CAMERA.height, 8, 4096)
    fov_deg: float = spec(_CAMERA.fov_deg, 10.0, 170.0, "deg")
    mount: _CameraMount = field(default_factory=_CameraMount)


@dataclass(frozen=True, kw_only=True)
class _Label:
    """``[[labels]]``: an extra class rule."""

    object: str = "*"
    material: str = "*"
    label: str = spec(choices=tuple(SEMANTIC_KITTI_CLASSES), key="class")


Scene = _Street | _Mesh
Motion = _SceneMotion | _Static | _ConstantVelocity | _Waypoints


@dataclass(frozen=True, kw_only=True)
class _SweepFile:
    """The whole file."""

    sweep: _Head = field(default_factory=_Head)
    scenes: tuple[Scene, ...] = spec((), min_items=1, items="[[scenes]] table (kind = street or mesh)")
    trajectories: tuple[Motion, ...] = ()
    sensors: tuple[_Sensor, ...] = spec((), min_items=1, items="[[sensors]] table with a preset or a rig")
    weather: _WeatherGrid | None = None
    camera: _Camera | None = None
    labels: tuple[_Label, ...] = ()


def _scenes(tables: tuple[Scene, ...], base: Path) -> list[SceneSpec]:
    out: list[SceneSpec] = []
    for t in tables:
        if isinstance(t, _Street):
            for seed in t.seeds if t.seeds is not None else (t.seed,):
                label = f"{t.name}.{seed}" if t.seeds is not None else t.name
                out.append(SceneSpec(label, "street", seed, t.length_m, t.ego_speed))
        else:
            path = str(_mesh_path(t.path, base).resolve())
            out.append(SceneSpec(t.name, "mesh", 0, 0.0, 0.0, path, t.label, t.material, t.y_up))
    return out


def _trajectory(t: Motion) -> TrajectorySpec:
    if isinstance(t, _Static):
        return TrajectorySpec(t.name, t.kind, t.start, t.yaw_deg, 0.0, 0.0)
    if isinstance(t, _ConstantVelocity):
        return TrajectorySpec(t.name, t.kind, t.start, t.yaw_deg, t.speed_mps, t.yaw_rate_deg_s)
    if isinstance(t, _Waypoints):
        return TrajectorySpec(t.name, t.kind, times=t.times, positions=t.positions)
    return TrajectorySpec(t.name, t.kind)


def _sensor(t: _Sensor, base: Path) -> SensorSpec:
    if t.rig is not None:
        path = _rig_path(t.rig, base).resolve()
        return SensorSpec(t.name or re.sub(r"[^A-Za-z0-9.-]", "-", path.stem), "", MountSpec(), str(path))
    assert t.preset is not None  # validate: one of the two
    name = t.name or re.sub(r"[^A-Za-z0-9.-]", "-", load_preset(t.preset).name.lower())
    return SensorSpec(name, t.preset, t.mount or MountSpec())


def _weathers(grid: _WeatherGrid | None) -> list[WeatherConfig]:
    if grid is None:
        return [WeatherConfig()]
    return [
        WeatherConfig(rain_mm_h=r, fog_visibility_m=None if f == "none" else f, snow_mm_h=s, road_wetness=w)
        for r, f, s, w in itertools.product(
            grid.rain_mm_h, grid.fog_visibility_m, grid.snow_mm_h, grid.road_wetness
        )
    ]


def _camera(t: _Camera | None) -> CameraSettings:
    if t is None:
        return CameraSettings()
    mount = MountSpec(t.mount.xyz, t.mount.rpy_deg)
    return CameraSettings(t.enabled, t.width, t.height, t.fov_deg, mount)


def _faults(path: str | None, base: Path) -> tuple[Any, ...]:
    if path is None:
        return ()
    from rt_lidar.faults.spec import load_faults

    p = Path(path)
    return load_faults(p if p.is_absolute() else base / p)


def parse_sweep(data: dict[str, Any], source: str = "<sweep>", base: Path | None = None) -> SweepSpec:
    """Validate a parsed sweep; relative mesh paths are taken from ``base`` (default: the cwd)."""
    base = base or Path.cwd()
    f: _SweepFile = build(_SweepFile, data, source, "", SweepError, context=base)
    spec = SweepSpec(
        source=source,
        name=f.sweep.name,
        frames=f.sweep.frames,
        sim_hz=f.sweep.sim_hz,
        seeds=f.sweep.seeds,
        scenes=tuple(_scenes(f.scenes, base)),
        trajectories=tuple(_trajectory(t) for t in f.trajectories) or (TrajectorySpec(),),
        sensors=tuple(_sensor(t, base) for t in f.sensors),
        weathers=tuple(_weathers(f.weather)),
        camera=_camera(f.camera),
        labels=tuple(LabelRule(t.object, t.material, t.label) for t in f.labels),
        sinks=f.sweep.sinks,
        faults=_faults(f.sweep.faults, base),
    )
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
