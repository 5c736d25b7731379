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
