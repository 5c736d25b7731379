"""Our returns -> OSI ``LidarDetectionData`` (``SensorData.feature_data.lidar_sensor``).

One ``LidarDetection`` per return, in the sensor frame of the header's mounting position:

- ``position``: ``Spherical3d`` (distance m, azimuth rad = atan2(y, x), elevation rad = asin(z / r));
- ``position_rmse.distance``: the preset's range accuracy (m);
- ``intensity`` (%): the sensor's intensity over its full scale, x 100;
- ``reflectivity``: the measured Lambertian reflectivity (0..1 for diffuse targets, more for retro);
- ``echo_pulse_width`` (m): the echo's width over the threshold, in range (c / 2 x its time);
- ``existence_probability``: the probability that the receiver detects an echo of that height, Q((T - P) /
  sigma) with the pulse's noise floor sigma (1 with an ideal receiver);
- ``object_id``: the id of the object the return came from (none for clutter: rain, fog, noise);
- ``beam_id``: the ring (laser) that fired; ``radial_velocity`` (m/s, positive towards the sensor): from the
  ray's Doppler shift, lambda / 2 x f_D.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rt_lidar.kernels.ambient import gaussian_tail, receiver_sigma_w
from rt_lidar.kernels.waveform import single_echo_epw_ns
from rt_lidar.osi.frames import NO_ID, SPEED_OF_LIGHT_M_S
from rt_lidar.osi.wire import Rows, field_tag
from rt_lidar.physics.model import SensorPhysics

if TYPE_CHECKING:
    from rt_lidar.osi.model import StepResult

__all__ = ["existence_probability", "fill_detections", "point_pulses", "spherical"]


def spherical(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distance m, azimuth rad, elevation rad) of points (x, y, z fields), float64."""
    x, y, z = (points[k].astype(np.float64) for k in "xyz")
    r = np.sqrt(x * x + y * y + z * z)
    el = np.arcsin(np.divide(z, r, out=np.zeros_like(r), where=r > 0))
    return r, np.arctan2(y, x), el


def point_pulses(points: np.ndarray, t_ns: np.ndarray, ring: np.ndarray) -> np.ndarray:
    """Index of the firing (its time and ring) each point came from."""
    span = int(ring.max()) + 1 if ring.size else 1
    keys = t_ns.astype(np.int64) * span + ring.astype(np.int64)
    order = np.argsort(keys, kind="stable")
    want = points["t"].astype(np.int64) * span + points["ring"].astype(np.int64)
    pos = np.clip(np.searchsorted(keys[order], want), 0, max(keys.size - 1, 0))
    return order[pos] if keys.size else np.zeros(0, np.int64)


def existence_probability(physics: SensorPhysics, power_w: np.ndarray) -> np.ndarray:
    """P(detect) of echoes of height ``power_w``: Q((T - P) / sigma), sigma the receiver's noise with
    the echo's own shot noise (1 everywhere with an ideal receiver)."""
    if not physics.config.receiver_noise or power_w.size == 0:
        return np.ones(power_w.size)
    rx = physics.preset.receiver
    thr = physics.preset.pulse.detection_threshold_w
    dark = float(rx.dark_sigma_w(thr))
    p = power_w.astype(np.float64)
    s = np.maximum(receiver_sigma_w(dark, rx.shot_w, p), 1e-30)
    x = (p - thr) / s
    q = gaussian_tail(np.abs(x))
    return np.clip(np.where(x >= 0, 1.0 - q, q), 0.0, 1.0)


def fill_detections(lidar: Any, done: StepResult, physics: SensorPhysics, sensor_view: Any) -> None:
    """Fill a ``LidarDetectionData`` with the returns of one model step."""
    preset = physics.preset
    res = done.result
    pts = res.points
    view = sensor_view.lidar_sensor_view[0]
    h = lidar.header
    h.measurement_time.CopyFrom(sensor_view.timestamp)
    h.cycle_counter = done.frame
    if view.view_configuration.HasField("mounting_position"):
        h.mounting_position.CopyFrom(view.view_configuration.mounting_position)
    elif sensor_view.HasField("mounting_position"):
        h.mounting_position.CopyFrom(sensor_view.mounting_position)
    if view.view_configuration.HasField("sensor_id"):
        h.sensor_id.CopyFrom(view.view_configuration.sensor_id)
    else:
        h.sensor_id.CopyFrom(sensor_view.sensor_id)
    h.data_qualifier = type(h).DATA_QUALIFIER_AVAILABLE
    h.number_of_valid_detections = int(pts.size)
    if pts.size == 0:
        return
    firings = done.hits.firings
    pulse = point_pulses(pts, firings.t_ns, firings.ring)
    ray = pulse * done.hits.subrays
    lam = preset.optics.wavelength_nm * 1e-9
    v_r = done.rays.doppler_hz[ray] * lam / 2.0
    r, az, el = spherical(pts)
    intensity = np.clip(pts["intensity"].astype(np.float64) / preset.output.intensity_max * 100.0, 0.0, 100.0)
    refl = pts["reflectivity"].astype(np.float64)
    epw_ns = res.epw_ns
    if epw_ns is None and not physics.uses_waveform(done.hits):  # as the physics computes it with epw on
        p = preset.pulse
        epw_ns = single_echo_epw_ns(res.power_w, p.detection_threshold_w, p.width_ns, p.epw_offset_ns)
    epw_m = None
    if epw_ns is not None:
        epw_m = np.maximum(np.asarray(epw_ns, np.float64), 0.0) * 1e-9 * SPEED_OF_LIGHT_M_S / 2.0
    p_exist = existence_probability(physics, res.power_w)
    seg = pts["segment"].astype(np.int64)
    ids = done.object_ids[np.clip(seg, 0, done.object_ids.size - 1)]
    ids = np.where(seg < done.object_ids.size, ids, np.uint64(NO_ID))
    rmse = np.full(pts.size, float(preset.range.accuracy_m))
    lidar.MergeFromString(
        _detections_wire(lidar, p_exist, ids, (r, az, el), rmse, intensity, refl, epw_m, v_r, pts["ring"])
    )


def _detections_wire(
    lidar: Any,
    p_exist: np.ndarray,
    ids: np.ndarray,
    position: tuple[np.ndarray, np.ndarray, np.ndarray],
    rmse: np.ndarray,
    intensity: np.ndarray,
    refl: np.ndarray,
    epw_m: np.ndarray | None,
    v_r: np.ndarray,
    ring: np.ndarray,
) -> bytes:
    """The ``detection`` field of a ``LidarDetectionData`` on the wire, fields in field-number order."""
    probe = lidar.detection.add()
    d = probe.DESCRIPTOR
    sph = probe.position.DESCRIPTOR
    id_tag = field_tag(probe.object_id.DESCRIPTOR, "value", "varint")
    del lidar.detection[:]
    n = p_exist.shape[0]
    pos = Rows(n)
    for name, values in zip(("distance", "azimuth", "elevation"), position, strict=True):
        pos.double(field_tag(sph, name, "double"), values)
    rows = (
        Rows(n)
        .double(field_tag(d, "existence_probability", "double"), p_exist)
        .message(field_tag(d, "object_id", "message"), Rows(n).varint(id_tag, ids.astype(np.uint64)))
        .message(field_tag(d, "position", "message"), pos)
        .message(
            field_tag(d, "position_rmse", "message"),
            Rows(n).double(field_tag(sph, "distance", "double"), rmse),
        )
        .double(field_tag(d, "intensity", "double"), intensity)
        .double(field_tag(d, "reflectivity", "double"), refl)
    )
    if epw_m is not None:
        rows.double(field_tag(d, "echo_pulse_width", "double"), epw_m)
    rows.double(field_tag(d, "radial_velocity", "double"), v_r)
    rows.message(field_tag(d, "beam_id", "message"), Rows(n).varint(id_tag, ring.astype(np.uint64)))
    return Rows(n).message(field_tag(lidar.DESCRIPTOR, "detection", "message"), rows).flat()
