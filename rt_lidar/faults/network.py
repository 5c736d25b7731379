"""Network faults between a sensor's packet generation and its transport: datagrams lost (at a rate,
in bursts), duplicated, reordered, delayed with jitter and truncated, as a switch or a bad cable does
to them; and a rebooting sensor's packets starting over. :class:`FaultyPacketizer` wraps a
:class:`~rt_lidar.sinks.pcap.Packetizer` (Velodyne and Ouster, UDP and pcap alike);
:class:`FaultyStream` wraps the ZeroMQ stream sink's messages the same way.

A datagram's arrival time is its send time plus its delays; datagrams leave the wrapper in arrival
order (a pcap records them as a capture on the receiving host would, a UDP sink sends them then).
Loss follows a two-state (Gilbert) model: a loss starts with probability ``rate / (burst (1 - rate))``
and lasts ``burst`` datagrams on average, so a share ``rate`` is lost.
"""

from __future__ import annotations

import dataclasses
import heapq
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from rt_lidar.faults.spec import Delay, Duplicate, Fault, Jitter, PacketLoss, Reorder, Truncate
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.pcap import PacketBatch, Packetizer

__all__ = ["FaultyPacketizer", "FaultyStream", "NetworkFaults", "network_packetizer"]

_STREAM = 0x4E37


class NetworkFaults:
    """The network faults of one sink (``kind``) and what they did (``counts``)."""

    def __init__(self, faults: tuple[tuple[int, Fault], ...], kind: str, seed: int, plan: Any = None) -> None:
        self.faults = tuple((i, f) for i, f in faults if getattr(f, "sink", None) in (None, kind))
        self.kind = kind
        self.seed = int(seed)
        self.plan = plan
        self._batch = 0
        self._lost_state: dict[int, bool] = {}
        self.spacing_ns = 1_000_000
        if plan is not None:
            for i, _f in self.faults:
                plan.records[i].sinks.add(kind)
        self.counts = {"sent": 0, "lost": 0, "duplicated": 0, "reordered": 0, "delayed": 0, "truncated": 0}

    def __bool__(self) -> bool:
        return bool(self.faults)

    def _rng(self, index: int) -> np.random.Generator:
        seq = np.random.SeedSequence([self.seed, _STREAM, index, zlib.crc32(self.kind.encode()), self._batch])
        return np.random.Generator(np.random.PCG64(seq))

    def _note(self, index: int, what: str, n: int) -> None:
        self.counts[what] += n
        if self.plan is not None and n:
            rec = self.plan.records[index]
            key = f"{self.kind}.{what}"
            rec.network[key] = rec.network.get(key, 0) + n

    def apply(self, send_ns: np.ndarray, payloads: list[bytes]) -> list[tuple[int, bytes]]:
        """``(arrival ns, payload)`` of the datagrams sent at ``send_ns`` after the faults (unsorted)."""
        n = len(payloads)
        self._batch += 1
        if n > 1 and self.kind != "zmq":
            self.spacing_ns = max(1, int(np.median(np.diff(send_ns))))
        arrive = np.asarray(send_ns, np.int64).copy()
        keep = np.ones(n, bool)
        dup = np.zeros(n, bool)
        dup_of: dict[int, np.ndarray] = {}
        data = list(payloads)
        t_s = arrive * 1e-9
        for index, f in self.faults:
            on = (t_s >= f.start_s) & (True if f.end_s is None else t_s < f.end_s)
            if not np.any(on):
                continue
            rng = self._rng(index)
            if isinstance(f, PacketLoss):
                lost = self._gilbert(index, f, rng, on)
                self._note(index, "lost", int(np.count_nonzero(lost & keep)))
                keep &= ~lost
            elif isinstance(f, Duplicate):
                d = on & (rng.random(n) < f.rate) & keep
                dup |= d
                dup_of[index] = d
            elif isinstance(f, Reorder):
                r = on & (rng.random(n) < f.rate) & keep
                arrive[r] += f.depth * self.spacing_ns + 1
                self._note(index, "reordered", int(r.sum()))
            elif isinstance(f, (Delay, Jitter)):
                fixed = f.delay_ms if isinstance(f, Delay) else 0.0
                late = np.round((fixed + rng.uniform(0.0, f.jitter_ms, n)) * 1e6).astype(np.int64)
                arrive[on] += late[on]
                self._note(index, "delayed", int(np.count_nonzero(on & keep & (late > 0))))
            elif isinstance(f, Truncate):
                cut = np.flatnonzero(on & (rng.random(n) < f.rate) & keep)
                for k in cut.tolist():
                    data[k] = data[k][: f.bytes]
                self._note(index, "truncated", int(cut.size))
        for index, d in dup_of.items():  # a duplicate of a datagram lost after it is not one
            self._note(index, "duplicated", int(np.count_nonzero(d & keep)))
        out = [(int(arrive[k]), data[k]) for k in np.flatnonzero(keep).tolist()]
        out += [(int(arrive[k]) + 1, data[k]) for k in np.flatnonzero(dup & keep).tolist()]
        self.counts["sent"] += len(out)
        return out

    def _gilbert(self, index: int, f: PacketLoss, rng: np.random.Generator, on: np.ndarray) -> np.ndarray:
        n = on.size
        lost = np.zeros(n, bool)
        if f.rate >= 1.0:
            lost[on] = True
            return lost
        p_exit = 1.0 / f.burst
        p_enter = min(1.0, f.rate * p_exit / (1.0 - f.rate))
        u = rng.random(n)
        state = self._lost_state.get(index, False)
        for k in range(n):
            if not on[k]:
                continue
            state = (u[k] >= p_exit) if state else (u[k] < p_enter)
            lost[k] = state
        self._lost_state[index] = state
        return lost


class FaultyPacketizer:
    """A packetizer whose datagrams pass the network faults, and which starts over as a rebooted
    sensor does when a scan's ``boot`` count changes (a fresh packetizer: no packet carried over;
    Ouster: a new ``init_id`` and frame ids from 0)."""

    def __init__(self, make: Callable[[SinkContext], Packetizer], context: SinkContext, net: NetworkFaults):
        self._make = make
        self._context = context
        self.inner = make(context)
        self.preset = self.inner.preset
        self.ports = self.inner.ports
        self.net = net
        self.boot = 0
        self._held: list[tuple[int, int, str, bytes]] = []
        self._seq = 0

    @property
    def epoch_ns(self) -> int:
        """The wrapped packetizer's epoch (the run's stamp clock sets it)."""
        return self.inner.epoch_ns

    @epoch_ns.setter
    def epoch_ns(self, value: int) -> None:
        self.inner.epoch_ns = value

    def _reboot(self, scan: Scan) -> None:
        epoch = self.inner.epoch_ns
        self.inner = self._make(self._context)
        self.inner.epoch_ns = epoch
        fmt = getattr(self.inner, "format", None)
        if fmt is not None and hasattr(fmt, "init_id"):  # Ouster: a new initialization id per boot
            new_id = (fmt.init_id + scan.boot * 0x10F1) % (1 << 24) or 1
            self.inner.format = dataclasses.replace(fmt, init_id=new_id)  # type: ignore[attr-defined]
            self.inner.frame_base = scan.index  # type: ignore[attr-defined]
            plan = self.net.plan
            if plan is not None:  # a client must fetch the metadata again: say which id it now has
                plan.note_boot(scan.boot, f"{self.net.kind}.init_id", new_id)
        self.boot = scan.boot

    def _pass(self, batches: list[PacketBatch], now_ns: int | None) -> list[PacketBatch]:
        for b in batches:
            rows = [bytes(r) for r in b.payloads]
            for arrival, data in self.net.apply(b.send_ns, rows):
                heapq.heappush(self._held, (arrival, self._seq, b.port, data))
                self._seq += 1
        runs: list[tuple[str, int, list[bytes], list[int]]] = []  # (port, length, payloads, arrivals)
        while self._held and (now_ns is None or self._held[0][0] <= now_ns):
            arrival, _, port, data = heapq.heappop(self._held)
            if runs and runs[-1][0] == port and runs[-1][1] == len(data):
                runs[-1][2].append(data)
                runs[-1][3].append(arrival)
            else:
                runs.append((port, len(data), [data], [arrival]))
        return [
            PacketBatch(
                port,
                np.frombuffer(b"".join(rows), np.uint8).reshape(len(rows), size).copy(),
                np.array(times, np.int64),
            )
            for port, size, rows, times in runs
        ]

    def packetize(self, scan: Scan) -> list[PacketBatch]:
        """The datagrams that arrive by the end of ``scan``'s packets, after the faults."""
        if scan.boot != self.boot:
            self._reboot(scan)
        batches = self.inner.packetize(scan)
        sent = [int(b.send_ns.max()) for b in batches if len(b)]
        return self._pass(batches, max(sent) if sent else None) if sent else []

    def finish(self) -> list[PacketBatch]:
        """Everything still held back."""
        return self._pass(self.inner.finish(), None)


def network_packetizer(
    make: Callable[[SinkContext], Packetizer], context: SinkContext, transport: str
) -> Packetizer:
    """The packetizer ``make`` builds, behind the run's network faults and reboots (``context.faults``,
    a :class:`~rt_lidar.faults.plan.FaultPlan`); the plain one where the run has no faults."""
    plan = context.faults
    if not plan:
        return make(context)
    inner = make(context)
    family = "ouster" if hasattr(inner, "format") else "velodyne"
    net = NetworkFaults(plan.network, f"{family}-{transport}", plan.seed, plan)
    wrapped = FaultyPacketizer(make, context, net)
    wrapped.inner = inner
    return wrapped


class FaultyStream:
    """A stream sink whose scan messages pass the network faults: lost, duplicated, held back
    ``depth`` messages (reorder), held until sim time passes their arrival (delay, jitter), their
    points cut to the whole points of the first ``bytes`` bytes (truncate)."""

    def __init__(self, sink: Any, net: NetworkFaults) -> None:
        self.sink = sink
        self.net = net
        self.wants_sectors = getattr(sink, "wants_sectors", False)
        self._held: list[tuple[int, int, Scan]] = []
        self._seq = 0

    def open(self, context: SinkContext) -> None:
        """Open the stream; a message's reorder depth counts scans."""
        from rt_lidar.sensor.scan_pattern import scan_period_ns

        self.net.spacing_ns = scan_period_ns(context.preset)
        self.sink.open(context)

    def write_sector(self, points: np.ndarray, t0_ns: int, t1_ns: int) -> None:
        self.sink.write_sector(points, t0_ns, t1_ns)

    def write(self, scan: Scan) -> None:
        """Pass ``scan`` through the faults; publish what has arrived by its start."""
        raw = scan.points.view(np.uint8)
        for arrival, data in self.net.apply(np.array([scan.start_ns]), [raw.tobytes()]):
            item = scan
            if len(data) != raw.size:  # truncated: whole points only, the header keeps its count
                whole = len(data) // scan.points.dtype.itemsize
                item = dataclasses.replace(scan, points=scan.points[:whole])
            late = arrival - scan.start_ns
            if late > 1:  # reordered / delayed: goes after the scans sent before it arrives
                heapq.heappush(self._held, (arrival, self._seq, item))
                self._seq += 1
            else:
                self.sink.write(item)
        while self._held and self._held[0][0] <= scan.start_ns:
            self.sink.write(heapq.heappop(self._held)[2])

    def close(self) -> None:
        while self._held:
            self.sink.write(heapq.heappop(self._held)[2])
        self.sink.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)
