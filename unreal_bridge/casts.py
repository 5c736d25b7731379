"""Lidar casts outside the server's call lock (issue 18): a backend's prepared cast and the cast queue.

A full-budget lidar call (500 k rays) casts for seconds; under the one call lock every other client
waited that long. A backend that offers ``prepare_lidar_data`` / ``prepare_lidar_hits`` /
``prepare_lidar_beam_hits`` (:class:`DeferredSimBackend`) is asked under the lock only for a
:class:`PreparedCast`: the call's interval and frozen copies of the state the cast reads (vehicle,
segment ids, weather). The server then casts and encodes outside the lock, and the answer is the one
the locked call would have given. :class:`CastQueue` starts heavy casts (more than ``heavy_rays``) in
FIFO order, several at once only while their rays together stay within one call's ray budget, and
bounds how many light ones run beside them, so memory stays bounded.
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

__all__ = ["HEAVY_BUDGET_RAYS", "HEAVY_RAYS", "CastQueue", "DeferredSimBackend", "PreparedCast", "takes_omit"]

T_co = TypeVar("T_co", covariant=True)

HEAVY_RAYS = 100_000
"""Casts of more rays than this wait their turn in the FIFO queue (:class:`CastQueue`)."""
HEAVY_BUDGET_RAYS = 500_000
"""Rays the heavy casts running at once may hold together: the embedded sim's ray budget of one call
(``serve --max-rays``'s default), so heavy casts at once never hold more than one full-budget call
did when they ran one at a time. A 20 Hz VLS-128 frame (120,064 rays) is heavy: two or three frames
a client asked ahead are cast at once within it."""


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
    """Turns for casts. More than ``heavy_rays`` rays make a heavy cast: heavy casts start in FIFO
    order, each once the heavy casts running leave room for its rays in ``heavy_budget`` (one larger
    than the budget runs alone), so a large cast at the head is never overtaken by smaller ones behind
    it. Lighter casts run at once, at most ``max_light`` together. :attr:`stats` counts the casts, the
    heavy ones that had to wait, and the most heavy casts seen running at once."""

    def __init__(
        self, heavy_rays: int = HEAVY_RAYS, max_light: int = 4, heavy_budget: int = HEAVY_BUDGET_RAYS
    ) -> None:
        if heavy_budget < 1:
            raise ValueError(f"heavy_budget must be >= 1 ray, got {heavy_budget}")
        self.heavy_rays = int(heavy_rays)
        self.heavy_budget = int(heavy_budget)
        self._cond = threading.Condition()
        self._next_ticket = 0  # the ticket the next heavy cast draws
        self._serving = 0  # the ticket whose turn it is to start
        self._running_rays = 0  # rays of the heavy casts running now
        self._running = 0
        self._light = threading.BoundedSemaphore(max_light)
        self.stats = {"heavy": 0, "heavy_waited": 0, "light": 0, "heavy_at_once": 0}

    def _room(self, rays: int) -> bool:
        return self._running == 0 or self._running_rays + rays <= self.heavy_budget

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
            if ticket != self._serving or not self._room(rays):
                self.stats["heavy_waited"] += 1
            while ticket != self._serving or not self._room(rays):
                self._cond.wait()
            self._serving += 1  # the next ticket may start beside this one if the budget allows
            self._running += 1
            self._running_rays += rays
            self.stats["heavy_at_once"] = max(self.stats["heavy_at_once"], self._running)
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._running_rays -= rays
                self._cond.notify_all()
