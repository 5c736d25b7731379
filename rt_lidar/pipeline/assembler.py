"""The rotating sweep: stitching per-frame sectors into whole scans.

Each sim frame fires only the firings that fall in its time slice (a sector of 360 deg * f_sim/f_lidar
on a rotating sensor); :class:`ScanAssembler` gathers the points of consecutive frames and hands out a
:class:`Scan` as soon as the firing schedule has moved past its end. Points keep their own firing time
(``t`` from the scan start), so motion during the sweep shows as it does on a real sensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rt_lidar.backend.source_ops import NumpySourceOps, select_source_ops
from rt_lidar.kernels import scan_boundaries
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sensor.scan_pattern import firings_per_scan, scan_index, scan_runs, scan_start_ns

__all__ = ["CameraView", "Scan", "ScanAssembler"]


@dataclass(frozen=True)
class CameraView:
    """What a camera-driven model stage saw for a scan: the image it was given and its output mask."""

    rgb: np.ndarray
    """(H, W, 3) uint8 camera image."""
    mask: np.ndarray
    """(h, w) float32 intensity mask of the model: intensity in [0, 1] where a return is kept, 0 where
    the ray is dropped."""
    time_ns: int
    """Absolute sim time (ns) the image was taken at (the scan start where the source does not say, as
    over the AirSim bridge, whose image stamps run on the simulator's own clock)."""


@dataclass
class Scan:
    """One whole rotation (or solid-state frame): points with ``t`` relative to ``start_ns``."""

    index: int
    start_ns: int
    points: np.ndarray
    fired: int
    dropped: int
    """Pulses that returned no point (a pulse with two returns counts once as returned)."""
    frames: int = 0
    """Number of sim frames (sectors) that contributed."""
    sensor_position: np.ndarray = field(default_factory=lambda: np.zeros(3))
    """World position of the sensor at the scan start (x fwd, y left, z up)."""
    sensor_rotation: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0, 0.0]))
    """World orientation (w, x, y, z) of the sensor at the scan start."""
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    """Optional per-point fields aligned with ``points`` (``epw_ns``: echo pulse width)."""
    camera: CameraView | None = None
    """The camera image and intensity mask of the learned stage (RINet) when it ran on this scan."""
    sim_wall_ns: int | None = None
    """Wall time (``time.time_ns()``) at which the pipeline had the sim's last sector of this scan in
    hand: where the viewer's sim -> screen latency starts."""
    clock_offset_ns: int = 0
    """What the sensor's clock is off by (an injected clock fault, :mod:`rt_lidar.faults`): every
    sink adds it to the scan's stamps (:meth:`rt_lidar.sinks.base.SinkContext.stamp_offset_ns`)."""
    boot: int = 0
    """Times the sensor came back from a reboot before this scan (an injected ``reboot`` fault)."""

    @property
    def drop_fraction(self) -> float:
        """Share of fired rays that returned no point."""
        return self.dropped / self.fired if self.fired else 0.0


@dataclass
class _Pending:
    index: int
    parts: list[np.ndarray] = field(default_factory=list)
    extras: list[dict[str, np.ndarray]] = field(default_factory=list)
    fired: int = 0
    frames: int = 0


class ScanAssembler:
    """Accumulates sector points into scans of ``preset``'s schedule."""

    def __init__(self, preset: SensorPreset, ops: NumpySourceOps | None = None) -> None:
        self.preset = preset
        self.ops = ops or select_source_ops()
        """How a scan's parts are joined (NumPy, or its compiled twin: :mod:`rt_lidar.backend.source_ops`)."""
        self._pending: dict[int, _Pending] = {}
        self._first: int | None = None
        """Index of the run's first scan (None before the first firing)."""
        self.partial_first: Scan | None = None
        """The run's first scan when it was partial and dropped: the source's clock was already inside
        a rotation when the run started (a server that was running), so its first part was never fired."""

    def add(
        self,
        points: np.ndarray,
        fired_t_ns: np.ndarray,
        frame_end_ns: int,
        extras: dict[str, np.ndarray] | None = None,
    ) -> list[Scan]:
        """Add one frame: its kept ``points`` (``t`` absolute ns), the firing times of every pulse it fired
        and optional per-point ``extras``. Returns the scans that ended at or before ``frame_end_ns``.
        """
        extras = extras or {}
        if fired_t_ns.size:
            for idx, fired in self._fired_per_scan(fired_t_ns):
                pend = self._pending.setdefault(idx, _Pending(idx))
                pend.fired += fired
                pend.frames += 1
        if points.size:
            runs = scan_runs(self.preset, points["t"])  # points in time order (the physics keeps it)
            if runs is None:
                sidx = scan_index(self.preset, points["t"])
                if not bool(np.all(sidx[1:] >= sidx[:-1])):
                    order = np.argsort(points["t"], kind="stable")
                    points, sidx = points[order], sidx[order]
                    extras = {name: v[order] for name, v in extras.items()}
                found, at = scan_boundaries(sidx)
                runs = found.tolist(), at.tolist()
            indices, starts = runs
            for k, idx in enumerate(indices):
                sl = slice(starts[k], starts[k + 1])
                pend = self._pending.setdefault(idx, _Pending(idx))
                pend.parts.append(points[sl])
                pend.extras.append({name: v[sl] for name, v in extras.items()})
        current = int(scan_index(self.preset, np.asarray([frame_end_ns], np.int64))[0])
        done = sorted(i for i in self._pending if i < current)
        return self._whole([self._finish(self._pending.pop(i)) for i in done])

    def oldest_pending(self) -> int | None:
        """Index of the oldest scan still being gathered (None: none)."""
        return min(self._pending) if self._pending else None

    @property
    def started(self) -> bool:
        """Whether the run's first scan was handed out (or dropped as partial)."""
        return self._first is not None

    def _whole(self, scans: list[Scan]) -> list[Scan]:
        """``scans`` without the run's first scan when it missed firings of its schedule."""
        if self._first is None and scans:
            self._first = scans[0].index
            if scans[0].fired < firings_per_scan(self.preset):
                self.partial_first = scans.pop(0)
        return scans

    def _fired_per_scan(self, fired_t_ns: np.ndarray) -> list[tuple[int, int]]:
        """(scan index, pulses fired in it) of a frame's firing times, ascending."""
        runs = scan_runs(self.preset, fired_t_ns)
        if runs is None:
            uniq, counts = np.unique(scan_index(self.preset, fired_t_ns), return_counts=True)
            return list(zip(uniq.tolist(), counts.tolist(), strict=True))
        indices, starts = runs
        return [(idx, starts[k + 1] - starts[k]) for k, idx in enumerate(indices)]

    def flush(self) -> list[Scan]:
        """Hand out whatever is pending (an incomplete last scan), in order."""
        done = sorted(self._pending)
        return self._whole([self._finish(self._pending.pop(i)) for i in done])

    def _finish(self, pend: _Pending) -> Scan:
        start = scan_start_ns(self.preset, pend.index)
        pts, returned = self.ops.join_scan(pend.parts, start)  # t from the scan's start; first returns
        extras: dict[str, np.ndarray] = {}
        if pend.extras and all(pend.extras):
            extras = {name: np.concatenate([e[name] for e in pend.extras]) for name in pend.extras[0]}
        return Scan(pend.index, start, pts, pend.fired, pend.fired - returned, pend.frames, extras=extras)
