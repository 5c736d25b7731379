"""The run configuration: one typed description of a run, with every default in one place.

``rt-lidar demo`` and ``rt-lidar run`` build a :class:`RunConfig` from their options, ``serve`` from its
scene, preset and seed, and ``rt-lidar generate`` one for each run of a sweep
(:func:`rt_lidar.dataset.runs.run_config`: the scene's set-up in :class:`SceneSetup`). A run writes
the *resolved* configuration, what really ran (a beam or sunlight a stock server refused is recorded
as refused, the preset's beam is spelled out), once beside its outputs as ``config.json``;
``--config RUN/config.json`` reads it back and re-runs the same scans byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rt_lidar.errors import ConfigError
from rt_lidar.faults.spec import Fault, faults_from_table
from rt_lidar.physics.device import KERNEL_DEVICES
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.device_world import FRAME_DEVICES, frame_device_unavailable_reason, kernels_device_for
from rt_lidar.schema import build, check_fields, spec, to_plain
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import SensorPreset, preset_to_dict
from rt_lidar.sinks.base import STAMP_CLOCKS

__all__ = [
    "CASTERS",
    "CONFIG_FILE",
    "DEFAULT_CASTER",
    "DEFAULT_PRESET",
    "DEFAULT_SCENE",
    "DEFAULT_SEED",
    "DEFAULT_SIM_HZ",
    "OUT_DIRS",
    "RUN_CONFIG_LABEL",
    "BridgeConfig",
    "EgoConfig",
    "MountConfig",
    "RunConfig",
    "SceneSetup",
    "SunConfig",
    "load_run_config",
    "plain",
    "write_run_config",
    "write_summary",
]

CONFIG_FILE = "config.json"
"""The resolved configuration of a run, beside its outputs."""

DEFAULT_PRESET = "HDL-64E"
DEFAULT_SCENE = "street"
DEFAULT_SEED = 0
DEFAULT_SIM_HZ = 20.0
DEFAULT_CASTER = "embree"
CASTERS = ("embree", "embree-fast", "numpy")
"""The embedded world's ray casters (``unreal_bridge.world.RAY_CASTERS``): ``embree`` (robust, what every
scan is made with unless a run asks otherwise), ``embree-fast`` (Embree's non-robust mode: cheaper, but
15-18 % of the hit distances differ in their last bits and a few rays per million slip through a shared
edge), ``numpy`` (a slow reference for small meshes)."""

RUN_CONFIG_LABEL = "run configuration"
"""What an error of a :class:`RunConfig` built in code (from the command line) names as its source."""

OUT_DIRS: dict[str, str] = {"demo": "out/demo", "run": "out/run"}
"""Each command's default output folder."""


@dataclass(frozen=True)
class SunConfig:
    """Sunlight as a scenario input: illuminance and (optionally) direction towards the sun."""

    lux: float = spec(0.0, 0.0, 200_000.0, "lx")
    direction: tuple[float, float, float] | None = None
    """World-frame direction towards the sun (x fwd, y left, z up); None = the scene's."""

    def __post_init__(self) -> None:
        check_fields(self, "sun")


EGO_KINDS = ("static", "constant_velocity", "waypoints")


@dataclass(frozen=True)
class MountConfig:
    """A sensor's pose on the ego: translation (m) and roll, pitch, yaw (degrees)."""

    xyz: tuple[float, float, float] = spec((0.0, 0.0, 1.8), -100.0, 100.0, "m")
    rpy_deg: tuple[float, float, float] = spec((0.0, 0.0, 0.0), -360.0, 360.0, "deg")

    def __post_init__(self) -> None:
        check_fields(self, "mount")


@dataclass(frozen=True)
class EgoConfig:
    """The ego's motion in place of the scene's own: parked at ``start`` (``static``), from ``start``
    at a speed and a yaw rate (``constant_velocity``), or through ``positions`` at ``times``
    (``waypoints``)."""

    kind: str = spec("static", choices=EGO_KINDS)
    start: tuple[float, float, float] = spec((0.0, 0.0, 0.0), -1e5, 1e5, "m")
    yaw_deg: float = spec(0.0, -360.0, 360.0, "deg")
    speed_mps: float = spec(0.0, -80.0, 80.0, "m/s")
    yaw_rate_deg_s: float = spec(0.0, -180.0, 180.0, "deg/s")
    times: tuple[float, ...] = ()
    positions: tuple[tuple[float, float, float], ...] = ()

    def __post_init__(self) -> None:
        check_fields(self, "ego")


@dataclass(frozen=True)
class SceneSetup:
    """How the embedded scene is built where a run sets more than its name and the run's seed (a
    dataset run of ``rt-lidar generate``); every None keeps the named scene's own
    (:func:`rt_lidar.pipeline.scene_setup.setup_scene`)."""

    seed: int | None = spec(None, 0, 2**63 - 1)
    """The scene's seed; None = the run's ``seed``."""
    length_m: float | None = spec(None, 20.0, 5000.0, "m")
    """``street``: its length."""
    ego_speed: float | None = spec(None, 0.0, 80.0, "m/s")
    """``street``: the ego's speed along it."""
    mesh_name: str | None = None
    """A mesh file scene (``scene`` its path) loaded as one named object of ``material``, segment 1."""
    material: str = "concrete"
    y_up: bool = False
    ego: EgoConfig | None = None
    mount: MountConfig | None = None
    """The sensor's mount on the ego; None = the scene's."""

    def __post_init__(self) -> None:
        check_fields(self, "scene_setup")


@dataclass(frozen=True)
class BridgeConfig:
    """How ``rt-lidar run`` reaches its AirSim server (the demo starts its own, in lockstep)."""

    airsim: str = "127.0.0.1:41451"
    """HOST:PORT of the AirSim RPC server."""
    lockstep: bool = False
    """Pause the sim and advance it frame by frame."""
    ask_ahead: int = spec(1, 1, 8)
    """Lockstep on a server that answers in order (``rtLidarServerInfo``): frames asked for ahead of
    the one being worked on. Each delays a driver's controls by a frame; 2 lets rt-lidar's own server
    cast two frames at once (docs/extension-call.md)."""
    lidar_name: str = ""
    vehicle_name: str = ""
    material_map: str | None = None
    """TOML ``[segments] ID = material`` for stock AirSim's segmentation ids."""
    material_rules: str | None = None
    """TOML ``[[rules]] pattern = "REGEX" material = "NAME"``: actor names -> materials, tried before the
    shipped rules (``rt_lidar/bridge/material_rules.toml``) when a server without the extension is read
    and no ``material_map`` is given (docs/simulators.md)."""
    flavor: str = spec("auto", choices=("auto", "airsim", "cosys", "cosys-gpu"))
    """How a server without the extension is read (``rt_lidar.bridge.source.FLAVORS``)."""
    use_extension: bool | None = None
    """None: use ``rtLidarGetHits`` when the server has it; False: stock ``getLidarData``."""
    reconnect: bool = False
    realtime: float = spec(0.0, 0.0, 100.0)
    """Lockstep: hold sim time to the wall clock at this many times real time (1: real time; 0: off,
    as fast as the run goes). The sim never runs ahead; ``summary.json``'s ``realtime`` says by how
    much it fell behind (:mod:`rt_lidar.bridge.pacing`)."""
    reconnect_timeout_s: float = spec(30.0, 0.0, 86_400.0, "s")
    timeout_s: float = spec(30.0, 0.1, 3_600.0, "s")

    def __post_init__(self) -> None:
        check_fields(self, "bridge")


@dataclass(frozen=True)
class RunConfig:
    """One run of ``demo`` or ``run``: the sensor, the scene, the scenario and where the scans go."""

    command: str = spec("demo", choices=("demo", "run", "serve"))
    """``demo``: the embedded world (bridged through its own server, or ``in_process``); ``run``: the
    server ``bridge`` names; ``serve``: the embedded world's server alone (only its scene, preset and
    seed are used, :meth:`rt_lidar.server.serve.ServeOptions.of_run`). A run of ``rt-lidar generate``
    is recorded as an in-process ``demo`` (its ``config.json`` re-runs it)."""
    preset: str = DEFAULT_PRESET
    """A preset name (``rt-lidar presets list``) or a TOML file."""
    scene: str = DEFAULT_SCENE
    """The embedded scene (demo)."""
    caster: str = spec(DEFAULT_CASTER, choices=CASTERS)
    """The embedded world's ray caster (demo, in-process or its server): see :data:`CASTERS`."""
    rig: str | None = None
    """A rig file (``demo --rig``, in-process; a rig run of ``rt-lidar generate``): every lidar of it
    instead of ``preset``."""
    crosstalk: bool = False
    """With ``rig``: mutual interference between its sensors (:mod:`rt_lidar.rig.crosstalk`)."""
    scene_setup: SceneSetup | None = None
    """More of the scene than its name (street length, ego motion, sensor mount): a dataset run's
    (``generate``); in-process only. None = the named scene as it comes with ``seed``."""
    seed: int = spec(DEFAULT_SEED, 0, 2**63 - 1)
    """Seed of the scene and of every random draw."""
    sim_hz: float = spec(DEFAULT_SIM_HZ, 0.1, 10_000.0, "Hz")
    frames: int = spec(50, 1, 10**9)
    """Scans to write."""
    out: str = OUT_DIRS["demo"]
    sinks: tuple[str, ...] = ()
    """Extra ``KIND:TARGET[,key=value]`` outputs besides the scans' PCD + KITTI files."""
    write_scans: bool = True
    """Write every scan to ``out/scans`` as PCD + KITTI (``--no-scans``: only the sinks, e.g. a live
    drive that streams to the viewer without filling the disk)."""
    progress: bool = True
    in_process: bool = False
    """Demo: cast into the world directly, without the bridge."""
    shared_memory: bool = False
    """Over the bridge, offer the server shared memory for the per-ray fields (TCP when refused)."""
    stamp: str = spec("sim", choices=STAMP_CLOCKS)
    """The clock of every sink's packet and message stamps: ``sim`` or ``wall`` (``--stamp``)."""
    weather: WeatherConfig | None = None
    """Rain, fog, snow; None = clear air, or over the bridge the server's weather."""
    beam: BeamConfig | None = None
    """Sub-rays, return mode, echo pulse width; None = the preset's (resolved: what ran)."""
    sun: SunConfig = field(default_factory=SunConfig)
    kernels_device: str = spec("cpu", choices=KERNEL_DEVICES)
    """Where the weather and echo-waveform kernels run (``--kernels-device``): ``cpu`` or ``cuda``."""
    device: str = spec("cpu", choices=FRAME_DEVICES)
    """Where the whole frame runs (``--device``, in-process): ``cpu`` (Embree), ``cuda`` (the scene's BVH
    cast on a GPU, the weather and waveform kernels there too) or ``cuda-source-on-cpu`` (that kernel's
    source built for the CPU): :data:`rt_lidar.pipeline.device_world.FRAME_DEVICES`, docs/gpu.md."""
    rinet: str | None = None
    """An ONNX RINet model: learned raydrop and intensity for the points the camera sees."""
    bridge: BridgeConfig = field(default_factory=BridgeConfig)
    """The server of ``run`` (ignored by ``demo``)."""
    faults: tuple[Fault, ...] = ()
    """Injected sensor faults (``--faults FILE.toml``, :mod:`rt_lidar.faults`, docs/faults.md),
    recorded whole so ``config.json`` re-runs them."""

    def __post_init__(self) -> None:
        check_fields(self, RUN_CONFIG_LABEL)  # e.g. --frames 0, as a ConfigError naming the field
        why = frame_device_unavailable_reason(self.device)
        if why:
            raise ConfigError(f"--device {self.device}: {why}")
        if any(isinstance(f, dict) for f in self.faults):  # tables given in code: the checked faults
            object.__setattr__(
                self, "faults", faults_from_table({"fault": list(self.faults)}, RUN_CONFIG_LABEL)
            )

    def physics(self) -> PhysicsConfig:
        """The physics stage's scenario settings."""
        return PhysicsConfig(
            weather=self.weather,
            beam=self.beam,
            sun_illuminance_lux=self.sun.lux,
            sun_direction=self.sun.direction,
            kernels_device=kernels_device_for(self.device, self.kernels_device),
        )

    def resolved(self, ran: PhysicsConfig) -> RunConfig:
        """This configuration as it ran, given the physics configuration the source granted
        (:func:`rt_lidar.pipeline.builder.negotiate`): the beam spelled out, refused sunlight off."""
        sun = self.sun if ran.sun_illuminance_lux > 0 else SunConfig()
        return dataclasses.replace(self, beam=ran.beam, sun=sun)


def write_run_config(out: str | Path, config: RunConfig, preset: SensorPreset) -> Path:
    """Write ``out/config.json``: the resolved configuration (``config``) and, for the record, the
    preset it loaded (``preset``, not read back)."""
    path = Path(out) / CONFIG_FILE
    record = {"config": to_plain(config), "preset": preset_to_dict(preset)}
    path.write_text(json.dumps(record, indent=2))
    return path


def load_run_config(path: str | Path) -> RunConfig:
    """The :class:`RunConfig` a run wrote (``RUN/config.json``, or the folder), checked field by field."""
    p = Path(path)
    if p.is_dir():
        p = p / CONFIG_FILE
    try:
        record = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{p}: cannot read the run configuration: {exc}") from exc
    if not isinstance(record, dict) or "config" not in record:
        raise ConfigError(f"{p}: not a run configuration (no 'config' table)")
    cfg: RunConfig = build(RunConfig, record["config"], str(p), "config")
    return cfg


def plain(config: RunConfig) -> dict[str, Any]:
    """The configuration as JSON-ready values (what a summary's ``scenario`` records)."""
    out: dict[str, Any] = to_plain(config)
    return out


def write_summary(out: str | Path, summary: dict[str, Any]) -> Path:
    """Write ``out/summary.json``: a run's figures (once, at its end)."""
    path = Path(out) / "summary.json"
    path.write_text(json.dumps(summary, indent=2, default=str))
    return path
