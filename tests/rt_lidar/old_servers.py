"""The embedded sim as older servers present it, for the tests of what a client falls back to."""

from __future__ import annotations

from typing import Any


class WithoutBeamCall:
    """The embedded sim behind a server that has ``rtLidarGetHits`` but not ``rtLidarGetBeamHits`` (no
    ``lidar_beam_hits``)."""

    def __init__(self, sim: Any) -> None:
        self._sim = sim

    def __getattr__(self, name: str) -> Any:
        if name == "lidar_beam_hits":
            raise AttributeError(name)
        return getattr(self._sim, name)


class WithoutFullBeam:
    """The embedded sim behind a server that has ``rtLidarGetBeamHits`` but predates its ``full`` entry
    (no ``lidar_full_beam_hits``: it answers a full request with every pulse's bundle). Not deferred
    (its class has no ``prepare_*``), so the server calls ``lidar_beam_hits``."""

    def __init__(self, sim: Any) -> None:
        self._sim = sim

    def __getattr__(self, name: str) -> Any:
        if "full_beam" in name or name.startswith("prepare_"):
            raise AttributeError(name)
        return getattr(self._sim, name)
