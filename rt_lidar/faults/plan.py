"""A run's faults put to work (:class:`FaultPlan`): the power faults on each frame's hits before the
physics, the point and timing faults on each finished scan, the network faults handed to the packet
and message sinks; and the record of what was injected and when (``summary.json``'s ``faults``).

Every random draw comes from a stream of its own, seeded by (run seed, fault index, scan index), so a
run with the same configuration and seed gives the same bytes whatever else it does.
"""

from __future__ import annotations

import dataclasses
import warnings
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rt_lidar.faults.optical import POWER_KINDS, in_azimuth, in_elevation, with_power_faults
from rt_lidar.faults.points import (
    Cloud,
    add_blinding,
    add_dirt_scatter,
    add_noise_burst,
    apply_mount_drift,
    apply_range_bias,
    apply_wobble,
    copy_points,
)
from rt_lidar.faults.spec import (
    NETWORK_KINDS,
    Blinding,
    Blockage,
    ClockDrift,
    ClockOffset,
    DeadChannel,
    Dirt,
    Fault,
    Frozen,
    GainDrift,
    MountDrift,
    NoiseBurst,
    RangeBias,
    Reboot,
    RotationWobble,
    WeakChannel,
    check_rings,
)
from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.sources import Hits
from rt_lidar.points import PointFlag
from rt_lidar.schema import to_plain
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import scan_period_ns

__all__ = ["FaultPlan", "faults_for_sensor"]

_STREAM = 0xFA17


def faults_for_sensor(faults: tuple[Fault, ...], sensor: str | None) -> tuple[Fault, ...]:
    """The faults that act on ``sensor`` (a rig sensor's name; None: a single-sensor run, where every
    fault acts whatever sensor it names)."""
    if sensor is None:
        return faults
    return tuple(f for f in faults if f.sensor is None or f.sensor == sensor)


@dataclass
class _Record:
    index: int
    fault: Fault
    scans: int = 0
    first_s: float | None = None
    last_s: float | None = None
    points_added: int = 0
    points_removed: int = 0
    scans_dropped: int = 0
    scans_repeated: int = 0
    network: dict[str, int] = field(default_factory=dict)
    sinks: set[str] = field(default_factory=set)
    """The sinks (kinds) a network fault was put on."""
    warning: str | None = None

    def hit(self, t_s: float) -> None:
        self.scans += 1
        self.first_s = t_s if self.first_s is None else self.first_s
        self.last_s = t_s

    def as_dict(self) -> dict[str, Any]:
        plain = to_plain(self.fault)
        out: dict[str, Any] = {"index": self.index, **plain}
        out["injected"] = {
            "first_scan_s": self.first_s,
            "last_scan_s": self.last_s,
            "scans": self.scans,
            "points_added": self.points_added,
            "points_removed": self.points_removed,
        }
        if isinstance(self.fault, Reboot):
            out["injected"]["scans_dropped"] = self.scans_dropped
        if isinstance(self.fault, Frozen):
            out["injected"]["scans_repeated"] = self.scans_repeated
        if self.fault.kind in NETWORK_KINDS:
            out["injected"]["sinks"] = sorted(self.sinks)
        if self.network:
            out["injected"]["packets"] = dict(self.network)
        if self.warning:
            out["warning"] = self.warning
        return out


class FaultPlan:
    """The faults of one sensor of a run (``faults``, already those that target it), for ``preset``
    with the run's ``seed``."""

    def __init__(
        self,
        faults: tuple[Fault, ...],
        preset: SensorPreset,
        seed: int,
        source: str = "faults",
        key: str = "",
    ) -> None:
        check_rings(faults, preset.n_rings, preset.name, source)
        self.key = zlib.crc32(key.encode()) if key else 0
        """Tells the random streams of a rig's sensors apart (their names); 0 for a single sensor."""
        self.faults = faults
        self.preset = preset
        self.seed = int(seed)
        self.period_ns = scan_period_ns(preset)
        self.records = [_Record(i, f) for i, f in enumerate(faults)]
        self._power = tuple(f for f in faults if isinstance(f, POWER_KINDS))
        self._last_good: Scan | None = None
        self.network = tuple((i, f) for i, f in enumerate(faults) if f.kind in NETWORK_KINDS)
        """(index, fault) of the network faults, for the packet and message sinks."""
        for rec in self.records:
            f = rec.fault
            if isinstance(f, RotationWobble) and preset.scan.pattern != "rotating":
                self.warn(rec.index, f"does nothing: {preset.name} does not rotate ({preset.scan.pattern})")
            if f.sensor is not None and not key:
                self.warn(
                    rec.index, f"names sensor '{f.sensor}': a single-sensor run applies it to {preset.name}"
                )

    def note_boot(self, boot: int, key: str, value: int) -> None:
        """Record ``key = value`` (e.g. an Ouster sink's new ``init_id``) on the reboot that ended
        before boot ``boot`` (1: the first, in order of their ends)."""
        reboots = sorted(
            (r for r in self.records if isinstance(r.fault, Reboot)), key=lambda r: r.fault.end_s or 0
        )
        if 0 < boot <= len(reboots):
            reboots[boot - 1].network[key] = value

    def warn(self, index: int, problem: str) -> None:
        """Say (stderr, and the summary's entry of fault ``index``) what a fault will not do as written."""
        rec = self.records[index]
        rec.warning = problem if rec.warning is None else f"{rec.warning}; {problem}"
        warnings.warn(f"fault[{index}] ({rec.fault.kind}): {problem}", stacklevel=2)

    def __bool__(self) -> bool:
        return bool(self.faults)

    # -- before the physics --------------------------------------------------------------------------
    def on_hits(self, hits: Hits) -> Hits:
        """A frame's hits with the power faults applied (thread-safe: the frame alone decides)."""
        return with_power_faults(self._power, hits) if self._power else hits

    # -- after the sweep ---------------------------------------------------------------------------
    def _rng(self, index: int, scan: Scan) -> np.random.Generator:
        seq = np.random.SeedSequence([self.seed, _STREAM, index, int(scan.index) & (2**63 - 1), self.key])
        return np.random.Generator(np.random.PCG64(seq))

    def _overlap_s(self, f: Fault, t0: float, t1: float) -> float:
        end = t1 if f.end_s is None else min(t1, f.end_s)
        return max(0.0, end - max(t0, f.start_s))

    def on_scan(self, scan: Scan) -> Scan | None:
        """``scan`` with the point and timing faults applied; None where the sensor is down (reboot)."""
        if not self.faults:
            return scan
        t0 = scan.start_ns * 1e-9
        t1 = t0 + self.period_ns * 1e-9
        boot = 0
        for rec in self.records:
            f = rec.fault
            if isinstance(f, Reboot):
                assert f.end_s is not None
                if t0 < f.end_s and t1 > f.start_s:  # down for (part of) this scan: nothing of it
                    rec.hit(t0)
                    rec.scans_dropped += 1
                    return None
                if t0 >= f.end_s:
                    boot += 1
        clock_ns = 0  # the sensor's clock error at this scan's start
        for rec in self.records:
            f = rec.fault
            if isinstance(f, ClockOffset) and f.active(t0):
                clock_ns += round(f.offset_s * 1e9)
            elif isinstance(f, ClockDrift) and f.active(t0):
                clock_ns += round(f.ppm * 1e-6 * (t0 - f.start_s) * 1e9)
            else:
                continue
            rec.hit(t0)
        for rec in self.records:
            f = rec.fault
            if isinstance(f, Frozen) and f.active(t0) and self._last_good is not None:
                rec.hit(t0)
                rec.scans_repeated += 1
                old = self._last_good
                points = copy_points(old.points)
                points["flags"] |= int(PointFlag.FAULT_FROZEN) | (
                    int(PointFlag.FAULT_TIMING) if clock_ns else 0
                )
                return dataclasses.replace(
                    old,
                    index=scan.index,
                    start_ns=scan.start_ns,
                    points=points,
                    boot=boot,
                    clock_offset_ns=clock_ns,
                )
        cloud = Cloud(
            copy_points(scan.points),
            dict(scan.extras),
            np.zeros(scan.points.size, np.uint16),
            int(scan.start_ns),
            self.period_ns,
            self.preset,
        )
        for rec in self.records:
            f = rec.fault
            if f.kind in NETWORK_KINDS or isinstance(f, (Reboot, Frozen, ClockOffset, ClockDrift)):
                continue
            span = self._overlap_s(f, t0, t1)
            if span <= 0:
                continue
            added, removed = cloud.added, cloud.removed
            t_abs = (cloud.start_ns + cloud.points["t"].astype(np.int64)) * 1e-9
            on = (t_abs >= f.start_s) & (True if f.end_s is None else t_abs < f.end_s)
            rng = self._rng(rec.index, scan)
            if isinstance(f, (Blockage, DeadChannel)):  # the noise's false alarms go too: no light, no signal
                if isinstance(f, Blockage):
                    az, el = _angles(cloud)
                    gone = on & in_azimuth(az, f.azimuth_deg) & in_elevation(el, f.elevation_deg)
                else:
                    gone = on & np.isin(cloud.points["ring"], np.asarray(f.rings))
                if gone.any():
                    cloud.take(~gone)
                    cloud.count(f.kind, -int(gone.sum()))
            elif isinstance(f, Dirt):
                az, el = _angles(cloud)
                sel = on & in_azimuth(az, f.azimuth_deg) & in_elevation(el, f.elevation_deg)
                cloud.bits[sel] |= int(PointFlag.FAULT_DIRT)
                add_dirt_scatter(cloud, f, rng)
            elif isinstance(f, (WeakChannel, GainDrift)):
                sel = (
                    on & np.isin(cloud.points["ring"], np.asarray(f.rings))
                    if isinstance(f, WeakChannel)
                    else on
                )
                cloud.bits[sel] |= int(PointFlag.FAULT_POWER)
            elif isinstance(f, Blinding):
                add_blinding(cloud, f, rng)
            elif isinstance(f, NoiseBurst):
                add_noise_burst(cloud, f, rng, span)
            elif isinstance(f, RangeBias):
                apply_range_bias(cloud, f, on)
            elif isinstance(f, RotationWobble):
                apply_wobble(cloud, f, on)
            elif isinstance(f, MountDrift):
                apply_mount_drift(cloud, f, t0 - f.start_s if f.active(t0) else 0.0)
            rec.hit(t0)
            rec.points_added += cloud.added - added
            rec.points_removed += cloud.removed - removed
        if clock_ns:
            cloud.bits |= int(PointFlag.FAULT_TIMING)
        cloud.points["flags"] |= cloud.bits
        out = dataclasses.replace(
            scan, points=cloud.points, extras=cloud.extras, clock_offset_ns=clock_ns, boot=boot
        )
        self._last_good = out
        return out

    def report(self) -> list[dict[str, Any]]:
        """What each fault injected and when (``summary.json``'s ``faults``); a network fault no sink
        took is said (stderr and its entry)."""
        for rec in self.records:
            if rec.fault.kind in NETWORK_KINDS and not rec.sinks and rec.warning is None:
                sink = getattr(rec.fault, "sink", None)
                which = f"sink '{sink}'" if sink else "packet or stream sink"
                self.warn(rec.index, f"no {which} in this run: nothing was sent through it")
        return [r.as_dict() for r in self.records]


def _angles(cloud: Cloud) -> tuple[np.ndarray, np.ndarray]:
    p = cloud.points
    x, y, z = (p[a].astype(np.float64) for a in "xyz")
    return np.degrees(np.arctan2(y, x)), np.degrees(np.arctan2(z, np.hypot(x, y)))
