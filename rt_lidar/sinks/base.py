"""The sink interface: where finished scans go, and the registry that ``--sink KIND:ARG`` parses into."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rt_lidar.errors import ConfigError
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import SensorPreset

__all__ = ["SINKS", "ScanSink", "SinkContext", "make_sink", "parse_sink_spec", "register_sink"]


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
