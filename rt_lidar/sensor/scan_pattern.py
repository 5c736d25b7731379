"""The firing schedule of a preset: which ring fires when, and in which direction.

Time is integer nanoseconds since sensor start (t = 0). A scan (one rotation, or one solid-state frame)
lasts ``P = scan_period_ns`` and holds ``C`` firing slots ("columns"); slot k (counted over all scans)
fires at ``k * P // C``, so no float error accumulates and any split of time into intervals gives the
same firings as one call over their union. Rotating and mirror patterns fire every ring in a slot,
each at its own ``firing_offset_us``; raster and rosette patterns fire one ring (line) per slot.

Azimuths are in the math convention of the sensor frame (x forward, y left, CCW positive seen from
above), wrapped to [-180, 180). A clockwise head (Velodyne, Ouster, Hesai) has decreasing azimuth.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from rt_lidar.sensor.mirror_adjust import field_count, has_adjust, mirror_adjust_deg
from rt_lidar.sensor.presets import SensorPreset

__all__ = [
    "Firings",
    "azimuth_span_deg",
    "beam_origins",
    "firing_states",
    "firings_between",
    "firings_per_scan",
    "prepare_schedule",
    "scan_index",
    "scan_period_ns",
    "scan_runs",
    "scan_start_ns",
    "schedule_digest",
]


@dataclass(frozen=True)
class Firings:
    """Firings of an interval, all (N,) arrays sorted by ``t_ns`` (then ring)."""

    ring: np.ndarray  # uint16
    t_ns: np.ndarray  # int64, ns since sensor start
    azimuth_deg: np.ndarray  # float64, atan2(y, x) in the sensor frame, [-180, 180)
    elevation_deg: np.ndarray  # float64
    column: np.ndarray  # int64 firing slot index since sensor start
    unit: np.ndarray | None = field(default=None, repr=False, compare=False)
    """Precomputed (N, 3) directions (periodic patterns take them from a per-preset table)."""
    origin: np.ndarray | None = field(default=None, repr=False, compare=False)
    """(N, 3) float32 start of each ray in the sensor frame (its beam's origin, turned with the head to
    the firing's column); None: every ray starts at the sensor origin (presets without beam origins)."""

    def directions(self) -> np.ndarray:
        """(N, 3) float32 unit vectors in the sensor frame (x forward, y left, z up)."""
        if self.unit is not None:
            return self.unit
        az = np.radians(self.azimuth_deg)
        el = np.radians(self.elevation_deg)
        ce = np.cos(el)
        return np.stack([ce * np.cos(az), ce * np.sin(az), np.sin(el)], axis=1).astype(np.float32)

    def __len__(self) -> int:
        return int(self.t_ns.shape[0])


@dataclass(frozen=True)
class _Schedule:
    period_ns: int
    slots: int  # firing slots per scan
    all_rings: bool  # every ring fires in each slot (rotating, mirror) or one per slot
    offsets_ns: np.ndarray  # (R,) int64
    state_offsets_ns: np.ndarray | None = None
    """(S, R) int64 offsets of each ring in azimuth state s (slot k is in state k mod S), -1 where the
    ring does not fire; None: ``offsets_ns`` in every slot."""


@functools.lru_cache(maxsize=64)
def _schedule(preset: SensorPreset) -> _Schedule:
    s = preset.scan
    offsets = np.round(preset.firing_offsets_us * 1000.0).astype(np.int64)
    if s.pattern == "rotating":
        assert s.rotation_hz is not None
        period = round(1e9 / s.rotation_hz)
        if s.columns_per_rev is not None:
            slots = s.columns_per_rev
        else:
            assert s.firing_cycle_us is not None
            slots = max(1, round(period / (s.firing_cycle_us * 1000.0)))
        states = preset.firing_state_offsets_us
        if states is None:
            return _Schedule(period, slots, True, offsets)
        state_ns = np.where(states >= 0, np.round(states * 1000.0), -1).astype(np.int64)
        return _Schedule(period, slots, True, offsets, state_ns)
    assert s.frame_rate_hz is not None
    period = round(1e9 / s.frame_rate_hz)
    if s.pattern == "mirror":
        assert s.columns_per_frame is not None
        return _Schedule(period, s.columns_per_frame, True, offsets)
    if s.pattern == "raster":
        assert s.lines_per_frame is not None and s.points_per_line is not None
        return _Schedule(period, s.lines_per_frame * s.points_per_line, False, offsets)
    assert s.point_rate_hz is not None
    return _Schedule(period, max(1, round(s.point_rate_hz / s.frame_rate_hz)), False, offsets)


def scan_period_ns(preset: SensorPreset) -> int:
    """Rotation period (rotating) or frame period (solid state), integer ns."""
    return _schedule(preset).period_ns


def azimuth_span_deg(preset: SensorPreset) -> float:
    """Horizontal field of view, deg: 360 for a spinning head, the field ahead for a solid-state one."""
    scan = preset.scan
    if scan.pattern == "rotating":
        return 360.0
    return float(scan.fov_h_deg or scan.fov_deg or 360.0)


def firings_per_scan(preset: SensorPreset) -> int:
    """Firings in one scan period (columns x rings for rotating and mirror patterns)."""
    sch = _schedule(preset)
    return sch.slots * (preset.n_rings if sch.all_rings else 1)


def scan_index(preset: SensorPreset, t_ns: np.ndarray) -> np.ndarray:
    """Index (int64) of the scan each time belongs to; scan i covers [i * P, (i + 1) * P)."""
    return np.floor_divide(np.asarray(t_ns, dtype=np.int64), _schedule(preset).period_ns)


def scan_runs(preset: SensorPreset, t_ns: np.ndarray) -> tuple[list[int], list[int]] | None:
    """The runs of one scan in times ``t_ns`` that are in order (a frame's firings, its points): the
    scan indices (ascending, those with a time in them) and the offset where each run starts, plus the
    length, as :func:`scan_index` and :func:`kernels.scan_boundaries` give them, found by binary search
    at the scan starts instead of dividing every time. None when the times are not in order (or span
    more scans than they hold times)."""
    t = np.asarray(t_ns)
    n = int(t.shape[0])
    if n == 0:
        return [], [0]
    if n > 1 and not bool((t[1:] >= t[:-1]).all()):
        return None
    period = _schedule(preset).period_ns
    first, last = int(t[0]) // period, int(t[-1]) // period
    if first == last:
        return [first], [0, n]
    if last - first > n:
        return None
    cuts = np.searchsorted(t, np.arange(first + 1, last + 1, dtype=np.int64) * period, side="left")
    edges = [0, *cuts.tolist(), n]  # scan first + i holds [edges[i], edges[i + 1])
    indices = [first + i for i in range(last - first + 1) if edges[i] < edges[i + 1]]
    starts = [edges[k - first] for k in indices]
    return indices, [*starts, n]


def scan_start_ns(preset: SensorPreset, index: int) -> int:
    """Start time of scan ``index`` (ns since sensor start)."""
    return int(index) * _schedule(preset).period_ns


def _first_slot(t: int, sch: _Schedule) -> int:
    """Smallest slot k with k * P // C >= t (exact integer arithmetic)."""
    return -((-t * sch.slots) // sch.period_ns)


def _wrap(az: np.ndarray) -> np.ndarray:
    return np.mod(az + 180.0, 360.0) - 180.0


def prepare_schedule(preset: SensorPreset) -> None:
    """Build now the table of one scan that :func:`firings_between` builds at its first call for
    ``preset`` (tens of ms for a 128-ring sensor): a frame loop calls it before its clock starts, so
    that the first frame does not carry it."""
    if preset.scan.pattern != "rosette":
        for f in range(field_count(preset)):
            _scan_table(preset, f)


_DIGEST_VERSION = "rt-lidar firings 1"
"""Changes whenever :func:`firings_between`'s slicing of the table changes, so that two versions that
would slice differently never find their schedules equal."""


@functools.lru_cache(maxsize=16)
def schedule_digest(preset: SensorPreset) -> str | None:
    """A fingerprint of ``preset``'s firing schedule (its period, slots and the whole table of one
    scan: rings, times, columns, angles, unit directions). Two sides whose digests are equal get the
    same firings from :func:`firings_between` for any interval, so a server need not send a lockstep
    client the rings, times and directions of its rays (docs/extension-call.md). None for the rosette,
    whose firings are computed, not sliced from a table."""
    if preset.scan.pattern == "rosette":
        return None
    sch = _schedule(preset)
    table = _scan_table(preset, 0)
    h = hashlib.sha256(f"{_DIGEST_VERSION}:{sch.period_ns}:{sch.slots}:{sch.all_rings}".encode())
    for arr in (table.ring, table.t_ns, table.column, table.azimuth_deg, table.elevation_deg, table.unit):
        h.update(np.ascontiguousarray(arr).tobytes() if arr is not None else b"-")
    if table.origin is not None:  # presets without beam origins keep the digest they had
        h.update(b"origin:" + np.ascontiguousarray(table.origin).tobytes())
    for f in range(1, field_count(preset)):  # the AT128's other mirror fields (presets with its tables)
        other = _scan_table(preset, f)
        for arr in (other.azimuth_deg, other.elevation_deg, other.unit):
            h.update(f"field {f}:".encode() + np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:32]


def firings_between(preset: SensorPreset, t0_ns: int, t1_ns: int) -> Firings:
    """Every firing with ``t0_ns <= t < t1_ns`` (times before sensor start have none).

    Periodic patterns (all but the rosette) slice a cached table of one whole scan, with directions
    precomputed, instead of recomputing the schedule: the same firings, several times faster. Within
    one scan the rings, angles and directions are read-only views of that table (copy to change them).
    """
    if preset.scan.pattern == "rosette":
        return _compute_firings(preset, t0_ns, t1_ns)
    sch = _schedule(preset)
    tpl = _scan_table(preset, 0)
    fields = field_count(preset)
    t0, t1 = max(int(t0_ns), 0), int(t1_ns)
    pieces: list[tuple[int, slice, np.ndarray | None]] = []
    for s in range(t0 // sch.period_ns, max(t1 - 1, t0) // sch.period_ns + 1):
        start = s * sch.period_ns
        a = int(np.searchsorted(tpl.t_ns, t0 - start, "left"))
        b = int(np.searchsorted(tpl.t_ns, t1 - start, "left"))
        if b > a:
            # scan 0 has no firings of the (non-existent) slots before t = 0
            mask = tpl.column[a:b] + s * sch.slots >= 0 if s == 0 else None
            pieces.append((s, slice(a, b), mask))

    def cat(arr: np.ndarray | str, shift: int = 0, per_slot: bool = False) -> np.ndarray:
        """``arr`` sliced per scan; a field name: that array of each scan's mirror-field table."""
        chunks = []
        for s, sl, mask in pieces:
            src = arr if not isinstance(arr, str) else getattr(_scan_table(preset, s % fields), arr)
            v = src[sl]
            if shift or per_slot:
                v = v + (s * sch.slots if per_slot else s * shift)
            chunks.append(v if mask is None else v[mask])
        if len(chunks) == 1:  # one scan's slice (most frames): no copy of it, a read-only view at most
            return chunks[0]
        return (
            np.concatenate(chunks) if chunks else getattr(tpl, arr)[:0] if isinstance(arr, str) else arr[:0]
        )

    unit = tpl.unit
    assert unit is not None
    by_field = fields > 1
    return Firings(
        ring=cat(tpl.ring),
        t_ns=cat(tpl.t_ns, shift=sch.period_ns),
        azimuth_deg=cat("azimuth_deg" if by_field else tpl.azimuth_deg),
        elevation_deg=cat("elevation_deg" if by_field else tpl.elevation_deg),
        column=cat(tpl.column, per_slot=True),
        unit=cat("unit" if by_field else unit),
        origin=None if tpl.origin is None else cat(tpl.origin),
    )


@functools.lru_cache(maxsize=16)
def _scan_table(preset: SensorPreset, mirror_field: int) -> Firings:
    """Firings of one whole scan past start-up (scan 1; with mirror fields, the first scan from 1 on
    that uses ``mirror_field``) with times and slots relative to that scan. ``mirror_field`` has no
    default and is always passed positionally: ``lru_cache`` keys ``(p,)`` and ``(p, 0)`` apart, and
    two keys would build the same table twice."""
    sch = _schedule(preset)
    n = field_count(preset)
    k = 1 if n == 1 else n + mirror_field
    f = _compute_firings(preset, k * sch.period_ns, (k + 1) * sch.period_ns)
    table = Firings(
        ring=f.ring,
        t_ns=f.t_ns - k * sch.period_ns,
        azimuth_deg=f.azimuth_deg,
        elevation_deg=f.elevation_deg,
        column=f.column - k * sch.slots,
        unit=f.directions(),
        origin=f.origin,
    )
    for arr in (
        table.ring,
        table.t_ns,
        table.azimuth_deg,
        table.elevation_deg,
        table.column,
        table.unit,
        table.origin,
    ):
        if arr is not None:
            arr.setflags(write=False)
    return table


def _compute_firings(preset: SensorPreset, t0_ns: int, t1_ns: int) -> Firings:
    """The schedule evaluated directly for ``[t0_ns, t1_ns)`` (the reference the table is built from)."""
    sch = _schedule(preset)
    t0, t1 = max(int(t0_ns), 0), int(t1_ns)
    n_rings = preset.n_rings
    if sch.state_offsets_ns is not None:
        t, ring, col = _state_firings(sch, t0, t1)
    elif sch.all_rings:
        omin, omax = int(sch.offsets_ns.min()), int(sch.offsets_ns.max())
        k_lo, k_hi = max(_first_slot(t0 - omax, sch), 0), _first_slot(t1 - omin, sch)
        ks = np.arange(k_lo, max(k_hi, k_lo), dtype=np.int64)
        t_slot = ks * sch.period_ns // sch.slots
        t = t_slot[:, None] + sch.offsets_ns[None, :]
        keep = (t >= t0) & (t < t1)
        ring = np.broadcast_to(np.arange(n_rings, dtype=np.int64), t.shape)[keep]
        col = np.broadcast_to(ks[:, None], t.shape)[keep]
        t = t[keep]
        order = np.lexsort((ring, t))
        t, ring, col = t[order], ring[order], col[order]
    else:
        k_lo, k_hi = _first_slot(t0, sch), _first_slot(t1, sch)
        ks = np.arange(k_lo, max(k_hi, k_lo), dtype=np.int64)
        t, col = ks * sch.period_ns // sch.slots, ks
        ring = np.zeros_like(ks)
    az, el = _directions(preset, sch, t, ring, col)
    return Firings(
        ring=ring.astype(np.uint16),
        t_ns=t.astype(np.int64),
        azimuth_deg=az,
        elevation_deg=el,
        column=col.astype(np.int64),
        origin=beam_origins(preset, ring, az),
    )


def _state_firings(sch: _Schedule, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, ring, column) of the firings in ``[t0, t1)`` of a schedule with azimuth states: slot k
    fires the rings of state k mod S, each at its offset in that state, sorted by time then ring."""
    table = sch.state_offsets_ns
    assert table is not None
    fires = table >= 0
    omin, omax = int(table[fires].min()), int(table[fires].max())
    k_lo, k_hi = max(_first_slot(t0 - omax, sch), 0), _first_slot(t1 - omin, sch)
    ks = np.arange(k_lo, max(k_hi, k_lo), dtype=np.int64)
    state = ks % sch.slots % table.shape[0]  # the column within its rotation, so every scan is alike
    t = (ks * sch.period_ns // sch.slots)[:, None] + table[state]
    keep = fires[state] & (t >= t0) & (t < t1)
    ring = np.broadcast_to(np.arange(table.shape[1], dtype=np.int64), t.shape)[keep]
    col = np.broadcast_to(ks[:, None], t.shape)[keep]
    t = t[keep]
    order = np.lexsort((ring, t))
    return t[order], ring[order], col[order]


def firing_states(preset: SensorPreset, column: np.ndarray) -> np.ndarray:
    """(N,) int64 azimuth state of firing slots ``column``: the column within its rotation mod the
    states' count (0 for a preset without states)."""
    sch = _schedule(preset)
    n = 1 if sch.state_offsets_ns is None else sch.state_offsets_ns.shape[0]
    return np.mod(np.mod(np.asarray(column, np.int64), sch.slots), n)


def beam_origins(preset: SensorPreset, ring: np.ndarray, azimuth_deg: np.ndarray) -> np.ndarray | None:
    """(N, 3) float32 sensor-frame origins of firings of ``ring`` at ``azimuth_deg``: each beam's
    :attr:`~SensorPreset.beam_origins_m` turned to its column's azimuth (the firing's azimuth less the
    beam's azimuth offset), as the vendors' decoders turn them; None for a preset without origins."""
    o = preset.beam_origins_m
    if o is None:
        return None
    r = np.asarray(ring, np.int64)
    head = np.radians(np.asarray(azimuth_deg, np.float64) - preset.azimuth_offsets_deg[r])
    c, s = np.cos(head), np.sin(head)
    rad, lat = o[r, 0], o[r, 1]
    return np.stack([c * rad - s * lat, s * rad + c * lat, o[r, 2]], axis=1).astype(np.float32)


def _directions(
    preset: SensorPreset, sch: _Schedule, t: np.ndarray, ring: np.ndarray, col: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Azimuth and elevation (deg) of each firing; ``ring`` is rewritten in place for raster lines."""
    s = preset.scan
    sign = -1.0 if s.rotation_direction == "cw" else 1.0
    elev, az_off = preset.elevations_deg, preset.azimuth_offsets_deg
    if s.pattern == "rotating":
        phase = np.mod(t, sch.period_ns).astype(np.float64) / sch.period_ns
        az = s.scan_start_azimuth_deg + sign * 360.0 * phase + az_off[ring]
        return _wrap(az), elev[ring].astype(np.float64)
    slot = np.mod(col, sch.slots)
    if s.pattern == "mirror":
        assert s.fov_h_deg is not None
        lo = -s.fov_h_deg / 2.0 - float(az_off.min())
        hi = s.fov_h_deg / 2.0 - float(az_off.max())
        frac = slot.astype(np.float64) / max(sch.slots - 1, 1)
        col_az = hi - (hi - lo) * frac if sign < 0 else lo + (hi - lo) * frac
        if has_adjust(preset):  # the AT128's adjust tables, by mirror field and encoder angle
            mirror = np.mod(col // sch.slots, field_count(preset))
            d_az, d_el = mirror_adjust_deg(preset, ring, col_az, mirror)
            return _wrap(col_az + az_off[ring] - d_az), elev[ring] + d_el
        return _wrap(col_az + az_off[ring]), elev[ring].astype(np.float64)
    if s.pattern == "raster":
        assert s.fov_h_deg is not None and s.points_per_line is not None
        ppl = s.points_per_line
        line, j = np.divmod(slot, ppl)
        ring[:] = line
        u = j.astype(np.float64) / (ppl - 1)
        if s.zigzag:
            u = np.where(line % 2 == 1, 1.0 - u, u)
        az = s.fov_h_deg / 2.0 - s.fov_h_deg * u + az_off[line]  # each line sweeps left to right
        return _wrap(az), elev[line].astype(np.float64)
    # rosette: two counter-rotating Risley prisms; the sum of their deflections is the beam's
    # off-axis vector (|d| <= fov/2). It depends on absolute time, so frames never repeat.
    assert s.prism_rpm is not None and s.fov_deg is not None
    ts = t.astype(np.float64) * 1e-9
    w1, w2 = (2.0 * math.pi * rpm / 60.0 for rpm in s.prism_rpm)
    half = math.radians(s.fov_deg / 2.0)
    dy = 0.5 * half * (np.cos(w1 * ts) + np.cos(w2 * ts))
    dz = 0.5 * half * (np.sin(w1 * ts) + np.sin(w2 * ts))
    alpha = np.hypot(dy, dz)
    phi = np.arctan2(dz, dy)
    x, y, z = np.cos(alpha), np.sin(alpha) * np.cos(phi), np.sin(alpha) * np.sin(phi)
    az = np.degrees(np.arctan2(y, x)) + az_off[0]
    el = np.degrees(np.arcsin(np.clip(z, -1.0, 1.0))) + elev[0]
    return _wrap(az), el
