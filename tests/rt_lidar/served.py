"""Lockstep frames of our server over loopback, for the tests of what a hits call may ask for."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from rt_lidar.sensor.presets import load_preset
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer, LidarHits
from rt_lidar.unreal_bridge.world import Scene, World, street_scene


@contextlib.contextmanager
def served(
    preset: str = "VLP-16", server_type: type[AirSimServer] = AirSimServer, scene: Scene | None = None
) -> Iterator[tuple[EmbeddedSim, AirSimServer]]:
    """Our server (or a ``server_type`` of it) on a free port, casting ``scene`` (the street when None)
    for a lidar of ``preset``, paused."""
    sim = EmbeddedSim(World(street_scene(0) if scene is None else scene), load_preset(preset), paused=True)
    server = server_type(sim, port=0).start()
    try:
        yield sim, server
    finally:
        server.close()


def served_frames(
    ask: Callable[[AirSimClient], None], preset: str = "VLP-16", shared_memory: bool = False, frames: int = 3
) -> list[LidarHits]:
    """``frames`` lockstep frames (20 Hz) of a fresh server, asked by a client that ``ask`` set up."""
    with (
        served(preset) as (_sim, server),
        AirSimClient(port=server.port, shared_memory=shared_memory) as client,
    ):
        ask(client)
        out = []
        for _ in range(frames):
            client.sim_continue_for_time(0.05)
            out.append(client.rt_lidar_get_hits())
        assert client.transport == ("shm" if shared_memory else "tcp"), client.shm_refused
        return out


def server_of_before(info: dict[str, Any]) -> type[AirSimServer]:
    """Our server as one of before an option was offered: its ``rtLidarServerInfo`` answers ``info``."""

    class _ServerOfBefore(AirSimServer):
        def _table(self) -> list[tuple[str, Any, int | tuple[int, ...]]]:
            return [
                (name, (lambda: dict(info)) if name == "rtLidarServerInfo" else func, arity)
                for name, func, arity in super()._table()
            ]

    return _ServerOfBefore
