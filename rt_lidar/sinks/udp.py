"""Live UDP output of a sensor's datagrams, paced to its real schedule (``velodyne-udp``, ``ouster-udp``).

``write`` packetizes the scan in the caller's thread (a few ms) and hands the batches to a
:class:`~rt_lidar.sinks.pacing.Pacer`; it never waits in wall-clock mode. With ``SinkContext.lockstep``
the pacer follows sim time instead: the scan's end releases its datagrams. In wall mode the pacer runs
in a child process by default (``process=0``: a thread), since the simulation's NumPy and ray casting
hold the GIL for milliseconds and a sender thread then wakes late.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import socket
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext, SinkOptions
from rt_lidar.sinks.pacing import Pacer, PacingStats
from rt_lidar.sinks.pcap import Packetizer, stamp_clock

__all__ = ["UdpPacketSink", "parse_host_port"]

PACER_OPTIONS = frozenset({"latency_ms", "late_ms", "clock", "process"})


def parse_host_port(target: str, default_port: int) -> tuple[str, int]:
    """``"127.0.0.1:2368"`` / ``"127.0.0.1"`` / ``""`` -> ``(host, port)``."""
    host, sep, port = target.rpartition(":")
    if not sep:
        host, port = target, ""
    try:
        return host or "127.0.0.1", int(port) if port else default_port
    except ValueError:
        raise ConfigError(f"UDP target '{target}': expected HOST:PORT") from None


def _udp_sender(addr: dict[str, tuple[str, int]]) -> Callable[[str, bytes], None]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    if any(host.endswith(".255") for host, _ in addr.values()):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)

    def send(port: str, data: bytes) -> None:
        with contextlib.suppress(OSError):  # nobody listening (ICMP refused): a sensor does not care
            sock.sendto(data, addr[port])

    return send


def _sender_process(
    addr: dict[str, tuple[str, int]],
    pacer_kw: dict[str, int],
    inbox: mp.Queue,
    result: Connection,
    counts: Any,
) -> None:
    """Child process: a wall-clock :class:`Pacer` with no GIL shared with the simulation; ``counts``
    (shared) follows its sent and late-dropped datagrams, batch by batch, for the run's live figures."""
    pacer = Pacer(_udp_sender(addr), clock="wall", **pacer_kw)
    pacer.start()
    result.send("ready")
    while True:
        try:
            item = inbox.get(timeout=0.1)  # the counts follow the sending even while no batch comes
        except queue.Empty:
            item = []
        if item is None:
            break
        if item:
            pacer.put_many(item)
        counts[0], counts[1] = pacer.stats.sent, pacer.stats.dropped_late + pacer.stats.dropped_full
    result.send(pacer.close())


class _ProcessPacer:
    """The producer's side of a pacer running in a child process (same ``put``/``advance``/``close``)."""

    def __init__(self, addr: dict[str, tuple[str, int]], pacer_kw: dict[str, int]) -> None:
        ctx = mp.get_context("spawn")
        self._inbox: mp.Queue = ctx.Queue(16)
        self._result, child_end = ctx.Pipe(duplex=False)
        self._counts = ctx.Array("q", 2, lock=False)
        self._proc = ctx.Process(
            target=_sender_process, args=(addr, pacer_kw, self._inbox, child_end, self._counts), daemon=True
        )
        self.dropped_full = 0

    def live_counts(self) -> tuple[int, int]:
        """Datagrams sent and dropped so far (the child's figures, a batch behind)."""
        return int(self._counts[0]), int(self._counts[1]) + self.dropped_full

    def start(self) -> None:
        """Start the child and wait until it is ready (spawning imports NumPy: about a second)."""
        self._proc.start()
        if not self._result.poll(30.0) or self._result.recv() != "ready":
            raise RuntimeError("UDP sender process did not start")

    def put_many(self, batches: list[tuple[str, np.ndarray, np.ndarray]]) -> bool:
        try:
            self._inbox.put_nowait(batches)
        except queue.Full:
            self.dropped_full += sum(len(b[1]) for b in batches)
            return False
        return True

    def advance(self, sim_ns: int) -> None:
        pass

    def close(self) -> PacingStats:
        self._inbox.put(None)
        stats: PacingStats = self._result.recv()
        self._proc.join(timeout=10)
        stats.dropped_full += self.dropped_full
        return stats


class UdpPacketSink:
    """Sends a packetizer's datagrams to ``target`` (the data port; other ports from ``ports``)."""

    def __init__(
        self,
        target: str,
        make_packetizer: Callable[[SinkContext], Packetizer],
        options: dict[str, str],
        ports: dict[str, int] | None = None,
        kind: str = "udp",
    ) -> None:
        self.target = target
        self._make = make_packetizer
        self._ports_override = dict(ports or {})
        opts = SinkOptions(kind, options, PACER_OPTIONS)
        self.latency_ns = int(opts.number("latency_ms", 50.0, 0.0, 60_000.0) * 1e6)
        self.late_ns = int(opts.number("late_ms", 20.0, 0.0, 60_000.0) * 1e6)
        self.clock_option = opts.choice("clock", "", ("wall", "sim")) or None
        self.process = opts.flag("process", True)
        self.packetizer: Packetizer | None = None
        self.pacer: Pacer | _ProcessPacer | None = None
        self.stats: PacingStats | None = None
        self._addr: dict[str, tuple[str, int]] = {}
        self._context: SinkContext | None = None

    def open(self, context: SinkContext) -> None:
        """Create the packetizer, the socket and the sender thread."""
        from rt_lidar.faults.network import network_packetizer

        self._context = context
        self.packetizer = network_packetizer(self._make, context, "udp")
        ports = {**self.packetizer.ports, **self._ports_override}
        host, data_port = parse_host_port(self.target, ports["data"])
        ports["data"] = data_port
        self._addr = {name: (host, port) for name, port in ports.items()}
        clock = self.clock_option or ("sim" if context.lockstep else "wall")
        kw = {"latency_ns": self.latency_ns, "late_ns": self.late_ns}
        if clock == "wall" and self.process:
            self.pacer = _ProcessPacer(self._addr, kw)
        else:
            self.pacer = Pacer(_udp_sender(self._addr), clock=clock, **kw)
        self.pacer.start()

    def live_counts(self) -> tuple[int, int] | None:
        """Datagrams sent and dropped (late, or the queue full) so far; None before ``open``."""
        if isinstance(self.pacer, _ProcessPacer):
            return self.pacer.live_counts()
        if isinstance(self.pacer, Pacer):
            s = self.pacer.stats
            return s.sent, s.dropped_late + s.dropped_full
        return None

    def write(self, scan: Scan) -> None:
        """Packetize ``scan`` (stamped on the run's clock) and queue its datagrams."""
        assert self.packetizer is not None and self.pacer is not None, "open() first"
        assert self._context is not None
        stamp_clock(self.packetizer, self._context, scan)
        batches = self.packetizer.packetize(scan)
        self.pacer.put_many([(b.port, b.payloads, b.send_ns) for b in batches])
        self.pacer.advance(scan.start_ns + scan_period_ns(self.packetizer.preset))

    def close(self) -> None:
        """Send what is queued, stop the thread, close the socket; ``stats`` holds the pacing record."""
        if self.pacer is not None and self.packetizer is not None:
            self.pacer.put_many([(b.port, b.payloads, b.send_ns) for b in self.packetizer.finish()])
            self.stats = self.pacer.close()
