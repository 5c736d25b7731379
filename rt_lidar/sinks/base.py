"""The sink interface: where finished scans go, and the registry that ``--sink KIND:ARG`` parses into."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import scan_period_ns

__all__ = [
    "SINKS",
    "STAMP_CLOCKS",
    "ScanSink",
    "SinkContext",
    "make_sink",
    "parse_sink_spec",
    "register_sink",
]


STAMP_CLOCKS = ("sim", "wall")
"""The clocks a run may stamp its packets and messages with (``--stamp``)."""


@dataclass
class _WallStamps:
    """The wall clock's state, shared by a run's sinks: the last scan's offset (every sink stamps one
    scan alike) and how far stamps had to run ahead of the wall clock to stay monotonic."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    scan: tuple[int, int] | None = None
    offset_ns: int = 0
    lead_max_ns: int = 0


@dataclass(frozen=True)
class SinkContext:
    """What every sink may need besides the scans: the sensor, the run's resolved configuration."""

    preset: SensorPreset
    scenario: dict[str, Any] = field(default_factory=dict)
    lockstep: bool = False
    """True when the sim runs in lockstep: pacing sinks follow sim time instead of wall-clock time."""
    stamp: str = "sim"
    """The clock of every stamp a sink writes (packet timestamps, pcap records, message headers):
    ``sim``: the sim clock (packets at ``DEFAULT_EPOCH_NS`` + sim time, ROS messages at sim time, as
    ``/clock`` says); ``wall``: the wall clock, as a PTP-synchronised sensor stamps (see
    :meth:`stamp_offset_ns`)."""
    mount: tuple[float, ...] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
    """Where the sensor sits on the vehicle: x, y, z (m, x forward, y left, z up) then the rotation
    quaternion w, x, y, z (vehicle frame -> sensor frame); identity where the run does not know it."""

    _wall: _WallStamps = field(default_factory=_WallStamps, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.stamp not in STAMP_CLOCKS:
            raise ConfigError(f"stamp clock '{self.stamp}': expected {' or '.join(STAMP_CLOCKS)}")
        if len(self.mount) != 7:
            raise ConfigError(f"sensor mount: expected x, y, z, qw, qx, qy, qz, got {self.mount}")

    def stamp_offset_ns(self, scan: Scan, sim_epoch_ns: int = 0) -> int:
        """What to add to a sim time of ``scan`` (ns) to stamp it.

        ``sim``: ``sim_epoch_ns`` (each sink's own epoch). ``wall``: the offset that puts the scan's end
        at the wall time the pipeline had its last sector (``Scan.sim_wall_ns``; now where that is
        unknown), so the scan is stamped as a sensor whose clock follows the wall clock would have
        stamped it firing just then; points and packets keep their spacing inside the scan. The offset
        never decreases, so stamps never run backwards: a sim faster than real time gets stamps ahead
        of the wall clock by the time it gained (:attr:`stamp_lead_max_s`); in real time they are not.
        Every sink of the run gets the same offset for the same scan.
        """
        if self.stamp == "sim":
            return sim_epoch_ns
        state, key = self._wall, (int(scan.index), int(scan.start_ns))
        with state.lock:
            if state.scan == key:
                return state.offset_ns
            end_wall = scan.sim_wall_ns if scan.sim_wall_ns is not None else time.time_ns()
            offset = int(end_wall) - (int(scan.start_ns) + scan_period_ns(self.preset))
            if state.scan is not None and offset < state.offset_ns:
                state.lead_max_ns = max(state.lead_max_ns, state.offset_ns - offset)
                offset = state.offset_ns
            state.scan, state.offset_ns = key, offset
            return offset

    @property
    def stamp_lead_max_s(self) -> float:
        """On the wall clock: the most a stamp ran ahead of the wall time its scan came (0 in real time)."""
        return self._wall.lead_max_ns * 1e-9


class ScanSink(Protocol):
    """A consumer of whole scans. ``write`` must never block the simulation for long (drop instead)."""

    def open(self, context: SinkContext) -> None:
        """Called once before the first scan."""
        ...

    def write(self, scan: Scan) -> None:
        """Consume one finished scan (points in the sensor frame, ``t`` ns from the scan start)."""
        ...

    def close(self) -> None:
        """Flush and release everything; the output is complete and readable afterwards."""
        ...


SinkFactory = Callable[[str, dict[str, str]], ScanSink]
SINKS: dict[str, SinkFactory] = {}
"""``kind -> factory(target, options)``; ``--sink kind:target,key=value,...``."""


def register_sink(kind: str) -> Callable[[SinkFactory], SinkFactory]:
    """Decorator registering a sink factory under ``kind``."""

    def deco(factory: SinkFactory) -> SinkFactory:
        SINKS[kind] = factory
        return factory

    return deco


def parse_sink_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """``"kind:target,key=value"`` -> ``(kind, target, {key: value})``."""
    kind, sep, rest = spec.partition(":")
    if not sep or not kind or not rest:
        raise ConfigError(f"--sink '{spec}': expected KIND:TARGET[,key=value...], e.g. pcd:out/")
    target, *opts = rest.split(",")
    options: dict[str, str] = {}
    for opt in opts:
        key, eq, value = opt.partition("=")
        if not eq or not key:
            raise ConfigError(f"--sink '{spec}': option '{opt}' is not key=value")
        options[key] = value
    return kind, target, options


def make_sink(spec: str) -> ScanSink:
    """Build the sink a ``--sink`` string names."""
    from rt_lidar.sinks import registry  # noqa: F401  (registers every sink)

    kind, target, options = parse_sink_spec(spec)
    if kind not in SINKS:
        raise ConfigError(f"--sink '{spec}': unknown kind '{kind}'; known: {', '.join(sorted(SINKS))}")
    return SINKS[kind](target, options)


def target_dir(target: str) -> Path:
    """A sink's output folder, created."""
    path = Path(target)
    path.mkdir(parents=True, exist_ok=True)
    return path
