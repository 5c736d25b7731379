"""The NumPy wire encoder and decoder agree with protobuf's own API, on every mix of fields."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("osi3")

from osi3.osi_featuredata_pb2 import LidarDetectionData
from osi3.osi_sensorview_pb2 import LidarSensorView

from rt_lidar.osi.detections import _detections_wire
from rt_lidar.osi.frames import NO_ID
from rt_lidar.osi.reflections import _reflections_wire, read_view


def _random_view(rng: np.random.Generator, n: int) -> LidarSensorView:
    """Reflections built one attribute at a time, with random fields left out."""
    view = LidarSensorView()
    for i in range(n):
        d = rng.normal(size=3)
        view.view_configuration.directions.add(x=d[0], y=d[1], z=d[2])
        view.view_configuration.timings.append(int(rng.integers(0, 2**32)))
        r = view.reflection.add()
        if rng.random() < 0.2:
            continue  # nothing hit
        if rng.random() < 0.9:
            r.signal_strength = float(rng.uniform(-120, -30))
        if rng.random() < 0.9:
            r.time_of_flight = float(rng.uniform(1e-9, 1e-6))
        if rng.random() < 0.8:
            r.doppler_shift = float(rng.normal() * 1e7)
        if rng.random() < 0.8:
            r.normal_to_surface.x = float(rng.normal())
            if rng.random() < 0.9:
                r.normal_to_surface.y, r.normal_to_surface.z = float(rng.normal()), float(rng.normal())
        if rng.random() < 0.8:
            r.object_id.value = [0, 5, 300, 2**40, NO_ID][int(rng.integers(0, 5))]
        if i % 7 == 0 and r.HasField("object_id"):
            r.object_id.Clear()  # an id message without its value
    return view


def test_read_view_matches_the_protobuf_api():
    rng = np.random.default_rng(4)
    view = _random_view(rng, 400)
    rays = read_view(view)
    for i, r in enumerate(view.reflection):
        hit = r.HasField("time_of_flight") and r.HasField("signal_strength")
        assert rays.hit[i] == hit
        if hit:
            assert rays.range_m[i] == pytest.approx(r.time_of_flight * 299_792_458.0 / 2)
            assert rays.power_ratio[i] == pytest.approx(10 ** (r.signal_strength / 10))
        assert rays.doppler_hz[i] == (r.doppler_shift if r.HasField("doppler_shift") else 0.0)
        has_id = r.HasField("object_id") and r.object_id.HasField("value")
        assert rays.object_id[i] == (r.object_id.value if has_id else NO_ID)
        d = view.view_configuration.directions[i]
        v = np.array([d.x, d.y, d.z])
        assert np.allclose(rays.direction[i], v / np.linalg.norm(v))
    assert list(rays.timing_us) == list(view.view_configuration.timings)


def test_reflections_wire_is_what_protobuf_builds():
    rng = np.random.default_rng(5)
    n = 300
    hit = rng.random(n) < 0.7
    db, tof, dop = rng.uniform(-100, -40, n), rng.uniform(1e-8, 1e-6, n), rng.normal(size=n) * 1e7
    nrm = rng.normal(size=(n, 3))
    obj = rng.choice(np.array([1, 127, 128, 2**35, NO_ID], np.uint64), n)
    fast = LidarSensorView()
    fast.MergeFromString(_reflections_wire(fast, hit, db, tof, dop, nrm, obj))
    slow = LidarSensorView()
    for i in range(n):
        r = slow.reflection.add()
        if hit[i]:
            r.signal_strength, r.time_of_flight, r.doppler_shift = db[i], tof[i], dop[i]
            r.normal_to_surface.x, r.normal_to_surface.y, r.normal_to_surface.z = nrm[i]
            r.object_id.value = int(obj[i])
    assert fast == slow
    assert fast.SerializeToString() == slow.SerializeToString()
    back = read_view(_with_directions(fast, n))
    assert np.array_equal(back.hit, hit) and np.array_equal(back.object_id[hit], obj[hit])


def _with_directions(view: LidarSensorView, n: int) -> LidarSensorView:
    for _ in range(n):
        view.view_configuration.directions.add(x=1.0, y=0.0, z=0.0)
        view.view_configuration.timings.append(0)
    return view


def test_detections_wire_is_what_protobuf_builds():
    rng = np.random.default_rng(6)
    n = 200
    cols = [rng.random(n) for _ in range(9)]
    ids = rng.choice(np.array([3, 200, NO_ID], np.uint64), n)
    ring = rng.integers(0, 128, n).astype(np.uint16)
    fast = LidarDetectionData()
    pos = (cols[0], cols[1], cols[2])
    fast.MergeFromString(
        _detections_wire(fast, cols[3], ids, pos, cols[4], cols[5], cols[6], cols[7], cols[8], ring)
    )
    slow = LidarDetectionData()
    for i in range(n):
        d = slow.detection.add()
        d.existence_probability = cols[3][i]
        d.object_id.value = int(ids[i])
        d.position.distance, d.position.azimuth, d.position.elevation = pos[0][i], pos[1][i], pos[2][i]
        d.position_rmse.distance = cols[4][i]
        d.intensity, d.reflectivity, d.echo_pulse_width = cols[5][i], cols[6][i], cols[7][i]
        d.radial_velocity = cols[8][i]
        d.beam_id.value = int(ring[i])
    assert fast == slow
