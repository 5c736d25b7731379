"""The order of a rig's bag: fixed by the frame loop, whatever order the sensors' writer threads finish in.

Each sensor's scans reach the rig's bag from that sensor's own writer thread
(:class:`~rt_lidar.sinks.fanout.SinkFanout`), so the order in which they arrive depends on the threads'
timing. :class:`FrameOrder` is the small reorder buffer between them and the file: the frame loop says
which messages each sim frame hands out (:meth:`FrameOrder.expect`, then :meth:`FrameOrder.end_frame`),
the writer threads hand the messages in as they come (:meth:`FrameOrder.put`), and a frame's messages
come out once every one of them is in and every earlier frame is out, sorted by stamp and then by the
sensor's place in the rig. It holds at most the frames the writer threads are behind by (each thread's
queue is bounded), and no thread waits on it: the last of a frame's messages to arrive lets the frame out.
Not thread-safe by itself: :class:`~rt_lidar.rig.bag.RigBag` calls it under its lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["FrameOrder"]

T = TypeVar("T")


@dataclass
class _Frame(Generic[T]):
    ranks: dict[Hashable, tuple[int, ...]] = field(default_factory=dict)
    """Each expected message's key and its place in the frame (sorted ascending)."""
    got: dict[Hashable, T] = field(default_factory=dict)
    sealed: bool = False

    def ready(self) -> bool:
        return self.sealed and len(self.got) == len(self.ranks)

    def in_order(self) -> list[T]:
        keys = sorted(self.got, key=lambda k: self.ranks[k])
        return [self.got[k] for k in keys]


class FrameOrder(Generic[T]):
    """Messages handed in by several threads, handed out frame by frame in an order the frame loop fixes."""

    def __init__(self) -> None:
        self._frames: deque[_Frame[T]] = deque()
        self._waiting: dict[Hashable, _Frame[T]] = {}

    def expect(self, key: Hashable, rank: tuple[int, ...]) -> None:
        """The frame being handed out holds the message ``key``; ``rank`` orders it within the frame
        (the rig's bag: its stamp, then the sensor's place in the rig). Call it before the message can
        reach :meth:`put`."""
        if key in self._waiting:
            raise ValueError(f"rig bag: message {key!r} expected twice")
        if not self._frames or self._frames[-1].sealed:
            self._frames.append(_Frame())
        frame = self._frames[-1]
        frame.ranks[key] = rank
        self._waiting[key] = frame

    def end_frame(self) -> list[T]:
        """The frame being handed out is complete; returns the messages now due, in order (those whose
        writers were ahead of the frame loop)."""
        if self._frames and not self._frames[-1].sealed:
            self._frames[-1].sealed = True
        return self._due()

    def put(self, key: Hashable, item: T) -> list[T] | None:
        """Hand in message ``key``; returns the messages now due, in order (often none), or None when
        ``key`` was not expected (its writer then writes it at once, as it comes)."""
        frame = self._waiting.pop(key, None)
        if frame is None:
            return None
        frame.got[key] = item
        return self._due()

    def drain(self) -> tuple[list[T], int]:
        """At the end: every message handed in and not yet out, frame by frame in order, and how many
        expected messages never came (a writer that failed: its error says why)."""
        out: list[T] = []
        missing = 0
        while self._frames:
            frame = self._frames.popleft()
            out += frame.in_order()
            missing += len(frame.ranks) - len(frame.got)
        self._waiting.clear()
        return out, missing

    @property
    def held(self) -> int:
        """Messages handed in and waiting for their frame."""
        return sum(len(f.got) for f in self._frames)

    def _due(self) -> list[T]:
        out: list[T] = []
        while self._frames and self._frames[0].ready():
            out += self._frames.popleft().in_order()
        return out
