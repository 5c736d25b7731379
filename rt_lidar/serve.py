"""``rt-lidar serve``: the embedded world behind an AirSim-compatible RPC server on loopback."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rt_lidar.airsim_settings import preset_from_airsim_settings
from rt_lidar.build import build_world
from rt_lidar.embedded_sim import EmbeddedSim
from rt_lidar.errors import ConfigError
from rt_lidar.presets import SensorPreset, load_preset
from unreal_bridge import AirSimServer

__all__ = ["EmbeddedServer", "ServeOptions", "start_embedded_server"]


@dataclass(frozen=True)
class ServeOptions:
    """What ``rt-lidar serve`` runs."""

    host: str = "127.0.0.1"
    port: int = 41451
    scene: str = "street"
    preset: str | None = "HDL-64E"
    settings: str | None = None
    """An AirSim settings.json whose lidar block sets the sensor (overrides ``preset``)."""
    seed: int = 0
    paused: bool = False


@dataclass
class EmbeddedServer:
    """A running server with its simulation."""

    server: AirSimServer
    sim: EmbeddedSim

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self.server.port)

    def close(self) -> None:
        """Stop serving and disconnect every client."""
        self.server.close()


def _preset(opts: ServeOptions) -> SensorPreset:
    if opts.settings:
        path = Path(opts.settings)
        try:
            settings = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read AirSim settings: {exc}") from exc
        return preset_from_airsim_settings(settings)
    if not opts.preset:
        raise ConfigError("serve: give --preset NAME or --settings FILE")
    return load_preset(opts.preset)


def start_embedded_server(opts: ServeOptions) -> EmbeddedServer:
    """Build the world and start serving it in a background thread."""
    world = build_world(opts.scene, seed=opts.seed)
    sim = EmbeddedSim(world, _preset(opts), paused=opts.paused)
    server = AirSimServer(sim, host=opts.host, port=opts.port)
    server.start()
    return EmbeddedServer(server, sim)
