"""The sink interface: where finished scans go, ``--sink KIND:TARGET[,key=value...]`` parsed into one
(:func:`make_sink`, through the explicit registry :data:`rt_lidar.sinks.registry.SINK_FACTORIES`), and
the one parser of sink options (:class:`SinkOptions`)."""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.schema import Where, check_fields, check_value, spec
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import scan_period_ns

__all__ = [
    "SINKS",
    "STAMP_CLOCKS",
    "ScanSink",
    "SinkContext",
    "SinkOptions",
    "make_sink",
    "parse_sink_spec",
    "register_sink",
    "sink_factory",
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
    stamp: str = spec("sim", choices=STAMP_CLOCKS)
    """The clock of every stamp a sink writes (packet timestamps, pcap records, message headers):
    ``sim``: the sim clock (packets at ``DEFAULT_EPOCH_NS`` + sim time, ROS messages at sim time, as
    ``/clock`` says); ``wall``: the wall clock, as a PTP-synchronised sensor stamps (see
    :meth:`stamp_offset_ns`)."""
    mount: tuple[float, ...] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
    """Where the sensor sits on the vehicle: x, y, z (m, x forward, y left, z up) then the rotation
    quaternion w, x, y, z (vehicle frame -> sensor frame); identity where the run does not know it."""
    faults: Any = None
    """The run's :class:`~rt_lidar.faults.plan.FaultPlan` for this sensor (its network faults act on
    the packet and message sinks); None = none."""

    _wall: _WallStamps = field(default_factory=_WallStamps, compare=False, repr=False)
    _live: Callable[[], dict[str, str]] | None = field(default=None, compare=False, repr=False)
    """The run's live figures (``--realtime``'s pace), which the stream carries to the viewer's HUD."""

    def __post_init__(self) -> None:
        check_fields(self, "sink context")

    def live_figures(self) -> dict[str, str]:
        """The run's live figures now (e.g. ``{"realtime": "0.62x -1.5s"}``); ``{}`` when it has none."""
        return self._live() if self._live is not None else {}

    def validate(self, what: Where) -> None:
        """The mount is x, y, z, qw, qx, qy, qz."""
        if len(self.mount) != 7:
            raise what.fail("mount", f"expected x, y, z, qw, qx, qy, qz, got {self.mount}")

    def stamp_offset_ns(self, scan: Scan, sim_epoch_ns: int = 0) -> int:
        """What to add to a sim time of ``scan`` (ns) to stamp it.

        ``sim``: ``sim_epoch_ns`` (each sink's own epoch). ``wall``: the offset that puts the scan's end
        at the wall time the pipeline had its last sector (``Scan.sim_wall_ns``; now where that is
        unknown), so the scan is stamped as a sensor whose clock follows the wall clock would have
        stamped it firing just then; points and packets keep their spacing inside the scan. The offset
        never decreases, so stamps never run backwards: a sim faster than real time gets stamps ahead
        of the wall clock by the time it gained (:attr:`stamp_lead_max_s`); in real time they are not.
        Every sink of the run gets the same offset for the same scan. A clock fault's offset
        (``Scan.clock_offset_ns``) is added on either clock.
        """
        if self.stamp == "sim":
            return sim_epoch_ns + scan.clock_offset_ns
        return self._wall_offset_ns(scan) + scan.clock_offset_ns

    def _wall_offset_ns(self, scan: Scan) -> int:
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
"""``factory(target, options)``: a sink's constructor or a function building one."""


def sink_factory(kind: str) -> SinkFactory:
    """The factory of sink ``kind``, imported from its module on first use (the registry names
    ``"module:attribute"`` for every kind; nothing registers by being imported)."""
    from rt_lidar.sinks.registry import SINK_FACTORIES

    if kind not in SINK_FACTORIES:
        raise ConfigError(f"unknown kind '{kind}'; known: {', '.join(sorted(SINK_FACTORIES))}")
    module, _, attr = SINK_FACTORIES[kind].partition(":")
    factory: SinkFactory = getattr(importlib.import_module(module), attr)
    return factory


class _Sinks(Mapping[str, SinkFactory]):
    """``kind -> factory``, each imported when first looked up."""

    def __getitem__(self, kind: str) -> SinkFactory:
        from rt_lidar.sinks.registry import SINK_FACTORIES

        if kind not in SINK_FACTORIES:
            raise KeyError(kind)
        return sink_factory(kind)

    def __iter__(self) -> Iterator[str]:
        from rt_lidar.sinks.registry import SINK_FACTORIES

        return iter(SINK_FACTORIES)

    def __len__(self) -> int:
        from rt_lidar.sinks.registry import SINK_FACTORIES

        return len(SINK_FACTORIES)


SINKS: Mapping[str, SinkFactory] = _Sinks()
"""``kind -> factory(target, options)``, lazily from :data:`~rt_lidar.sinks.registry.SINK_FACTORIES`."""


def register_sink(kind: str) -> Callable[[SinkFactory], SinkFactory]:
    """Marks a sink factory with its kind (``factory.sink_kind``). It registers nothing: a sink is found
    through :data:`~rt_lidar.sinks.registry.SINK_FACTORIES`, where every kind names its factory."""

    def deco(factory: SinkFactory) -> SinkFactory:
        factory.sink_kind = kind  # type: ignore[attr-defined]
        return factory

    return deco


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class SinkOptions:
    """The one parser of a sink's ``key=value`` options: typed getters with defaults and allowed ranges.

    An unknown key, or a value of the wrong type or out of range, is a :class:`ConfigError` naming the
    sink kind, the option and what is allowed.
    """

    def __init__(self, kind: str, options: Mapping[str, str], allowed: Iterable[str] = ()) -> None:
        self.kind = kind
        self.options = dict(options)
        self.allowed = sorted(set(allowed))
        unknown = sorted(set(self.options) - set(self.allowed))
        if unknown:
            known = ", ".join(self.allowed) if self.allowed else "none"
            raise ConfigError(f"sink {kind}: unknown option(s) {', '.join(unknown)}; allowed: {known}")

    def _error(self, source: str, where: str, problem: str) -> ConfigError:
        return ConfigError(f"sink {self.kind}: option {where}={self.options.get(where)!r}: {problem}")

    def flag(self, key: str, default: bool) -> bool:
        """A boolean: 1/true/yes/on or 0/false/no/off."""
        if key not in self.options:
            return default
        text = self.options[key].strip().lower()
        if text not in _TRUE + _FALSE:
            raise self._error("", key, f"must be one of {', '.join(_TRUE + _FALSE)}")
        return text in _TRUE

    def integer(self, key: str, default: int, lo: int | None = None, hi: int | None = None) -> int:
        """A whole number in ``[lo, hi]``."""
        if key not in self.options:
            return default
        try:
            value = int(self.options[key])
        except ValueError:
            raise self._error("", key, f"must be a whole number{_range(lo, hi)}") from None
        return int(check_value(value, int, {"lo": lo, "hi": hi}, "", key, self._error))

    def number(self, key: str, default: float, lo: float | None = None, hi: float | None = None) -> float:
        """A finite number in ``[lo, hi]``."""
        if key not in self.options:
            return default
        try:
            value = float(self.options[key])
        except ValueError:
            raise self._error("", key, f"must be a number{_range(lo, hi)}") from None
        return float(check_value(value, float, {"lo": lo, "hi": hi}, "", key, self._error))

    def choice(self, key: str, default: str, choices: Iterable[str]) -> str:
        """One of ``choices``."""
        if key not in self.options:
            return default
        allowed = tuple(choices)
        return str(check_value(self.options[key], str, {"choices": allowed}, "", key, self._error))

    def text(self, key: str, default: str) -> str:
        """Any string."""
        return self.options.get(key, default)

    def path(self, key: str) -> Path | None:
        """A file path (None when not given)."""
        return Path(self.options[key]) if key in self.options else None


def _range(lo: float | None, hi: float | None) -> str:
    return f" in [{lo:g}, {hi:g}]" if lo is not None and hi is not None else ""


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
    kind, target, options = parse_sink_spec(spec)
    try:
        factory = sink_factory(kind)
    except ConfigError as exc:
        raise ConfigError(f"--sink '{spec}': {exc}") from None
    return factory(target, options)


def target_dir(target: str) -> Path:
    """A sink's output folder, created."""
    path = Path(target)
    path.mkdir(parents=True, exist_ok=True)
    return path
