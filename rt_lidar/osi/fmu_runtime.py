"""What the OSMP FMU's C library calls (``osmp_fmu.c``): one :class:`FmuModel` per FMU instance.

``resources/rt_lidar_fmu.json`` (written by :func:`rt_lidar.osi.fmu.build_fmu`) names the preset (a
shipped name, or ``preset.toml`` beside it), the physics settings, the seed, the sensor's mount and the
step; :meth:`FmuModel.step` takes a serialized ``SensorView`` and returns a serialized ``SensorData``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.osi.frames import interface_version, set_mounting, set_timestamp
from rt_lidar.osi.model import OsiLidarModel
from rt_lidar.osi.reflections import fill_fov
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.sensor.beam import BeamConfig, subray_directions
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between, scan_period_ns

__all__ = ["CONFIG_FILE", "FmuModel", "instantiate", "model_from_settings"]

CONFIG_FILE = "rt_lidar_fmu.json"


def model_from_settings(settings: dict[str, Any], resources: Path | None = None) -> OsiLidarModel:
    """The sensor model a settings dict (``rt_lidar_fmu.json``) describes."""
    preset_ref = settings["preset"]
    if resources is not None and str(preset_ref).endswith(".toml"):
        preset_ref = str(resources / preset_ref)
    preset = load_preset(preset_ref)
    beam = BeamConfig(**settings["beam"]) if settings.get("beam") else None
    weather = WeatherConfig(**settings["weather"]) if settings.get("weather") else None
    config = PhysicsConfig(weather=weather, beam=beam)
    return OsiLidarModel(preset, config, seed=int(settings.get("seed", 0)))


class FmuModel:
    """One FMU instance: the model, its OSMP sensor view configuration and its steps."""

    def __init__(self, resources: str | Path, name: str = "rt-lidar") -> None:
        self.resources = Path(resources)
        path = self.resources / CONFIG_FILE
        try:
            self.settings = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: cannot read the FMU's settings ({exc})") from None
        self.name = name
        self.model = model_from_settings(self.settings, self.resources)
        self.mount = tuple(float(v) for v in self.settings.get("mount", (0, 0, 0, 1, 0, 0, 0)))
        self.step_s = float(self.settings.get("step_s", 0.05))
        self.config: Any = None

    def set_seed(self, seed: int) -> None:
        """The random seed (the FMU's ``seed`` parameter, set before initialization ends)."""
        if seed:
            self.model.seed = int(seed)

    def reset(self) -> None:
        """Back to frame 0."""
        self.model.reset()

    def config_request(self) -> bytes:
        """``OSMPSensorViewInConfigRequest``: an ``osi3.SensorViewConfiguration`` asking for one lidar
        view whose rays are the preset's firing schedule over one scan (directions in the sensor
        frame, timings in us from the scan start), at the FMU's step."""
        from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

        if self.config is not None:
            return bytes(self.config.SerializeToString())
        preset = self.model.preset
        cfg = SensorViewConfiguration()
        interface_version(cfg)
        cfg.sensor_id.value = 0
        set_mounting(cfg.mounting_position, self.mount)
        fill_fov(cfg, preset)
        cfg.range = float(preset.range.max_m)
        set_timestamp(cfg.update_cycle_time, round(self.step_s * 1e9))
        set_timestamp(cfg.simulation_start_time, 0)
        lidar = cfg.lidar_sensor_view_configuration.add()
        lidar.sensor_id.value = 0
        set_mounting(lidar.mounting_position, self.mount)
        fill_fov(lidar, preset)
        period = scan_period_ns(preset)
        firings = firings_between(preset, 0, period)
        n_sub = self.model.physics.sub_rays
        d = firings.directions()
        if n_sub > 1:
            d = subray_directions(d, self.model.physics.pattern)
        t = np.repeat(firings.t_ns, n_sub)
        lidar.number_of_rays_vertical = preset.n_rings
        lidar.number_of_rays_horizontal = max(1, len(firings) // max(1, preset.n_rings))
        lidar.max_number_of_interactions = 1
        lidar.emitter_frequency = 299_792_458.0 / (preset.optics.wavelength_nm * 1e-9)
        lidar.num_of_pixels = int(d.shape[0])
        for x, y, z in np.asarray(d, np.float64).tolist():
            lidar.directions.add(x=x, y=y, z=z)
        lidar.timings.extend(np.round(t / 1000.0).astype(np.int64).tolist())
        return bytes(cfg.SerializeToString())

    def set_config(self, data: bytes) -> None:
        """``OSMPSensorViewInConfig``: the configuration the environment will send (kept, and checked to
        have a lidar view)."""
        from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

        cfg = SensorViewConfiguration.FromString(data)
        if not cfg.lidar_sensor_view_configuration:
            warnings.warn(
                "OSMPSensorViewInConfig has no lidar_sensor_view_configuration: the model needs "
                "LidarSensorView reflections",
                stacklevel=2,
            )
        self.config = cfg

    def step(self, sensor_view: bytes, t: float = 0.0, h: float = 0.0) -> bytes:
        """One co-simulation step: a serialized ``SensorView`` in (empty: none this step), a serialized
        ``SensorData`` out."""
        if not sensor_view:
            from osi3.osi_sensordata_pb2 import SensorData

            out = SensorData()
            interface_version(out)
            set_timestamp(out.timestamp, round(t * 1e9))
            return bytes(out.SerializeToString())
        if h > 0:
            self.model.step_ns = round(h * 1e9)
        return self.model.step_bytes(sensor_view)


def instantiate(resources: str, name: str) -> FmuModel:
    """The C library's ``fmi2Instantiate``: a model from the FMU's resources folder."""
    return FmuModel(resources, name)
