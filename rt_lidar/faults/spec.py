"""What a faults file says: one validated dataclass per fault ``kind``, read from ``[[fault]]`` tables.

A faults file (``--faults FILE.toml``, a rig sensor's ``faults = "FILE.toml"``) is a list of
``[[fault]]`` tables. Every fault has a ``kind``, its own parameters, an optional time window in sim
seconds (``start_s`` .. ``end_s``; none = the whole run) and an optional ``sensor`` (a rig's sensor
name; none = every sensor). Errors name the file, the fault's index and the field:
``faults.toml: field 'fault[2].transmission': must be in [0, 1], got 1.5``.
The kinds and their families are listed in :data:`FAULT_FAMILIES`; docs/faults.md describes each.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rt_lidar.errors import ConfigError, FieldError
from rt_lidar.schema import Where, build_variant, spec

__all__ = [
    "FAULT_FAMILIES",
    "FAULT_KINDS",
    "NETWORK_KINDS",
    "Fault",
    "check_rings",
    "faults_from_table",
    "load_faults",
]

_ANGLE = (-360.0, 360.0)


class _Window:
    """The fields every fault has: ``kind``, its window in sim time and the sensor it targets."""

    start_s: float
    end_s: float | None
    sensor: str | None

    def active(self, t_s: float) -> bool:
        """True while the fault acts (``start_s <= t < end_s``)."""
        return t_s >= self.start_s and (self.end_s is None or t_s < self.end_s)

    def validate(self, what: Where) -> None:
        """The window must not end before it starts."""
        if self.end_s is not None and self.end_s <= self.start_s:
            raise what.fail("end_s", f"must be > start_s ({self.start_s:g} s), got {self.end_s:g}")
        _check_pair(self, what)


def _check_pair(fault: Any, what: Where) -> None:
    """Ranges given as [from, to] must not run backwards (an azimuth range may wrap: from > to)."""
    for name in ("range_m", "elevation_deg", "scatter_range_m"):
        pair = getattr(fault, name, None)
        if pair is not None and pair[1] < pair[0]:
            raise what.fail(name, f"must be [low, high], got [{pair[0]:g}, {pair[1]:g}]")


# ---- optical -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Blockage(_Window):
    """No returns in an azimuth range (and optional elevation range): something covers the window."""

    kind: str = "blockage"
    azimuth_deg: tuple[float, float] = spec((0.0, 360.0), *_ANGLE, "deg")
    elevation_deg: tuple[float, float] | None = spec(None, -90.0, 90.0, "deg")
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class Dirt(_Window):
    """A dirty window: one-way transmission ``transmission`` (two-way T^2 in the radar equation) over
    an azimuth range, and near-range scatter points from the contamination."""

    kind: str = "dirt"
    transmission: float = spec(0.5, 0.0, 1.0)
    azimuth_deg: tuple[float, float] = spec((0.0, 360.0), *_ANGLE, "deg")
    elevation_deg: tuple[float, float] | None = spec(None, -90.0, 90.0, "deg")
    scatter_rate: float | None = spec(None, 0.0, 1.0)
    """Share of the dirty sector's pulses that report a near-range scatter point; None = 0.05 * (1 - T)."""
    scatter_range_m: tuple[float, float] | None = spec(None, 0.0, 10.0, "m")
    """Where the scatter points lie; None = the preset's minimum range to 1 m beyond it."""
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class Blinding(_Window):
    """A bright source saturating a sector: returns lost and saturated false detections."""

    kind: str = "blinding"
    azimuth_deg: tuple[float, float] = spec((-10.0, 10.0), *_ANGLE, "deg")
    elevation_deg: tuple[float, float] | None = spec(None, -90.0, 90.0, "deg")
    drop: float = spec(1.0, 0.0, 1.0)
    """Share of the sector's returns lost."""
    false_rate: float = spec(0.2, 0.0, 1.0)
    """Share of the sector's pulses that report a saturated false detection."""
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


# ---- electronic ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeadChannel(_Window):
    """Rings that return nothing."""

    kind: str = "dead_channel"
    rings: tuple[int, ...] = spec((), 0, 1023, min_items=1, wrap=True)
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class WeakChannel(_Window):
    """Rings whose received power is scaled by ``power_scale`` (a tired laser or detector)."""

    kind: str = "weak_channel"
    rings: tuple[int, ...] = spec((), 0, 1023, min_items=1, wrap=True)
    power_scale: float = spec(0.1, 0.0, 1.0)
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class NoiseBurst(_Window):
    """False detections at ``rate_hz`` points per second, at random rings, azimuths and ranges."""

    kind: str = "noise_burst"
    rate_hz: float = spec(10_000.0, 0.0, 1e8, "points/s")
    azimuth_deg: tuple[float, float] = spec((0.0, 360.0), *_ANGLE, "deg")
    range_m: tuple[float, float] | None = spec(None, 0.0, 10_000.0, "m")
    """None = the preset's range."""
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class RangeBias(_Window):
    """Every range reads ``r * scale + offset_m``, both drifting linearly from ``start_s``."""

    kind: str = "range_bias"
    offset_m: float = spec(0.0, -100.0, 100.0, "m")
    scale: float = spec(1.0, 0.5, 2.0)
    offset_drift_m_per_s: float = spec(0.0, -10.0, 10.0, "m/s")
    scale_drift_per_s: float = spec(0.0, -0.1, 0.1, "1/s")
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class GainDrift(_Window):
    """The receiver's gain, ``gain`` at ``start_s`` changing by ``gain_per_s``: every echo's power
    (detection and intensity) is scaled by it (floored at 0)."""

    kind: str = "gain_drift"
    gain: float = spec(1.0, 0.0, 10.0)
    gain_per_s: float = spec(-0.05, -10.0, 10.0, "1/s")
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


# ---- mechanical and timing -----------------------------------------------------------------------


@dataclass(frozen=True)
class RotationWobble(_Window):
    """The spin rate varies: the rotor leads or lags its nominal phase by up to ``amplitude_deg``
    (a sine of period ``period_s``), so each azimuth is fired earlier or later than nominal."""

    kind: str = "rotation_wobble"
    amplitude_deg: float = spec(2.0, 0.0, 90.0, "deg")
    period_s: float = spec(1.0, 0.001, 1e4, "s")
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class Frozen(_Window):
    """The same scan repeated: the last scan before ``start_s`` comes out again, restamped."""

    kind: str = "frozen"
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class Reboot(_Window):
    """No output from ``start_s`` to ``end_s``; then the sensor is back as after a power cycle (a new
    Ouster ``init_id``, frame ids from 0; Velodyne packets starting over at the next scan)."""

    kind: str = "reboot"
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None

    def validate(self, what: Where) -> None:
        """A reboot needs its end (the sensor comes back)."""
        if self.end_s is None:
            raise what.fail("end_s", "is required for a reboot (when the sensor is back)")
        _Window.validate(self, what)


@dataclass(frozen=True)
class MountDrift(_Window):
    """The extrinsic drifting from its calibration: the sensor turns by ``rpy_deg_per_s`` and moves by
    ``xyz_m_per_s`` from ``start_s`` while the vehicle still believes its calibrated mount."""

    kind: str = "mount_drift"
    rpy_deg_per_s: tuple[float, float, float] = spec((0.0, 0.0, 0.1), -10.0, 10.0, "deg/s")
    xyz_m_per_s: tuple[float, float, float] = spec((0.0, 0.0, 0.0), -1.0, 1.0, "m/s")
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class ClockOffset(_Window):
    """Every stamp (points, packets, messages) off by ``offset_s``."""

    kind: str = "clock_offset"
    offset_s: float = spec(0.5, -1e6, 1e6, "s")
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class ClockDrift(_Window):
    """The sensor's clock runs fast by ``ppm`` parts per million from ``start_s`` (PTP lost)."""

    kind: str = "clock_drift"
    ppm: float = spec(100.0, -1e6, 1e6, "ppm")
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


# ---- network ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PacketLoss(_Window):
    """Datagrams (or stream messages) lost: a share ``rate`` of them, in bursts of ``burst`` on average."""

    kind: str = "packet_loss"
    rate: float = spec(0.01, 0.0, 1.0)
    burst: float = spec(1.0, 1.0, 10_000.0, "packets")
    sink: str | None = None
    """Only the sinks of this kind (``velodyne-pcap``, ``ouster-udp``, ``stream`` ...); None = all."""
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class Duplicate(_Window):
    """A share ``rate`` of the datagrams arrives twice."""

    kind: str = "duplicate"
    rate: float = spec(0.01, 0.0, 1.0)
    sink: str | None = None
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class Reorder(_Window):
    """A share ``rate`` of the datagrams arrives ``depth`` datagrams late."""

    kind: str = "reorder"
    rate: float = spec(0.01, 0.0, 1.0)
    depth: int = spec(3, 1, 10_000, "packets")
    sink: str | None = None
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class Delay(_Window):
    """Every datagram arrives ``delay_ms`` late plus a jitter uniform in [0, ``jitter_ms``] (a jitter
    wider than the packets' spacing reorders them, as on a real network)."""

    kind: str = "delay"
    delay_ms: float = spec(5.0, 0.0, 10_000.0, "ms")
    jitter_ms: float = spec(0.0, 0.0, 10_000.0, "ms")
    sink: str | None = None
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class Jitter(_Window):
    """``delay`` with no fixed part: each datagram late by a uniform [0, ``jitter_ms``]."""

    kind: str = "jitter"
    jitter_ms: float = spec(1.0, 0.0, 10_000.0, "ms")
    sink: str | None = None
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


@dataclass(frozen=True)
class Truncate(_Window):
    """A share ``rate`` of the datagrams cut to their first ``bytes`` bytes."""

    kind: str = "truncate"
    rate: float = spec(0.01, 0.0, 1.0)
    bytes: int = spec(64, 0, 65_535, "bytes")
    sink: str | None = None
    start_s: float = spec(0.0, 0.0, 1e9, "s")
    end_s: float | None = spec(None, 0.0, 1e9, "s")
    sensor: str | None = None


Fault = (
    Blockage
    | Dirt
    | Blinding
    | DeadChannel
    | WeakChannel
    | NoiseBurst
    | RangeBias
    | GainDrift
    | RotationWobble
    | Frozen
    | Reboot
    | MountDrift
    | ClockOffset
    | ClockDrift
    | PacketLoss
    | Duplicate
    | Reorder
    | Delay
    | Jitter
    | Truncate
)
"""Any fault (a union the schema builds by ``kind``)."""

_CLASSES: tuple[type, ...] = (
    Blockage,
    Dirt,
    Blinding,
    DeadChannel,
    WeakChannel,
    NoiseBurst,
    RangeBias,
    GainDrift,
    RotationWobble,
    Frozen,
    Reboot,
    MountDrift,
    ClockOffset,
    ClockDrift,
    PacketLoss,
    Duplicate,
    Reorder,
    Delay,
    Jitter,
    Truncate,
)
FAULT_KINDS: dict[str, type] = {c.kind: c for c in _CLASSES}  # type: ignore[attr-defined]
"""``kind -> class`` of every fault."""
FAULT_FAMILIES: dict[str, tuple[str, ...]] = {
    "optical": ("blockage", "dirt", "blinding"),
    "electronic": ("dead_channel", "weak_channel", "noise_burst", "range_bias", "gain_drift"),
    "timing": ("rotation_wobble", "frozen", "reboot", "mount_drift", "clock_offset", "clock_drift"),
    "network": ("packet_loss", "duplicate", "reorder", "delay", "jitter", "truncate"),
}
NETWORK_KINDS = frozenset(FAULT_FAMILIES["network"])


def faults_from_table(table: Any, source: str) -> tuple[Fault, ...]:
    """The faults of a parsed faults file (``{"fault": [ {...}, ... ]}``), each checked."""
    if not isinstance(table, dict):
        raise FieldError(source, "(top level)", "must be a table with [[fault]] entries")
    unknown = [k for k in table if k != "fault"]
    if unknown:
        raise FieldError(source, str(unknown[0]), "unknown key; a faults file holds only [[fault]] tables")
    entries = table.get("fault", [])
    if not isinstance(entries, list):
        raise FieldError(source, "fault", "must be an array of tables ([[fault]])")
    out: list[Fault] = []
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and "kind" not in entry:
            raise FieldError(source, f"fault[{i}].kind", f"is required; one of {', '.join(FAULT_KINDS)}")
        out.append(build_variant(FAULT_KINDS, entry, source, f"fault[{i}]"))
    return tuple(out)


def load_faults(path: str | Path) -> tuple[Fault, ...]:
    """Read and check a faults file (TOML ``[[fault]]`` tables)."""
    p = Path(path)
    try:
        table = tomllib.loads(p.read_text())
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the faults file: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from exc
    return faults_from_table(table, str(p))


def check_rings(faults: tuple[Fault, ...], n_rings: int, sensor: str, source: str = "faults") -> None:
    """The rings every channel fault names must exist on a sensor of ``n_rings`` rings."""
    for i, f in enumerate(faults):
        for ring in getattr(f, "rings", ()):
            if ring >= n_rings:
                raise FieldError(
                    source,
                    f"fault[{i}].rings",
                    f"ring {ring} is not one of {sensor}'s rings 0..{n_rings - 1}",
                )
