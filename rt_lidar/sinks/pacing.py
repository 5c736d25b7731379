"""Pacing datagrams to the sensor's own schedule: a dedicated sender thread behind a bounded queue.

Wall mode: the first datagram anchors sim time to ``perf_counter_ns() + latency``; every later one is
due at ``anchor + (send_ns - first_send_ns)``, an absolute deadline, so no error accumulates. The thread
sleeps to just before a deadline and spins the rest. A datagram found more than ``late_ns`` past its
deadline is dropped and counted, and so is a whole batch when the queue is full (the producer, the
simulation, never waits). Sim (lockstep) mode: a datagram is due once the sim clock, advanced by the
producer, has passed its send time; the producer waits for room instead of dropping.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Pacer", "PacingStats"]

SendFn = Callable[[str, bytes], None]


@dataclass
class PacingStats:
    """What the sender did: counts and the lateness of each sent datagram (ns after its deadline)."""

    sent: int = 0
    dropped_late: int = 0
    dropped_full: int = 0
    lateness_ns: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        """Counts and lateness percentiles in microseconds."""
        lat = np.asarray(self.lateness_ns, np.float64) / 1000.0
        pct = np.percentile(lat, [50, 99, 100]) if lat.size else np.zeros(3)
        return {
            "sent": self.sent,
            "dropped_late": self.dropped_late,
            "dropped_full": self.dropped_full,
            "lateness_p50_us": float(pct[0]),
            "lateness_p99_us": float(pct[1]),
            "lateness_max_us": float(pct[2]),
        }


class Pacer:
    """Sends ``(port, payloads, send_ns)`` batches through ``send`` on their schedule."""

    def __init__(
        self,
        send: SendFn,
        clock: str = "wall",
        latency_ns: int = 50_000_000,
        late_ns: int = 20_000_000,
        spin_ns: int = 200_000,
        max_batches: int = 16,
        switch_interval_s: float | None = 0.0005,
    ) -> None:
        if clock not in ("wall", "sim"):
            raise ValueError(f"pacing clock '{clock}': expected wall or sim")
        self.send, self.clock = send, clock
        self.latency_ns, self.late_ns, self.spin_ns = latency_ns, late_ns, spin_ns
        self.stats = PacingStats()
        self._queue: queue.Queue[list[tuple[str, bytes, int]] | None] = queue.Queue(max_batches)
        self._anchor: tuple[int, int] | None = None  # (wall ns, sim ns)
        self._sim_now = -(2**62)
        self._cond = threading.Condition()
        self._switch = switch_interval_s
        self._old_switch = sys.getswitchinterval()
        self._thread = threading.Thread(target=self._run, name="rt-lidar-pacer", daemon=True)

    def start(self) -> None:
        """Start the sender thread (and shorten the GIL switch interval, so it wakes on time)."""
        if self._switch is not None and self.clock == "wall":
            sys.setswitchinterval(min(self._old_switch, self._switch))
        self._thread.start()

    def put(self, port: str, payloads: np.ndarray, send_ns: np.ndarray) -> bool:
        """Queue one batch; False (and counted) when dropped because the queue is full."""
        return self.put_many([(port, payloads, send_ns)])

    def put_many(self, batches: list[tuple[str, np.ndarray, np.ndarray]]) -> bool:
        """Queue batches of several ports as one item, merged into send-time order."""
        rows = [
            (int(t), port, row.tobytes())
            for port, payloads, send_ns in batches
            for row, t in zip(payloads, np.asarray(send_ns, np.int64).tolist(), strict=True)
        ]
        if not rows:
            return True
        rows.sort(key=lambda r: r[0])
        item = [(port, data, t) for t, port, data in rows]
        if self.clock == "sim":
            self._queue.put(item)
            return True
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.stats.dropped_full += len(item)
            return False
        return True

    def advance(self, sim_ns: int) -> None:
        """Sim mode: the simulation has reached ``sim_ns``; datagrams due by then may go."""
        with self._cond:
            self._sim_now = max(self._sim_now, int(sim_ns))
            self._cond.notify_all()

    def close(self, drain: bool = True) -> PacingStats:
        """Stop the thread after the queued batches (``drain``) or at once; returns the stats."""
        if not drain:
            while True:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break
        self.advance(2**62)
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._switch is not None and self.clock == "wall":
            sys.setswitchinterval(self._old_switch)
        return self.stats

    # -- the sender thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self.clock == "sim":
                self._send_sim(item)
            else:
                self._send_wall(item)

    def _send_sim(self, item: list[tuple[str, bytes, int]]) -> None:
        for port, data, due in item:
            with self._cond:
                while self._sim_now < due:
                    self._cond.wait()
            self.send(port, data)
            self.stats.sent += 1

    def _send_wall(self, item: list[tuple[str, bytes, int]]) -> None:
        if self._anchor is None:
            self._anchor = (time.perf_counter_ns() + self.latency_ns, item[0][2])
        wall0, sim0 = self._anchor
        now_fn, stats = time.perf_counter_ns, self.stats
        for port, data, due_sim in item:
            due = wall0 + (due_sim - sim0)
            now = now_fn()
            if now > due + self.late_ns:
                stats.dropped_late += 1
                continue
            if due - now > self.spin_ns:
                time.sleep((due - now - self.spin_ns) / 1e9)
            while (now := now_fn()) < due:
                pass
            self.send(port, data)
            stats.lateness_ns.append(now - due)
            stats.sent += 1
