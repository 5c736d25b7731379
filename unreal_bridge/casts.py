"""Lidar casts outside the server's call lock (issue 18): a backend's prepared cast and the cast queue.

A full-budget lidar call (500 k rays) casts for seconds; under the one call lock every other client
waited that long. A backend that offers ``prepare_lidar_data`` / ``prepare_lidar_hits`` /
``prepare_lidar_beam_hits`` (:class:`DeferredSimBackend`) is asked under the lock only for a
:class:`PreparedCast`: the call's interval and frozen copies of the state the cast reads (vehicle,
segment ids, weather). The server then casts and encodes outside the lock, and the answer is the one
the locked call would have given. :class:`CastQueue` keeps heavy casts (more than ``heavy_rays``) in
FIFO order, one at a time, and bounds how many light ones run beside it, so memory stays bounded.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Iterator
from typing import Protocol, TypeVar

import numpy as np

from .beam_call import SunRequest
from .wire import LidarFrame, LidarHits

__all__ = ["HEAVY_RAYS", "CastQueue", "DeferredSimBackend", "PreparedCast", "takes_omit"]

T_co = TypeVar("T_co", covariant=True)

HEAVY_RAYS = 100_000
"""Casts of more rays than this wait their turn in the FIFO queue, one at a time."""


class PreparedCast(Protocol[T_co]):
    """One lidar read whose interval and state were taken under the call lock; cast by :meth:`run`."""

    @property
    def rays(self) -> int:
        """Rays :meth:`run` will cast (firings x sub-rays, after the ray budget)."""
        ...

    def run(self) -> T_co:
        """Cast and build the answer (thread-safe against every other call of the backend)."""
        ...


class DeferredSimBackend(Protocol):
    """A backend whose lidar reads can be cast outside the call lock (each method is called under it)."""

    def prepare_lidar_data(self, lidar_name: str, vehicle_name: str) -> PreparedCast[LidarFrame]:
        """``lidar_data``, prepared."""
        ...

    def prepare_lidar_hits(self, lidar_name: str, vehicle_name: str) -> PreparedCast[LidarHits]:
        """``lidar_hits``, prepared. A backend may take an ``omit`` keyword too (:func:`takes_omit`):
        the core fields (``"point"``, ``"normal"``) the answer will leave out, which it then need not
        compute (they may read as zeros)."""
        ...

    def prepare_lidar_beam_hits(
        self,
        lidar_name: str,
        vehicle_name: str,
        offsets_rad: np.ndarray,
        weights: np.ndarray,
        sun: SunRequest | None = None,
    ) -> PreparedCast[LidarHits]:
        """``lidar_beam_hits``, prepared."""
        ...


def is_deferred(backend: object) -> bool:
    """Whether ``backend``'s class defines the three ``prepare_*`` methods (looked up on the class, so
    a wrapper that forwards unknown attributes to a deferred backend is not taken for one)."""
    kind = type(backend)
    return all(
        callable(getattr(kind, name, None))
        for name in ("prepare_lidar_data", "prepare_lidar_hits", "prepare_lidar_beam_hits")
    )


def takes_omit(backend: object) -> bool:
    """Whether ``backend``'s ``prepare_lidar_hits`` takes the ``omit`` keyword (looked up on the class,
    like :func:`is_deferred`)."""
    method = getattr(type(backend), "prepare_lidar_hits", None)
    if not callable(method):
        return False
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return "omit" in params and params["omit"].kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


class CastQueue:
    """Turns for casts: more than ``heavy_rays`` rays wait in FIFO order and run one at a time; lighter
    ones run at once, at most ``max_light`` together. :attr:`stats` counts the casts and the heavy ones
    that had to wait."""

    def __init__(self, heavy_rays: int = HEAVY_RAYS, max_light: int = 4) -> None:
        self.heavy_rays = int(heavy_rays)
        self._cond = threading.Condition()
        self._next_ticket = 0  # the ticket the next heavy cast draws
        self._serving = 0  # the ticket whose turn it is
        self._light = threading.BoundedSemaphore(max_light)
        self.stats = {"heavy": 0, "heavy_waited": 0, "light": 0}

    @contextlib.contextmanager
    def turn(self, rays: int) -> Iterator[None]:
        """Hold a turn for a cast of ``rays`` rays while the block runs."""
        if rays <= self.heavy_rays:
            with self._light:
                self.stats["light"] += 1
                yield
            return
        with self._cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            self.stats["heavy"] += 1
            if ticket != self._serving:
                self.stats["heavy_waited"] += 1
            while ticket != self._serving:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._serving += 1
                self._cond.notify_all()
