"""The Python API: scans as NumPy arrays, from the embedded world or a running AirSim-compatible server,
and recordings read back.

>>> import rt_lidar
>>> for scan in rt_lidar.simulate("VLP-16", scans=2, seed=1):
...     print(scan.index, scan.points.size, scan.points.dtype.names[:4])

Every scan is a :class:`Scan`: ``points`` is a structured array of :data:`rt_lidar.POINT_DTYPE` (the
fields and units are in README.md and :mod:`rt_lidar.points`), ``start_ns`` the scan's start in sim
time (each point's ``t`` counts from it), ``fired`` / ``dropped`` the pulses sent and lost, and
``sensor_position`` / ``sensor_rotation`` the sensor's world pose at the start. The command line runs
through the same pipelines (``rt-lidar demo --in-process`` is :func:`simulate` with files written).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rt_lidar.config import DEFAULT_PRESET, DEFAULT_SCENE, DEFAULT_SIM_HZ, RunConfig
from rt_lidar.errors import ConfigError
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import SensorPreset, load_preset

if TYPE_CHECKING:
    from rt_lidar.pipeline.builder import BuiltPipeline

__all__ = ["Scan", "attach", "read", "simulate"]

WeatherLike = WeatherConfig | Mapping[str, float] | None
BeamLike = BeamConfig | Mapping[str, Any] | None
FaultsLike = str | Path | Sequence[Mapping[str, Any]]


def _weather(weather: WeatherLike) -> WeatherConfig | None:
    if weather is None or isinstance(weather, WeatherConfig):
        return weather
    known = {"rain_mm_h", "fog_visibility_m", "snow_mm_h", "road_wetness"}
    unknown = sorted(set(weather) - known)
    if unknown:
        raise ConfigError(
            f"weather: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    w = WeatherConfig(**{k: float(v) for k, v in weather.items()})
    return None if w.is_clear else w


def _beam(beam: BeamLike) -> BeamConfig | None:
    if beam is None or isinstance(beam, BeamConfig):
        return beam
    return BeamConfig(**dict(beam))


def _preset_name(preset: str | SensorPreset) -> str:
    return preset.name if isinstance(preset, SensorPreset) else str(preset)


def simulate(
    preset: str | SensorPreset = DEFAULT_PRESET,
    *,
    scene: str = DEFAULT_SCENE,
    scans: int = 10,
    seed: int = 0,
    sim_hz: float = DEFAULT_SIM_HZ,
    weather: WeatherLike = None,
    beam: BeamLike = None,
    faults: FaultsLike = (),
) -> Iterator[Scan]:
    """Yield ``scans`` scans of ``preset`` (a name, a preset TOML path or a :class:`SensorPreset`)
    driving through the embedded ``scene`` (``"street"``, another named scene, or a glTF/OBJ/PLY file).

    ``weather``: a :class:`WeatherConfig` or a mapping such as ``{"rain_mm_h": 10, "fog_visibility_m":
    200}``; ``beam``: a :class:`BeamConfig` or a mapping such as ``{"return_mode": "dual", "sub_rays":
    7}``; ``faults``: a faults TOML file or fault tables such as ``[{"kind": "dead_channel", "rings":
    [3]}]`` (docs/faults.md). The same arguments and seed give the same points, byte for byte. Values
    out of range raise :class:`rt_lidar.errors.ConfigError` naming the field."""
    from rt_lidar.faults.wiring import fault_plan, with_faults
    from rt_lidar.sinks.base import SinkContext

    config = RunConfig(
        command="demo",
        preset=_preset_name(preset),
        scene=scene,
        seed=seed,
        sim_hz=sim_hz,
        frames=scans,
        in_process=True,
        weather=_weather(weather),
        beam=_beam(beam),
        faults=_faults(faults),
    )
    sensor = preset if isinstance(preset, SensorPreset) else load_preset(config.preset)
    built = in_process_pipeline(config, sensor)
    plan = fault_plan(config.faults, sensor, config.seed)
    if plan is None:
        yield from _scans(built.pipeline, scans)
        return
    _, _, faulted = with_faults(plan, built.pipeline, [], SinkContext(preset=sensor), None)
    for scan in _scans(built.pipeline, scans):
        out = faulted(scan)
        if out is not None:  # None: a scan the sensor did not send (down in an injected reboot)
            yield out


def in_process_pipeline(config: RunConfig, sensor: SensorPreset) -> BuiltPipeline:
    """The pipeline of an in-process run of ``config`` (:func:`simulate`, ``rt-lidar demo --in-process``):
    its scene (with a dataset run's ``scene_setup``) cast directly, frames cast ahead."""
    from rt_lidar.pipeline.builder import build_pipeline, build_world
    from rt_lidar.pipeline.device_world import world_on_device
    from rt_lidar.pipeline.frame_loop import CAST_AHEAD

    world = build_world(config.scene, seed=config.seed, caster=config.caster, setup=config.scene_setup)
    world = world_on_device(world, config.device)  # --device: cast by the BVH kernel (docs/gpu.md)
    return build_pipeline(
        sensor, world, seed=config.seed, sim_hz=config.sim_hz, prefetch=CAST_AHEAD, physics=config.physics()
    )


def _faults(faults: FaultsLike) -> Any:
    from rt_lidar.faults.spec import load_faults

    if isinstance(faults, str | Path):
        return load_faults(faults)
    return tuple(faults)


def attach(
    address: str = "127.0.0.1:41451",
    preset: str | SensorPreset = DEFAULT_PRESET,
    *,
    scans: int = 10,
    lockstep: bool = True,
    seed: int = 0,
    sim_hz: float = DEFAULT_SIM_HZ,
    lidar: str = "",
    vehicle: str = "",
    material_map: str | Path | None = None,
    material_rules: str | Path | None = None,
    rules: bool = True,
    stock: bool = False,
    flavor: str = "auto",
    weather: WeatherLike = None,
    beam: BeamLike = None,
    faults: FaultsLike = (),
) -> Iterator[Scan]:
    """Yield ``scans`` scans of ``preset`` from a running AirSim, Cosys-AirSim or ``rt-lidar serve`` at
    ``address`` (``HOST:PORT``). ``lockstep`` pauses the simulator and advances it frame by frame (the
    scans do not depend on how fast this side is); ``lidar`` / ``vehicle`` name the server's sensor and
    vehicle (default: the first). On the stock path (a server without rt-lidar's extension, or
    ``stock=True``) materials come from ``material_map`` (segmentation id -> material), else from name
    rules (``material_rules``, a TOML file of yours, tried before the shipped ones; ``rules=False``:
    none, every surface concrete); ``flavor``: ``auto``, ``airsim``, ``cosys`` or ``cosys-gpu``
    (``docs/airsim.md``, ``docs/simulators.md``). A preset that differs from the server's lidar is
    refused naming both; ``preset="server"`` adopts the server's lidar."""
    from rt_lidar.bridge.material_rules import load_material_rules
    from rt_lidar.bridge.server_lidar import resolve_server_preset
    from rt_lidar.bridge.source import BridgeSource, bridge_pipeline, parse_address
    from rt_lidar.config import SunConfig
    from rt_lidar.sensor.materials import load_material_table
    from rt_lidar.session.live import load_material_map
    from rt_lidar.unreal_bridge import AirSimClient

    host, port = parse_address(address)
    materials = load_material_map(material_map) if material_map is not None else None
    names = load_material_table().names
    name_rules = load_material_rules(material_rules, names) if rules else None
    with AirSimClient(host, port, timeout=60.0) as client:
        client.confirm_connection()
        sensor = resolve_server_preset(client, preset, lidar)
        source = BridgeSource(
            client,
            sensor,
            lockstep=lockstep,
            sim_hz=sim_hz,
            lidar_name=lidar,
            vehicle_name=vehicle,
            material_map=materials,
            material_rules=name_rules,
            use_extension=False if stock else None,
            flavor=flavor,
        )
        pipe = bridge_pipeline(source, sim_hz, seed, _weather(weather), _beam(beam), SunConfig())
        yield from _scans(pipe, scans)


def _scans(pipeline: Any, count: int) -> Iterator[Scan]:
    if count < 1:
        raise ConfigError(f"scans: must be at least 1, got {count}")
    made = 0
    try:
        while made < count:
            for scan in pipeline.step():
                if made < count:
                    made += 1
                    yield scan
    finally:
        with contextlib.suppress(Exception):
            pipeline.close()


def read(path: str | Path) -> np.ndarray | Any:
    """Read back what rt-lidar writes: a ``.pcd`` or KITTI ``.bin`` scan, or a ``.las`` file, gives one
    point array (:data:`rt_lidar.POINT_DTYPE`; KITTI keeps only x, y, z and intensity, LAS what it
    holds); a folder of scans (``OUT/scans``) or a rosbag2 recording gives a
    :class:`~rt_lidar.sinks.recording.CloudRecording` (``len()``, ``points(i)``, ``stamps_ns``,
    iteration over point arrays). A packet capture (``.pcap``) is the sensor's own format: decode it
    with the vendor's decoder (velodyne-decoder, ouster-sdk), as docs/sinks.md shows."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: no such file or folder")
    if p.is_dir():
        from rt_lidar.sinks.recording import CloudRecording

        return _IterableRecording(CloudRecording(p))
    suffix = p.suffix.lower()
    if suffix == ".pcd":
        from rt_lidar.sinks.pcd import read_pcd_points

        return read_pcd_points(p)
    if suffix == ".bin":
        from rt_lidar.points import empty_points
        from rt_lidar.sinks.kitti import read_kitti_bin

        kitti = read_kitti_bin(p)
        pts = empty_points(kitti.shape[0])
        for i, name in enumerate(("x", "y", "z", "intensity")):
            pts[name] = kitti[:, i]
        return pts
    if suffix in (".las", ".laz"):
        from rt_lidar.sinks.las import read_las_points

        return read_las_points(p)
    if suffix in (".pcap", ".pcapng"):
        raise ConfigError(
            f"{p}: a packet capture holds the sensor's own packets: decode it with velodyne-decoder or "
            "ouster-sdk (docs/sinks.md), or replay it with 'rt-lidar replay'"
        )
    raise ConfigError(
        f"{p}: not a recording rt-lidar reads (.pcd, KITTI .bin, .las, a scans folder or a rosbag2)"
    )


class _IterableRecording:
    """A :class:`CloudRecording` that iterates over its scans' point arrays."""

    def __init__(self, recording: Any) -> None:
        self.recording = recording

    def __len__(self) -> int:
        return len(self.recording)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.recording, name)

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self.recording)):
            yield self.recording.points(i)
