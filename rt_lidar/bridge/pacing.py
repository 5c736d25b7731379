"""Live pacing of a lockstep run (``rt-lidar run --lockstep --realtime``): the sim is advanced to sim
time t only once the wall clock has reached t (times ``target``), so the sim never runs ahead of real
time and a car driven from the keys moves at its real speed. When the controller cannot keep up, the
sim falls behind the wall clock; the pacer measures by how much (:meth:`RealtimePacer.summary`, and a
short live figure for the progress line) and catches up as fast as the run allows, never passing it.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["RealtimePacer", "warn_if_behind"]


class RealtimePacer:
    """Holds a lockstep sim's clock to the wall clock.

    :meth:`hold` is called with the sim time a request is about to advance the sim to; it sleeps until
    the wall clock has reached it (``target`` x real time from the first call), then lets the request go.
    A request that comes later than its time is *behind* by the difference (wall seconds); one more
    than a sim frame behind (``1 / (sim_hz * target)`` of wall time) is a late frame.
    """

    def __init__(
        self,
        target: float = 1.0,
        sim_hz: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not target > 0:
            raise ValueError(f"RealtimePacer: target must be > 0, got {target}")
        self.target = float(target)
        self.frame_s = 1.0 / (float(sim_hz) * self.target)
        """The wall time of one sim frame at the target pace: a frame later than this is late."""
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()  # the pipeline's prefetch thread and the loop may both ask
        self._origin: tuple[float, int] | None = None  # (wall s, sim ns) at the first request
        self._sim_ns = 0  # sim time released so far, from the origin
        self._wall_s = 0.0  # wall time of the latest release, from the origin
        self._elapsed_before = (0.0, 0)  # (wall s, sim ns) of earlier connections (a --reconnect)
        self.frames = 0
        self.late_frames = 0
        self.behind_s_max = 0.0
        self.behind_s = 0.0
        """How far the latest request came after its time (0 when on time)."""
        self.waited_s = 0.0
        """Wall time spent holding the sim back (the run was faster than real time by this much)."""

    def due_s(self, sim_ns: int) -> float | None:
        """The wall clock time (of :attr:`clock`) when the sim may reach ``sim_ns``; None before the
        first request (which sets the origin)."""
        if self._origin is None:
            return None
        wall0, sim0 = self._origin
        return wall0 + (sim_ns - sim0) * 1e-9 / self.target

    def is_due(self, sim_ns: int) -> bool:
        """Whether the sim may be advanced to ``sim_ns`` now (without waiting)."""
        due = self.due_s(sim_ns)
        return due is None or self.clock() >= due

    def restart(self) -> None:
        """A new connection (``--reconnect``): the next request anchors the clocks anew; the figures so
        far are kept (the time between connections is not counted against the sim)."""
        with self._lock:
            if self._origin is not None:
                wall, sim = self._elapsed_before
                self._elapsed_before = (wall + self._wall_s, sim + self._sim_ns)
            self._origin = None
            self._sim_ns, self._wall_s = 0, 0.0

    def hold(self, from_ns: int, sim_ns: int) -> None:
        """Wait until the sim may advance from ``from_ns`` to ``sim_ns`` (never ahead of the wall
        clock), then count it. The first request anchors ``from_ns`` (where the sim stands) to now."""
        with self._lock:
            if self._origin is None:
                self._origin = (self.clock(), int(from_ns))
            due = self.due_s(sim_ns)
            assert due is not None
            now = self.clock()
            if now < due:
                self.sleep(due - now)
                self.waited_s += due - now
                now = max(self.clock(), due)
            behind = max(0.0, now - due)
            self.behind_s = behind
            self.behind_s_max = max(self.behind_s_max, behind)
            self.frames += 1
            if behind > self.frame_s:
                self.late_frames += 1
            wall0, sim0 = self._origin
            self._sim_ns = max(self._sim_ns, int(sim_ns) - sim0)
            self._wall_s = now - wall0

    @property
    def achieved(self) -> float:
        """Sim time over wall time since the start (x real time; at most ``target``, give or take a
        sleep's overshoot)."""
        wall = self._elapsed_before[0] + self._wall_s
        sim = (self._elapsed_before[1] + self._sim_ns) * 1e-9
        return sim / wall if wall > 0 else 0.0

    def live_text(self) -> str:
        """The progress line's figure: ``1.00x`` when keeping up, ``0.62x -1.3s`` when behind."""
        text = f"{self.achieved:.2f}x"
        return text if self.behind_s <= self.frame_s else f"{text} -{self.behind_s:.1f}s"

    def summary(self) -> dict[str, Any]:
        """``summary.json``'s ``realtime``: the target, what was achieved, how far behind it fell."""
        return {
            "target": self.target,
            "achieved": self.achieved,
            "frames": self.frames,
            "behind_s_max": self.behind_s_max,
            "behind_s_end": self.behind_s,
            "late_frames": self.late_frames,
            "late_after_s": self.frame_s,
            "held_s": self.waited_s,
        }


def warn_if_behind(pacer: RealtimePacer) -> None:
    """One warning line when a ``--realtime`` run could not keep to the wall clock: by how much."""
    if pacer.late_frames:
        warnings.warn(
            f"--realtime {pacer.target:g}: the run could not keep up: {pacer.achieved:.2f}x real time, "
            f"{pacer.late_frames} of {pacer.frames} frames more than a frame late, at most "
            f"{pacer.behind_s_max:.2f} s behind the wall clock (summary.json: realtime)",
            stacklevel=2,
        )
