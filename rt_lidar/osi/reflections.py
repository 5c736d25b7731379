"""Our hits <-> OSI ``LidarSensorView`` reflections.

One reflection per ray, in firing order (a pulse cast as a sub-ray bundle gives its sub-rays one after
the other, pulse-major, as :class:`~rt_lidar.pipeline.sources.Hits` holds them); the view configuration
carries each ray's direction (unit vector, sensor frame) and timing (us after the frame's timestamp).
A reflection holds, as OSI defines them:

- ``signal_strength`` (dB): the received power over the emitted peak power, P_r / P_e, of the echo the
  single-ray physics would see on that ray (the radar equation of :class:`~rt_lidar.physics.echo.EchoModel`:
  the material's reflectance at the incidence angle, 1/R^2, clear-air extinction, glass passed on the
  way); where a glass surface's own echo is stronger, the glass is the reflection;
- ``time_of_flight`` (s): 2 R / c;
- ``doppler_shift`` (Hz): 2 v_r / lambda, v_r the closing speed of sensor and surface along the ray
  (the ego's motion, plus a moving object's own translation where known);
- ``normal_to_surface``: the surface's unit normal facing the ray, in the sensor frame;
- ``object_id``: the ground-truth id of the object hit (rt-lidar's segmentation id), MAX(uint64) for none.

A ray that hit nothing has an empty reflection (no field set). Reading back (:func:`view_to_hits`), a
reflection's signal becomes the echo power P_e * 10^(dB/10) that our physics then detects, with noise,
weather, dual returns and the sensor's outputs, through the same model as the in-process pipeline: it
enters as a white Lambertian surface seen head-on with a "transmission" that scales the radar
equation's white-target power to it (so the radar equation is the one of ``EchoModel``, not a second).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.osi.frames import NO_ID, SPEED_OF_LIGHT_M_S, set_mounting
from rt_lidar.osi.wire import Rows, field_tag, length_delimited, read_doubles, read_varints
from rt_lidar.physics.echo import EchoModel
from rt_lidar.physics.glass_ghost import glass_ghost_echoes
from rt_lidar.pipeline.sources import Hits, interpolate_pose_samples
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.unreal_bridge.world.pose import quat_conjugate, quat_rotate

__all__ = ["OSI_MATERIAL", "RayEchoes", "ViewRays", "fill_fov", "fill_lidar_view", "ray_echoes", "read_view"]

OSI_MATERIAL = "osi_reflection"
"""The one material of hits read from OSI reflections: white, Lambertian (reflectance 1 head-on)."""


@dataclass
class RayEchoes:
    """What each ray of a :class:`Hits` reflects, as OSI's reflections say it."""

    hit: np.ndarray  # (rays,) bool
    range_m: np.ndarray  # (rays,) float32, inf = none
    power_ratio: np.ndarray  # (rays,) float64 P_r / P_e
    segment: np.ndarray  # (rays,) uint32


ECHO_FLOOR = 1e-6
"""Reflections weaker than this fraction of the preset's detection threshold are left out (no echo)."""


def ray_echoes(hits: Hits, echo: EchoModel) -> RayEchoes:
    """Each ray's single echo: the surface it ended on (through any glass), or the glass's own mirror
    echo, or the ghost over the glass's mirror, where that is stronger (as the single-ray physics picks)."""
    power, _refl, rng_m, segment, _flags = echo.object_echoes(hits)
    power = power.astype(np.float64)
    gi = np.flatnonzero(hits.glass_material >= 0)
    if gi.size:
        gp, _ = echo.power(
            np.take(hits.glass_range_m, gi),
            np.take(hits.glass_cos, gi),
            np.take(hits.glass_material, gi),
            np.ones(gi.size, np.float32),
        )
        won = gi[np.asarray(gp, np.float64) > power[gi]]
        power[won] = np.asarray(gp, np.float64)[np.asarray(gp, np.float64) > power[gi]]
        rng_m[won] = hits.glass_range_m[won]
        segment[won] = hits.glass_segment[won]
    ghost = glass_ghost_echoes(echo, hits)
    if ghost is not None:  # the pane's mirror ghost, where stronger (:mod:`rt_lidar.physics.glass_ghost`)
        g_r, g_p, _g_s, g_seg = ghost
        won = np.flatnonzero(g_p.astype(np.float64) > power)
        power[won], rng_m[won], segment[won] = g_p[won], g_r[won], g_seg[won]
    # an echo 60 dB below the detection threshold is none: a glancing ray on glass's mirror lobe underflows
    # to 1e-46 of the pulse, which no receiver sees (and would read as -460 dB)
    hit = np.isfinite(rng_m) & (power > ECHO_FLOOR * echo.preset.pulse.detection_threshold_w)
    return RayEchoes(hit, rng_m, power / echo.preset.pulse.peak_power_w, segment)


def _ray_times(hits: Hits) -> np.ndarray:
    t = hits.firings.t_ns
    return np.repeat(t, hits.subrays) if hits.subrays > 1 else t


def _ray_rotations(hits: Hits) -> np.ndarray:
    """(rays, 4) sensor orientation (w, x, y, z) in the world at each ray's firing time."""
    t = hits.firings.t_ns
    if hits.pose_samples is not None and t.size:
        _, quat = interpolate_pose_samples(t, hits.pose_samples)
    elif hits.pose_start is not None:
        quat = np.broadcast_to(np.asarray(hits.pose_start[1], np.float64), (t.size, 4))
    else:
        quat = np.broadcast_to(np.array([1.0, 0.0, 0.0, 0.0]), (t.size, 4))
    return np.repeat(quat, hits.subrays, axis=0) if hits.subrays > 1 else np.asarray(quat)


def sensor_velocity(hits: Hits, t0_ns: int, t1_ns: int) -> np.ndarray:
    """The sensor's world velocity (m/s) over the hits' slice (``hits.interval``, else ``[t0_ns, t1_ns)``),
    from its poses at the slice's ends."""
    if hits.pose_start is None or hits.pose_end is None:
        return np.zeros(3)
    t0, t1 = hits.interval if hits.interval is not None else (t0_ns, t1_ns)
    if t1 <= t0:
        return np.zeros(3)
    return (np.asarray(hits.pose_end[0]) - np.asarray(hits.pose_start[0])) / ((t1 - t0) * 1e-9)


def fill_lidar_view(
    view: Any,
    hits: Hits,
    echo: EchoModel,
    t0_ns: int,
    t1_ns: int,
    mount: tuple[float, ...],
    sensor_id: int = 0,
    segment_velocity: dict[int, np.ndarray] | None = None,
    segment_ids: np.ndarray | None = None,
) -> int:
    """Fill a ``LidarSensorView`` with the view configuration and the reflections of ``hits`` (the
    sim frame ``[t0_ns, t1_ns)``); ``segment_velocity`` gives the world velocity (m/s) of the moving
    objects by segment id; ``segment_ids`` (uint64, indexed by segment) the OSI id of each segment
    (default: the segment itself, 0 = none). Returns the number of rays that reflected."""
    preset = echo.preset
    rays = len(hits)
    cfg = view.view_configuration
    cfg.sensor_id.value = int(sensor_id)
    set_mounting(cfg.mounting_position, mount)
    fill_fov(cfg, preset)
    cfg.number_of_rays_vertical = preset.n_rings
    cfg.number_of_rays_horizontal = max(1, rays // max(1, preset.n_rings * hits.subrays))
    cfg.max_number_of_interactions = 1
    lam = preset.optics.wavelength_nm * 1e-9
    cfg.emitter_frequency = SPEED_OF_LIGHT_M_S / lam
    cfg.num_of_pixels = rays
    d = np.asarray(hits.direction, np.float64)
    timings = np.round((_ray_times(hits) - int(t0_ns)) / 1000.0)
    if timings.size and (timings.min() < 0 or timings.max() > 2**32 - 1):
        raise ConfigError(f"OSI lidar view: ray timings outside uint32 microseconds after {t0_ns} ns")
    cfg.MergeFromString(_rays_wire(cfg, d, timings.astype(np.uint64)))

    echoes = ray_echoes(hits, echo)
    rot = _ray_rotations(hits)
    to_sensor = quat_conjugate(rot)
    d_world = quat_rotate(rot, d)
    v_sensor = sensor_velocity(hits, t0_ns, t1_ns)
    closing = d_world @ v_sensor  # sensor moving along the ray closes on a static surface
    if segment_velocity:
        for seg, vel in segment_velocity.items():
            sel = echoes.segment == seg
            if sel.any():
                closing[sel] -= d_world[sel] @ np.asarray(vel, np.float64)
    doppler = 2.0 * closing / lam
    if hits.normal is not None:
        n = quat_rotate(to_sensor, np.asarray(hits.normal, np.float64))
        n /= np.maximum(np.linalg.norm(n, axis=1), 1e-12)[:, None]
    else:  # a source without normals: the incidence angle is known, its plane is not
        n = -d
    tof = 2.0 * echoes.range_m.astype(np.float64) / SPEED_OF_LIGHT_M_S
    with np.errstate(divide="ignore"):
        db = 10.0 * np.log10(echoes.power_ratio)
    hit = echoes.hit
    if segment_ids is not None:
        at = np.minimum(echoes.segment.astype(np.int64), segment_ids.size - 1)
        obj = np.where(echoes.segment < segment_ids.size, segment_ids[at], np.uint64(NO_ID)).astype(np.uint64)
    else:
        obj = np.where(echoes.segment > 0, echoes.segment.astype(np.uint64), np.uint64(NO_ID))
    view.MergeFromString(_reflections_wire(view, hit, db, tof, doppler, n, obj))
    return int(np.count_nonzero(hit))


def _vectors(tags: tuple[bytes, bytes, bytes], v: np.ndarray) -> Rows:
    rows = Rows(v.shape[0])
    for k in range(3):
        rows.double(tags[k], v[:, k])
    return rows


def _vector_tags(msg: Any) -> tuple[bytes, bytes, bytes]:
    d = msg.DESCRIPTOR
    return field_tag(d, "x", "double"), field_tag(d, "y", "double"), field_tag(d, "z", "double")


def _rays_wire(cfg: Any, d: np.ndarray, timings_us: np.ndarray) -> bytes:
    """``directions`` and ``timings`` of a ``LidarSensorViewConfiguration``, on the wire."""
    desc = cfg.DESCRIPTOR
    vec = _vectors(_vector_tags(cfg.directions.add()), d)
    del cfg.directions[:]
    dirs = Rows(d.shape[0]).message(field_tag(desc, "directions", "message"), vec).flat()
    times = Rows(timings_us.shape[0]).varint(field_tag(desc, "timings", "varint"), timings_us).flat()
    return dirs + times


def _reflections_wire(
    view: Any,
    hit: np.ndarray,
    db: np.ndarray,
    tof: np.ndarray,
    doppler: np.ndarray,
    normal: np.ndarray,
    object_id: np.ndarray,
) -> bytes:
    """The ``reflection`` field of a ``LidarSensorView`` on the wire: one reflection per ray, empty
    where the ray hit nothing."""
    probe = view.reflection.add()
    desc = probe.DESCRIPTOR
    vec_tags = _vector_tags(probe.normal_to_surface)
    id_tag = field_tag(probe.object_id.DESCRIPTOR, "value", "varint")
    del view.reflection[:]
    n = hit.shape[0]
    ident = Rows(n).varint(id_tag, object_id)
    rows = (
        Rows(n)
        .double(field_tag(desc, "signal_strength", "double"), np.where(hit, db, 0.0), hit)
        .double(field_tag(desc, "time_of_flight", "double"), tof, hit)
        .double(field_tag(desc, "doppler_shift", "double"), doppler, hit)
        .message(field_tag(desc, "normal_to_surface", "message"), _vectors(vec_tags, normal), hit)
        .message(field_tag(desc, "object_id", "message"), ident, hit)
    )
    return Rows(n).message(field_tag(view.DESCRIPTOR, "reflection", "message"), rows).flat()


def _field_offset(data: bytes, tag: bytes) -> int | None:
    """Offset of the first field ``tag`` among the top-level fields of a serialized message."""
    pos, end = 0, len(data)
    while pos < end:
        if data.startswith(tag, pos):
            return pos
        key, pos = _varint_at(data, pos)
        kind = key & 7
        if kind == 0:
            _, pos = _varint_at(data, pos)
        elif kind == 1:
            pos += 8
        elif kind == 5:
            pos += 4
        elif kind == 2:
            length, pos = _varint_at(data, pos)
            pos += length
        else:
            return None
    return None


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data):
        b = data[pos]
        value |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            break
        shift += 7
    return value, pos


def _read_directions(cfg: Any) -> np.ndarray:
    """(n, 3) float64 ``directions`` of a view configuration (from their wire form when every one is
    three doubles, else one by one)."""
    n = len(cfg.directions)
    if n == 0:
        return np.zeros((0, 3))
    tags = _vector_tags(cfg.directions[0])
    tag = field_tag(cfg.DESCRIPTOR, "directions", "message")
    data = cfg.SerializeToString()
    first = _field_offset(data, tag)
    raw = (
        np.frombuffer(data, np.uint8)[first : first + 29 * n] if first is not None else np.zeros(0, np.uint8)
    )
    if len(tag) == 1 and all(len(t) == 1 for t in tags) and raw.size == 29 * n:
        rec = raw.reshape(n, 29)
        head = np.array([tag[0], 27, tags[0][0]], np.uint8)
        if (
            (rec[:, :3] == head).all()
            and (rec[:, 11] == tags[1][0]).all()
            and (rec[:, 20] == tags[2][0]).all()
        ):
            at = np.arange(n, dtype=np.int64) * 29
            return np.stack(
                [read_doubles(raw, at + 3), read_doubles(raw, at + 12), read_doubles(raw, at + 21)], 1
            )
    return np.array([(v.x, v.y, v.z) for v in cfg.directions], np.float64).reshape(n, 3)


def _read_reflections(view: Any) -> tuple[np.ndarray, ...]:
    """(hit, time of flight, signal dB, Doppler, object id) of every reflection: from the wire form
    where a reflection is laid out as rt-lidar and protobuf write it (every field, in field order), the
    rest one by one."""
    n = len(view.reflection)
    hit = np.zeros(n, bool)
    tof = np.zeros(n)
    db = np.full(n, -np.inf)
    doppler = np.zeros(n)
    obj = np.full(n, NO_ID, np.uint64)
    if n == 0:
        return hit, tof, db, doppler, obj
    probe = type(view.reflection[0])
    d = probe.DESCRIPTOR
    t_sig, t_tof, t_dop = (
        field_tag(d, f, "double") for f in ("signal_strength", "time_of_flight", "doppler_shift")
    )
    t_nrm, t_obj = field_tag(d, "normal_to_surface", "message"), field_tag(d, "object_id", "message")
    t_xyz = _vector_tags(probe().normal_to_surface)
    t_val = field_tag(probe().object_id.DESCRIPTOR, "value", "varint")
    whole = view.SerializeToString()
    r_tag = field_tag(view.DESCRIPTOR, "reflection", "message")
    first = _field_offset(whole, r_tag)
    data = whole[first:] if first is not None else b""
    runs = length_delimited(data, r_tag) if first is not None else None
    slow = np.ones(n, bool)
    tags = (t_sig, t_tof, t_dop, t_nrm, t_obj, *t_xyz, t_val)
    if runs is not None and all(len(t) == 1 for t in tags):
        start, length = runs
        buf = np.frombuffer(data, np.uint8)
        slow = length > 0  # an empty reflection: the ray hit nothing
        full = length >= 56
        s = np.where(full, start, 0)
        for off, t in (
            (0, t_sig),
            (9, t_tof),
            (18, t_dop),
            (27, t_nrm),
            (29, t_xyz[0]),
            (38, t_xyz[1]),
            (47, t_xyz[2]),
        ):
            full &= buf[np.minimum(s + off, buf.size - 1)] == t[0]
        full &= buf[np.minimum(s + 28, buf.size - 1)] == 27
        with_id = full & (length > 56)
        s_id = np.where(with_id, s + 56, 0)
        lim = np.minimum(s_id + 2, buf.size - 1)
        with_id &= (buf[np.minimum(s_id, buf.size - 1)] == t_obj[0]) & (buf[lim] == t_val[0])
        with_id &= buf[np.minimum(s_id + 1, buf.size - 1)].astype(np.int64) == length - 58
        value, vlen = read_varints(buf, s_id + 3, length - 59)
        with_id &= vlen == length - 59
        fast = (full & (length == 56)) | with_id
        at = start[fast]
        hit[fast] = True
        db[fast] = read_doubles(buf, at + 1)
        tof[fast] = read_doubles(buf, at + 10)
        doppler[fast] = read_doubles(buf, at + 19)
        obj[with_id] = value[with_id]
        slow &= ~fast
    for i in np.flatnonzero(slow).tolist():
        r = view.reflection[i]
        if r.HasField("time_of_flight") and r.HasField("signal_strength"):
            hit[i] = True
            tof[i] = r.time_of_flight
            db[i] = r.signal_strength
        if r.HasField("doppler_shift"):
            doppler[i] = r.doppler_shift
        if r.HasField("object_id") and r.object_id.HasField("value"):
            obj[i] = r.object_id.value
    return hit, tof, db, doppler, obj


def fill_fov(cfg: Any, preset: SensorPreset) -> None:
    """Set a (lidar) sensor view configuration's fields of view (rad) from the preset."""
    s = preset.scan
    elev = preset.elevations_deg
    fov_v = s.fov_v_deg or s.fov_deg or float(elev.max() - elev.min()) or 0.1
    fov_h = s.fov_h_deg or s.fov_deg or 360.0
    cfg.field_of_view_horizontal = float(np.radians(fov_h))
    cfg.field_of_view_vertical = float(np.radians(fov_v))


@dataclass
class ViewRays:
    """A ``LidarSensorView``'s rays as arrays (one row per reflection)."""

    direction: np.ndarray  # (rays, 3) float64 unit vectors, sensor frame
    timing_us: np.ndarray  # (rays,) int64
    hit: np.ndarray  # (rays,) bool: the reflection has a time of flight and a signal
    range_m: np.ndarray  # (rays,) float64, inf = none
    power_ratio: np.ndarray  # (rays,) float64 P_r / P_e, 0 = none
    doppler_hz: np.ndarray  # (rays,) float64, 0 where not given
    object_id: np.ndarray  # (rays,) uint64, NO_ID = none


def read_view(view: Any, what: str = "LidarSensorView") -> ViewRays:
    """The rays of a ``LidarSensorView``; a view whose directions, timings and reflections do not
    line up is a :class:`ConfigError` naming the counts."""
    cfg = view.view_configuration
    n = len(view.reflection)
    if len(cfg.directions) != n or len(cfg.timings) != n:
        raise ConfigError(
            f"{what}: {n} reflections but {len(cfg.directions)} view_configuration.directions and "
            f"{len(cfg.timings)} timings (OSI: one of each per ray)"
        )
    direction = _read_directions(cfg)
    norm = np.linalg.norm(direction, axis=1)
    if n and (norm < 1e-9).any():
        bad = int(np.argmin(norm))
        raise ConfigError(f"{what}: view_configuration.directions has a zero vector (ray {bad})")
    direction /= np.maximum(norm, 1e-12)[:, None]
    hit, tof, db, doppler, obj = _read_reflections(view)
    hit &= np.isfinite(db) & np.isfinite(tof) & (tof > 0)
    range_m = np.where(hit, tof * SPEED_OF_LIGHT_M_S / 2.0, np.inf)
    power = np.where(hit, np.power(10.0, np.where(hit, db, 0.0) / 10.0), 0.0)
    return ViewRays(
        direction,
        np.asarray(cfg.timings, np.int64).reshape(n),
        hit,
        range_m,
        power,
        doppler,
        obj,
    )
