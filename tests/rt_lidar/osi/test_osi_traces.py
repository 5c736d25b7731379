"""The osi-sensorview / osi-sensordata sinks: traces that OSI's own reader (osi3trace) reads, with the
fields, units and frames OSI defines."""

from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest

pytest.importorskip("osi3trace", reason="ASAM OSI's Python bindings (osi-python) are not installed")

from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_sensorview_pb2 import SensorView
from osi3trace.osi_trace import OSITrace

from rt_lidar.cli.main import main
from rt_lidar.errors import ConfigError
from rt_lidar.osi.frames import NO_ID, SPEED_OF_LIGHT_M_S, quat_from_rpy, rpy_from_quat
from rt_lidar.osi.ground_truth import HOST_VEHICLE_ID
from rt_lidar.osi.trace import OsiTraceWriter, read_trace
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks import read_kitti_bin

C = SPEED_OF_LIGHT_M_S


def _views(demo):
    return list(OSITrace(str(demo / "sensorview.osi"), "SensorView"))


def test_trace_is_size_prefixed_little_endian(tmp_path):
    sv = SensorView()
    sv.timestamp.seconds, sv.timestamp.nanos = 3, 5
    path = tmp_path / "t.osi"
    w = OsiTraceWriter(path)
    w.write(sv)
    w.write(sv.SerializeToString())
    w.close()
    raw = path.read_bytes()
    body = sv.SerializeToString()
    assert raw == (struct.pack("<I", len(body)) + body) * 2
    got = list(OSITrace(str(path), "SensorView"))
    assert [(m.timestamp.seconds, m.timestamp.nanos) for m in got] == [(3, 5), (3, 5)]
    path.write_bytes(raw[:-2])
    with pytest.raises(ConfigError, match="ends inside a message"):
        read_trace(path, SensorView)
    with pytest.raises(ConfigError, match=r"\.osi"):
        OsiTraceWriter(tmp_path / "t.mcap")


def test_rpy_quaternion_round_trip():
    for rpy in [(0.1, -0.2, 2.5), (0.0, 0.0, -3.0), (-0.4, 0.3, 0.7)]:
        assert np.allclose(rpy_from_quat(quat_from_rpy(*rpy)), rpy, atol=1e-12)
    # yaw of +90 deg turns x into y (z up, right-handed)
    q = quat_from_rpy(0.0, 0.0, math.pi / 2)
    assert np.allclose(q, [math.cos(math.pi / 4), 0, 0, math.sin(math.pi / 4)])


def _car_extent() -> tuple[float, float, float]:
    """The street's car mesh's extent along x, y and z (metres), built as the world builds it."""
    from rt_lidar.unreal_bridge.world.geometry import MATERIAL_NAMES, MeshBuilder
    from rt_lidar.unreal_bridge.world.props import add_car

    b = MeshBuilder()
    add_car(b, next(m for m in MATERIAL_NAMES if m.endswith("paint")))
    v = b.build("car", 0).vertices
    return tuple(float(e) for e in v.max(axis=0) - v.min(axis=0))  # type: ignore[return-value]


def test_sensorview_trace_has_ground_truth_and_reflections(osi_demo):
    views = _views(osi_demo)
    summary = json.loads((osi_demo / "summary.json").read_text())
    assert len(views) == summary["sim_frames"] == 2
    preset = load_preset("VLP-16")
    for k, sv in enumerate(views):
        assert sv.timestamp.seconds * 10**9 + sv.timestamp.nanos == k * 50_000_000  # frame starts, 20 Hz
        assert sv.host_vehicle_id.value == HOST_VEHICLE_ID
        assert sv.mounting_position.position.z == pytest.approx(1.8)  # the street scene's mount
        gt = sv.global_ground_truth
        ids = [o.id.value for o in gt.moving_object] + [o.id.value for o in gt.stationary_object]
        assert len(ids) == len(set(ids))
        ego = next(o for o in gt.moving_object if o.id.value == HOST_VEHICLE_ID)
        # the street's ego drives at 10 m/s along x from (0, -1.75); its box stands on its origin
        assert ego.base.velocity.x == pytest.approx(10.0)
        assert ego.base.position.x == pytest.approx(10.0 * k * 0.05)
        assert ego.base.position.z == pytest.approx(ego.base.dimension.height / 2)
        cars = [o for o in gt.moving_object if o.id.value != HOST_VEHICLE_ID]
        length, width, height = _car_extent()  # each car's box is its mesh's, mirrors and trim included
        assert len(cars) == 3
        for o in cars:
            got = (o.base.dimension.length, o.base.dimension.width, o.base.dimension.height)
            assert got == pytest.approx((length, width, height), abs=1e-3)
        assert all(abs(o.base.velocity.x) < 30 and o.base.velocity.y == 0 for o in cars)  # m/s, no wrap jumps
        assert {round(o.base.velocity.x, 6) for o in cars} != {0.0}
        assert len(gt.stationary_object) > 100
        env = gt.environmental_conditions
        assert env.precipitation == env.PRECIPITATION_NONE and env.fog == env.FOG_EXCELLENT_VISIBILITY

        (lv,) = sv.lidar_sensor_view
        cfg = lv.view_configuration
        n = len(lv.reflection)
        assert n == cfg.num_of_pixels == len(cfg.directions) == len(cfg.timings) == 28928 // 2
        assert cfg.emitter_frequency == pytest.approx(C / 903e-9, rel=2e-3)
        assert cfg.field_of_view_vertical == pytest.approx(math.radians(30.0))
        d = np.array([(v.x, v.y, v.z) for v in cfg.directions])
        assert np.allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-6)
        timings = np.array(cfg.timings)
        assert timings.min() >= 0 and timings.max() < 50_000  # us within the 50 ms frame
        assert np.all(np.diff(timings) >= 0)
        hits = [r for r in lv.reflection if r.HasField("time_of_flight")]
        assert 0.5 * n < len(hits) < n
        rng = np.array([r.time_of_flight for r in hits]) * C / 2
        assert rng.min() > 0.3 and rng.max() <= preset.range.max_m
        db = np.array([r.signal_strength for r in hits])
        assert np.all(db < -20) and np.all(db > -200)  # P_r / P_e: tiny fractions
        nrm = np.array([(r.normal_to_surface.x, r.normal_to_surface.y, r.normal_to_surface.z) for r in hits])
        assert np.allclose(np.linalg.norm(nrm, axis=1), 1.0, atol=1e-5)
        hit_d = d[[i for i, r in enumerate(lv.reflection) if r.HasField("time_of_flight")]]
        assert np.all(np.einsum("ij,ij->i", nrm, hit_d) <= 1e-6)  # normals face the sensor
        assert {r.object_id.value for r in hits} <= set(ids) | {NO_ID}


def test_doppler_of_the_road_is_the_ego_speed_along_the_ray(osi_demo):
    sv = _views(osi_demo)[1]
    lv = sv.lidar_sensor_view[0]
    lam = C / lv.view_configuration.emitter_frequency
    road = [
        (r, d)
        for r, d in zip(lv.reflection, lv.view_configuration.directions, strict=True)
        if r.HasField("time_of_flight") and r.normal_to_surface.z > 0.999
    ]
    assert len(road) > 1000
    for r, d in road[::97]:
        # static surface, sensor at 10 m/s along x (no turn): closing speed 10 * d.x
        assert r.doppler_shift == pytest.approx(2 * 10.0 * d.x / lam, rel=1e-6, abs=1.0)


def test_sensordata_trace_is_the_demo_scan(osi_demo):
    data = list(OSITrace(str(osi_demo / "sensordata.osi"), "SensorData"))
    assert len(data) == 2
    preset = load_preset("VLP-16")
    xyz, inten = [], []
    for k, sd in enumerate(data):
        (ld,) = sd.feature_data.lidar_sensor
        assert ld.header.cycle_counter == k
        assert ld.header.number_of_valid_detections == len(ld.detection) > 10000
        assert ld.header.data_qualifier == ld.header.DATA_QUALIFIER_AVAILABLE
        for det in ld.detection:
            p = det.position
            xyz.append(
                (
                    p.distance * math.cos(p.elevation) * math.cos(p.azimuth),
                    p.distance * math.cos(p.elevation) * math.sin(p.azimuth),
                    p.distance * math.sin(p.elevation),
                )
            )
            inten.append(det.intensity)
        dets = ld.detection
        assert all(0.0 <= d.intensity <= 100.0 and 0.0 <= d.existence_probability <= 1.0 for d in dets)
        assert all(0 <= d.beam_id.value < 16 for d in dets)
        epw = np.array([d.echo_pulse_width for d in dets])  # m: the width over the threshold, in range
        assert epw.min() >= 0 and 0.3 < np.median(epw) < 5 and epw.max() < 20
        assert all(d.position_rmse.distance == preset.range.accuracy_m for d in dets)
    # the KITTI scan of the same run holds the same points (the scan is these two frames)
    scan = read_kitti_bin(next((osi_demo / "scans").glob("*.bin")))
    a = np.array(xyz)
    assert a.shape[0] == scan.shape[0]
    key_a = np.lexsort(np.round(a, 3).T[::-1])
    key_b = np.lexsort(np.round(scan[:, :3].astype(np.float64), 3).T[::-1])
    assert np.allclose(a[key_a], scan[key_b, :3], atol=2e-4)
    # intensity (%) is the sensor's intensity over its full scale (KITTI stores that fraction)
    assert np.allclose(np.array(inten)[key_a], scan[key_b, 3].astype(np.float64) * 100, atol=1e-3)


def test_sink_options_are_checked(tmp_path, capsys):
    rc = main(
        [
            "demo", "--in-process", "--preset", "VLP-16", "--frames", "1", "--quiet", "--out",
            str(tmp_path / "d"), "--sink", f"osi-sensorview:{tmp_path}/a.osi,bogus=1",
        ]
    )  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert "osi-sensorview" in err and "bogus" in err and len(err.strip().splitlines()) == 1
    rc = main(
        [
            "demo", "--in-process", "--preset", "VLP-16", "--frames", "1", "--quiet", "--out",
            str(tmp_path / "d2"), "--sink", f"osi-sensordata:{tmp_path}/a.trace",
        ]
    )  # fmt: skip
    assert rc == 2
    assert ".osi" in capsys.readouterr().err


def test_static_objects_can_be_left_out(tmp_path):
    out = tmp_path / "d"
    rc = main(
        [
            "demo", "--in-process", "--preset", "VLP-16", "--frames", "1", "--quiet", "--out", str(out),
            "--no-scans", "--sink", f"osi-sensorview:{out}/sv.osi,static=0,sensor_id=7",
        ]
    )  # fmt: skip
    assert rc == 0
    for sv in read_trace(out / "sv.osi", SensorView):
        assert len(sv.global_ground_truth.stationary_object) == 0
        assert sv.sensor_id.value == 7 == sv.lidar_sensor_view[0].view_configuration.sensor_id.value
    assert SensorData  # imported for the module's readers


def test_mcap_traces_follow_osi_multi_channel_format(osi_demo, tmp_path):
    """The same run into .mcap: OSI's reader finds the channel and metadata the format asks for, and the
    messages are those of the .osi traces."""
    from mcap.reader import make_reader

    out = tmp_path / "d"
    rc = main(
        [
            "demo", "--in-process", "--preset", "VLP-16", "--frames", "1", "--quiet", "--out", str(out),
            "--no-scans", "--sink", f"osi-sensorview:{out}/sv.mcap",
            "--sink", f"osi-sensordata:{out}/sd.mcap",
        ]
    )  # fmt: skip
    assert rc == 0
    for name, kind, topic in (
        ("sv", "SensorView", "OSMPSensorViewIn"),
        ("sd", "SensorData", "OSMPSensorDataOut"),
    ):
        trace = OSITrace(str(out / f"{name}.mcap"), kind)
        assert trace.reader.get_available_topics() == [f"rt-lidar.{topic}"]
        (meta,) = [m for m in trace.reader.get_file_metadata() if m.name == "net.asam.osi.trace"]
        for key in (
            "version",
            "min_osi_version",
            "max_osi_version",
            "min_protobuf_version",
            "max_protobuf_version",
        ):
            assert len(meta.metadata[key].split(".")) == 3
        channel = trace.reader.get_channel_metadata()
        assert channel["net.asam.osi.trace.channel.osi_version"] == meta.metadata["version"]
        assert "net.asam.osi.trace.channel.protobuf_version" in channel
        got = list(trace)
        single = "sensorview.osi" if name == "sv" else "sensordata.osi"
        want = list(OSITrace(str(osi_demo / single), kind))
        assert [m.SerializeToString() for m in got] == [m.SerializeToString() for m in want]
        with open(out / f"{name}.mcap", "rb") as f:
            reader = make_reader(f)
            summary = reader.get_summary()
            assert summary is not None and summary.chunk_indexes  # indexed, messages in chunks
            (schema,) = summary.schemas.values()
            assert schema.name == f"osi3.{kind}" and schema.encoding == "protobuf"
            times = [m.log_time for _, _, m in reader.iter_messages()]
            assert times == [m.timestamp.seconds * 10**9 + m.timestamp.nanos for m in got]
    argv = ["osi", "run", "--preset", "VLP-16", "--in", str(out / "sv.mcap"), "--out", str(out / "m.osi")]
    rc = main(argv)
    assert rc == 0
    model_frames = read_trace(out / "m.osi", SensorData)
    sink_frames = read_trace(out / "sd.mcap", SensorData)
    assert len(model_frames) == len(sink_frames) == 2
    for a, b in zip(model_frames, sink_frames, strict=True):  # the model's returns: the run's, to float noise
        da, db = a.feature_data.lidar_sensor[0].detection, b.feature_data.lidar_sensor[0].detection
        assert len(da) == len(db)
        assert np.allclose([d.position.distance for d in da], [d.position.distance for d in db], atol=1e-5)


def test_a_sink_that_never_got_frames_says_so(tmp_path):
    from rt_lidar.sinks.base import SinkContext, make_sink

    sink = make_sink(f"osi-sensordata:{tmp_path}/empty.osi")
    sink.open(SinkContext(preset=load_preset("VLP-16")))
    with pytest.warns(UserWarning, match="trace is empty"):
        sink.close()
    assert (tmp_path / "empty.osi").read_bytes() == b""
