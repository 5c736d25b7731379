"""The sink interface: where finished scans go, ``--sink KIND:TARGET[,key=value...]`` parsed into one
(:func:`make_sink`, through the explicit registry :data:`rt_lidar.sinks.registry.SINK_FACTORIES`), and
the one parser of sink options (:class:`SinkOptions`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.schema import check_value
from rt_lidar.sensor.presets import SensorPreset

__all__ = [
    "SINKS",
    "ScanSink",
    "SinkContext",
    "SinkOptions",
    "make_sink",
    "parse_sink_spec",
    "register_sink",
    "sink_factory",
]


@dataclass(frozen=True)
class SinkContext:
    """What every sink may need besides the scans: the sensor, the run's resolved configuration."""

    preset: SensorPreset
    scenario: dict[str, Any] = field(default_factory=dict)
    lockstep: bool = False
    """True when the sim runs in lockstep: pacing sinks follow sim time instead of wall-clock time."""


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
