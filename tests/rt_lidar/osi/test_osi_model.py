"""rt-lidar as an OSI sensor model: the model on SensorViews (ours and hand-made), the OSMP FMU run by
fmpy (the public FMI runner) and by a host process without Python."""

from __future__ import annotations

import ctypes
import math
import shutil
import subprocess
import warnings
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("osi3")
pytest.importorskip("fmpy")

from fmpy import extract, read_model_description
from fmpy.fmi2 import FMU2Slave
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_sensorview_pb2 import SensorView
from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

from rt_lidar.cli.main import main
from rt_lidar.osi.frames import NO_ID, SPEED_OF_LIGHT_M_S, set_timestamp
from rt_lidar.osi.model import OsiLidarModel
from rt_lidar.osi.trace import read_trace
from rt_lidar.sensor.presets import load_preset

OSMP_NS = "{http://xsd.pmsf.net/OSISensorModelPackaging}"
HERE = Path(__file__).resolve().parent


def _detections(sd: SensorData) -> list:
    (ld,) = sd.feature_data.lidar_sensor
    return list(ld.detection)


def _same_returns(got: SensorData, want: SensorData) -> None:
    a, b = _detections(got), _detections(want)
    assert len(a) == len(b) > 10000
    for name, tol in (("distance", 1e-5), ("azimuth", 1e-6), ("elevation", 1e-6)):
        x = np.array([getattr(d.position, name) for d in a])
        y = np.array([getattr(d.position, name) for d in b])
        assert np.allclose(x, y, atol=tol), name
    for name, tol in (("reflectivity", 1e-5), ("echo_pulse_width", 1e-4)):
        assert np.allclose([getattr(d, name) for d in a], [getattr(d, name) for d in b], atol=tol), name
    # the echo's power crosses the view as P_r / P_e in dB and comes back through the single-precision
    # hit arrays: a reading on a reporting step's boundary may land one step (100 / 255 %) apart
    off = np.abs(np.array([d.intensity for d in a]) - np.array([d.intensity for d in b]))
    assert off.max() <= 100.0 / 255.0 + 1e-6, "intensity"
    assert np.count_nonzero(off > 1e-3) <= len(a) // 5000, "intensity"
    assert [d.beam_id.value for d in a] == [d.beam_id.value for d in b]
    assert [d.object_id.value for d in a] == [d.object_id.value for d in b]
    assert np.allclose([d.radial_velocity for d in a], [d.radial_velocity for d in b], atol=1e-6)
    assert np.allclose([d.existence_probability for d in a], [d.existence_probability for d in b], atol=1e-5)


class _Osmp:
    """An OSMP co-simulation master in a few lines over fmpy's FMU2Slave."""

    def __init__(self, fmu: Path) -> None:
        self.md = read_model_description(str(fmu), validate=True)
        self.vr = {v.name: v.valueReference for v in self.md.modelVariables}
        self.slave = FMU2Slave(
            guid=self.md.guid,
            unzipDirectory=extract(str(fmu)),
            modelIdentifier=self.md.coSimulation.modelIdentifier,
            instanceName="lidar",
        )
        self._keep: list[ctypes.Array] = []

    def refs(self, name: str) -> list[int]:
        return [self.vr[f"{name}.base.lo"], self.vr[f"{name}.base.hi"], self.vr[f"{name}.size"]]

    def get(self, name: str) -> bytes:
        lo, hi, size = self.slave.getInteger(self.refs(name))
        return ctypes.string_at(((hi & 0xFFFFFFFF) << 32) | (lo & 0xFFFFFFFF), size)

    def put(self, name: str, data: bytes) -> None:
        buf = ctypes.create_string_buffer(data, len(data))
        self._keep = [buf]
        a = ctypes.addressof(buf)
        lo, hi = ctypes.c_int32(a & 0xFFFFFFFF).value, ctypes.c_int32(a >> 32).value
        self.slave.setInteger(self.refs(name), [lo, hi, len(data)])


def test_model_description_follows_osmp(vlp16_fmu):
    md = read_model_description(str(vlp16_fmu), validate=True)
    assert md.fmiVersion == "2.0" and md.coSimulation is not None
    by_name = {v.name: v for v in md.modelVariables}
    for prefix, causality in (
        ("OSMPSensorViewIn", "input"),
        ("OSMPSensorDataOut", "output"),
        ("OSMPSensorViewInConfigRequest", "calculatedParameter"),
        ("OSMPSensorViewInConfig", "parameter"),
    ):
        for role in ("base.lo", "base.hi", "size"):
            v = by_name[f"{prefix}.{role}"]
            assert v.type == "Integer" and v.causality == causality
    assert by_name["seed"].causality == "parameter"
    with zipfile.ZipFile(vlp16_fmu) as z:
        names = set(z.namelist())
        root = ET.fromstring(z.read("modelDescription.xml"))
    assert f"binaries/linux64/{md.coSimulation.modelIdentifier}.so" in names
    tool = root.find("VendorAnnotations/Tool")
    assert tool is not None and tool.get("name") == "net.pmsf.osmp"
    osmp = tool.find(f"{OSMP_NS}osmp")
    assert osmp is not None and osmp.get("version") and osmp.get("osi-version", "").startswith("3.")
    types = {}
    for sv in root.iter("ScalarVariable"):
        ann = sv.find(f"Annotations/Tool/{OSMP_NS}osmp-binary-variable")
        if ann is not None:
            assert sv.get("name") == f"{ann.get('name')}.{ann.get('role')}"
            types[ann.get("name")] = ann.get("mime-type")
    assert "type=SensorView;" in types["OSMPSensorViewIn"]
    assert "type=SensorData;" in types["OSMPSensorDataOut"]
    assert "type=SensorViewConfiguration;" in types["OSMPSensorViewInConfig"]
    assert all(m.startswith("application/x-open-simulation-interface;") for m in types.values())


def test_fmu_on_our_sensorview_gives_the_demo_returns(osi_demo, vlp16_fmu):
    """The SensorView trace our sink wrote, fed to our FMU in fmpy: each step's SensorData holds the
    returns the demo's own frames gave (its osi-sensordata trace, whose points are the demo's scan)."""
    views = read_trace(osi_demo / "sensorview.osi", SensorView)
    want = read_trace(osi_demo / "sensordata.osi", SensorData)
    m = _Osmp(vlp16_fmu)
    s = m.slave
    s.instantiate()
    s.setupExperiment(startTime=0.0)
    s.enterInitializationMode()
    request = SensorViewConfiguration.FromString(m.get("OSMPSensorViewInConfigRequest"))
    (lidar,) = request.lidar_sensor_view_configuration
    preset = load_preset("VLP-16")
    assert lidar.num_of_pixels == len(lidar.directions) == len(lidar.timings) == 28928  # one scan's rays
    assert max(lidar.timings) < 100_000  # us: one 10 Hz rotation
    assert request.update_cycle_time.nanos == 50_000_000
    assert request.range == preset.range.max_m
    request.range = 80.0  # the environment answers with what it can do
    config = request.SerializeToString()
    m.put("OSMPSensorViewInConfig", config)
    s.exitInitializationMode()
    # OSMP: once a configuration is set, the request is that configuration
    assert SensorViewConfiguration.FromString(m.get("OSMPSensorViewInConfigRequest")).range == 80.0
    t = 0.0
    for view, expected in zip(views, want, strict=True):
        m.put("OSMPSensorViewIn", view.SerializeToString())
        s.doStep(currentCommunicationPoint=t, communicationStepSize=0.05)
        got = SensorData.FromString(m.get("OSMPSensorDataOut"))
        assert got.timestamp == view.timestamp
        _same_returns(got, expected)
        t += 0.05
    s.terminate()
    s.freeInstance()


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler for the test host")
def test_fmu_runs_in_a_host_without_python(osi_demo, vlp16_fmu, tmp_path):
    host = tmp_path / "fmu_host"
    subprocess.run(["cc", "-O1", "-o", str(host), str(HERE / "fmu_host.c"), "-ldl"], check=True)
    unzipped = Path(extract(str(vlp16_fmu), unzipdir=str(tmp_path / "fmu")))
    md = read_model_description(str(vlp16_fmu))
    lib = unzipped / "binaries" / "linux64" / f"{md.coSimulation.modelIdentifier}.so"
    view = read_trace(osi_demo / "sensorview.osi", SensorView)[0]
    (tmp_path / "sv.bin").write_bytes(view.SerializeToString())
    done = subprocess.run(
        [
            str(host),
            str(lib),
            str(unzipped / "resources"),
            md.guid,
            str(tmp_path / "sv.bin"),
            str(tmp_path / "sd.bin"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    got = SensorData.FromString((tmp_path / "sd.bin").read_bytes())
    _same_returns(got, read_trace(osi_demo / "sensordata.osi", SensorData)[0])


def test_osi_run_cli_matches_the_sensordata_trace(osi_demo, tmp_path, capsys):
    out = tmp_path / "model.osi"
    rc = main(
        ["osi", "run", "--preset", "VLP-16", "--in", str(osi_demo / "sensorview.osi"), "--out", str(out)]
    )
    assert rc == 0
    assert "2 SensorView" in capsys.readouterr().out
    for got, want in zip(
        read_trace(out, SensorData), read_trace(osi_demo / "sensordata.osi", SensorData), strict=True
    ):
        _same_returns(got, want)


def _white_target_view(preset_name: str, range_m: float) -> tuple[SensorView, OsiLidarModel]:
    """A hand-made view (not our schedule): a white Lambertian target head-on at ``range_m``, a ray
    that hit nothing and one whose echo is far too weak."""
    model = OsiLidarModel(preset_name, seed=3)
    unit = float(model.physics.unit_power(np.array([range_m], np.float32))[0])
    db = 10 * math.log10(unit / model.preset.pulse.peak_power_w)
    sv = SensorView()
    set_timestamp(sv.timestamp, 2_000_000_000)
    lv = sv.lidar_sensor_view.add()
    cfg = lv.view_configuration
    el = math.radians(5.0)
    for az in (0.3, 0.31, 0.32):
        cfg.directions.add(x=math.cos(el) * math.cos(az), y=math.cos(el) * math.sin(az), z=math.sin(el))
        cfg.timings.append(7)
    cfg.num_of_pixels = 3
    lam = preset_wavelength = model.preset.optics.wavelength_nm * 1e-9
    assert preset_wavelength > 0
    r = lv.reflection.add(signal_strength=db, time_of_flight=2 * range_m / SPEED_OF_LIGHT_M_S)
    r.doppler_shift = 2 * 3.0 / lam  # closing at 3 m/s
    r.normal_to_surface.x = -1.0
    r.object_id.value = 4242
    lv.reflection.add()
    weak = lv.reflection.add(signal_strength=-250.0, time_of_flight=2 * range_m / SPEED_OF_LIGHT_M_S)
    weak.object_id.value = 7
    return sv, model


def test_model_on_a_foreign_raster_reads_signal_as_received_power():
    sv, model = _white_target_view("VLP-16", 10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean view: nothing taken on the user's behalf
        sd = model.step(sv)
    (det,) = _detections(sd)
    assert det.position.distance == pytest.approx(10.0, abs=0.15)
    assert det.position.azimuth == pytest.approx(0.3, abs=1e-6)
    assert det.position.elevation == pytest.approx(math.radians(5.0), abs=1e-4)
    assert det.reflectivity == pytest.approx(1.0, rel=0.1)  # a white target measures ~1
    assert det.intensity == pytest.approx(100.0 / 255 * 100, rel=0.1)  # VLP-16: 100 of 255 for white
    assert det.object_id.value == 4242
    assert det.radial_velocity == pytest.approx(3.0)
    assert det.existence_probability > 0.999
    preset = load_preset("VLP-16")
    ring = int(np.argmin(np.abs(preset.elevations_deg - 5.0)))
    assert det.beam_id.value == ring
    assert sd.feature_data.lidar_sensor[0].header.measurement_time.seconds == 2
    # the further the same signal, the lower the measured reflectivity: power is what the view says
    sv2, model2 = _white_target_view("VLP-16", 10.0)
    sv2.lidar_sensor_view[0].reflection[0].signal_strength -= 10.0  # a tenth of the power
    (det2,) = _detections(model2.step(sv2))
    assert det2.reflectivity == pytest.approx(0.1, rel=0.15)


def test_weather_comes_from_environmental_conditions(osi_demo):
    view = read_trace(osi_demo / "sensorview.osi", SensorView)[1]
    clear = OsiLidarModel("VLP-16")
    clear.frame = 1
    clear_dets = _detections(clear.step(view))
    env = view.global_ground_truth.environmental_conditions
    del env.source_reference[:]  # someone else's conditions: OSI's classes only
    env.fog = env.FOG_THICK  # visibility 50-200 m
    foggy = OsiLidarModel("VLP-16")
    foggy.frame = 1
    with pytest.warns(UserWarning, match="FOG_THICK read as fog_visibility_m=100"):
        dets = _detections(foggy.step(view))
    assert foggy.physics.config.weather is not None and foggy.physics.config.weather.fog_visibility_m == 100.0
    objects = [d for d in dets if d.object_id.value != NO_ID]
    fog = [d for d in dets if d.object_id.value == NO_ID]  # returns off the fog itself, near the sensor
    assert len(objects) < 0.97 * len(clear_dets) and len(fog) > 100
    assert np.median([d.position.distance for d in fog]) < 10.0
    far_clear = max(d.position.distance for d in clear_dets)
    assert max(d.position.distance for d in objects) < far_clear


def test_exact_weather_round_trips_through_the_sensorview(tmp_path):
    out = tmp_path / "rain"
    rc = main(
        [
            "demo", "--in-process", "--preset", "VLP-16", "--frames", "1", "--quiet", "--out", str(out),
            "--rain", "12.5", "--no-scans",
            "--sink", f"osi-sensorview:{out}/sv.osi", "--sink", f"osi-sensordata:{out}/sd.osi",
        ]
    )  # fmt: skip
    assert rc == 0
    views = read_trace(out / "sv.osi", SensorView)
    env = views[0].global_ground_truth.environmental_conditions
    assert env.precipitation == env.PRECIPITATION_HEAVY  # 8.1-34 mm/h
    assert "rain_mm_h=12.5" in env.source_reference[0].identifier
    model = OsiLidarModel("VLP-16")
    for view, want in zip(views, read_trace(out / "sd.osi", SensorData), strict=True):
        got = model.step(view)
        _same_returns(got, want)
    assert model.physics.config.weather is not None and model.physics.config.weather.rain_mm_h == 12.5


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["osi", "fmu", "--preset", "no-such-lidar", "--out", "x.fmu"], "no-such-lidar"),
        (["osi", "fmu", "--preset", "VLP-16", "--out", "x.zip"], ".fmu"),
        (["osi", "fmu", "--preset", "VLP-16", "--out", "x.fmu", "--rain", "900"], "--rain"),
    ],
)
def test_fmu_cli_errors_are_one_line(argv, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_ground_truth_only_views_are_cast_by_the_model(osi_demo):
    """An environment without a lidar ray tracer sends ground truth only: the model casts its schedule
    into the objects' boxes; returns name ground-truth objects and carry their relative speed."""
    views = read_trace(osi_demo / "sensorview.osi", SensorView)
    model = OsiLidarModel("VLP-16")
    for view in views:
        gt = view.global_ground_truth
        ids = {o.id.value for o in gt.moving_object} | {o.id.value for o in gt.stationary_object}
        del view.lidar_sensor_view[:]
        with (
            pytest.warns(UserWarning, match="casts its rays into the ground truth")
            if model.frame == 0
            else _quiet()
        ):
            dets = _detections(model.step(view))
        assert len(dets) > 5000
        got = {d.object_id.value for d in dets}
        assert got <= ids | {NO_ID} and len(got & ids) > 10
        assert all(d.object_id.value != gt.host_vehicle_id.value for d in dets)
        cars = {o.id.value: o for o in gt.moving_object if o.id.value != gt.host_vehicle_id.value}
        host = next(o for o in gt.moving_object if o.id.value == gt.host_vehicle_id.value)
        on_cars = [d for d in dets if d.object_id.value in cars]
        for d in on_cars[:: max(1, len(on_cars) // 50)]:
            car = cars[d.object_id.value]
            p = d.position
            ray = np.array(
                [
                    math.cos(p.elevation) * math.cos(p.azimuth),
                    math.cos(p.elevation) * math.sin(p.azimuth),
                    math.sin(p.elevation),
                ]
            )
            closing = ray @ (
                np.array([host.base.velocity.x, host.base.velocity.y, host.base.velocity.z])
                - np.array([car.base.velocity.x, car.base.velocity.y, car.base.velocity.z])
            )
            assert d.radial_velocity == pytest.approx(
                closing, rel=1e-6, abs=1e-6
            )  # no turn: sensor axes = world's


def _quiet():
    import contextlib

    return contextlib.nullcontext()


def test_sub_ray_bundles_and_dual_returns_through_osi(tmp_path):
    """Sub-rays are OSI rays of their own (pulse-major); the model with the run's beam gives its dual
    returns, but for the pulses whose glass echo or ghost was one of them (OSI has one reflection a ray)."""
    out = tmp_path / "dual"
    rc = main(
        [
            "demo", "--in-process", "--preset", "VLP-16", "--frames", "1", "--quiet",
            "--out", str(out), "--no-scans", "--sub-rays", "7", "--return-mode", "dual",
            "--sink", f"osi-sensorview:{out}/sv.osi", "--sink", f"osi-sensordata:{out}/sd.osi",
        ]
    )  # fmt: skip
    assert rc == 0
    views = read_trace(out / "sv.osi", SensorView)
    assert len(views[0].lidar_sensor_view[0].reflection) == 7 * 14464
    argv = ["osi", "run", "--preset", "VLP-16", "--in", str(out / "sv.osi"), "--out", str(out / "m.osi")]
    assert main([*argv, "--sub-rays", "7", "--return-mode", "dual"]) == 0
    model_frames = read_trace(out / "m.osi", SensorData)
    sink_frames = read_trace(out / "sd.osi", SensorData)
    seconds = 0
    for got, want in zip(model_frames, sink_frames, strict=True):
        a, b = _detections(got), _detections(want)
        # 0.5 % before issue 40 traced the ghost over each pane's mirror: a ray with a surface echo and a
        # ghost gives dual mode two echoes, OSI one reflection (as for a glass's own echo): 0.9 % now
        assert abs(len(a) - len(b)) <= 0.015 * len(b)
        pulses = {(d.beam_id.value, round(d.position.azimuth, 3)) for d in b}
        seconds += len(b) - len(pulses)
    assert seconds > 100  # pulses with two returns
    # frame 0 (the half turn behind, where glass is barely seen): the same returns one for one. Where a
    # pulse's return count differs, the later pulses' noise draws shift: frame 1 is compared by count only
    # (since issue 40's pane ghosts, a few pulses behind, through the windows of cars there, differ too:
    # 8 of 12,803 returns; after the first of them the noise draws shift, so each pulse's first return is
    # compared within the range noise)
    # 0.3 % since the rooms behind building windows return (docs/realism.md change 76): a sub-ray through
    # a building's pane at a slant gives dual mode the pane's echo and the room's 4-14 m behind it, OSI's
    # LidarSensorView one reflection (its Reflection has no ray index: reflections pair with the view's
    # rays by place, one each), so the model keeps the stronger; frame 0 29 of 13,595 returns, was 0.2 %
    a, b = _detections(model_frames[0]), _detections(sink_frames[0])
    assert abs(len(a) - len(b)) <= 0.003 * len(b)

    def first(ds: list) -> dict[tuple[int, float], float]:
        out: dict[tuple[int, float], float] = {}
        for d in ds:
            out.setdefault((d.beam_id.value, round(d.position.azimuth, 4)), d.position.distance)
        return out

    fa, fb = first(a), first(b)
    common = fa.keys() & fb.keys()
    assert len(common) > 0.99 * len(fb)
    assert np.mean([abs(fa[k] - fb[k]) < 0.2 for k in common]) > 0.98


def test_fmu_settings_and_seed_parameter(osi_demo, tmp_path):
    from rt_lidar.osi.fmu_runtime import FmuModel

    fmu = tmp_path / "dual.fmu"
    argv = ["osi", "fmu", "--preset", "VLP-16", "--out", str(fmu), "--sub-rays", "7", "--return-mode", "dual"]
    assert main([*argv, "--rain", "5", "--step", "0.1"]) == 0
    unzipped = Path(extract(str(fmu), unzipdir=str(tmp_path / "x")))
    model = FmuModel(unzipped / "resources")
    assert model.model.physics.sub_rays == 7 and model.model.physics.return_mode == "dual"
    assert (
        model.model.physics.config.weather is not None and model.model.physics.config.weather.rain_mm_h == 5
    )
    assert read_model_description(str(fmu)).defaultExperiment.stepSize == "0.1"

    view = read_trace(osi_demo / "sensorview.osi", SensorView)[0].SerializeToString()
    ranges = []
    for seed in (0, 0, 5):
        m = _Osmp(_built_vlp16(tmp_path))
        m.slave.instantiate()
        m.slave.setInteger([m.vr["seed"]], [seed])
        m.slave.setupExperiment(startTime=0.0)
        m.slave.enterInitializationMode()
        m.slave.exitInitializationMode()
        m.put("OSMPSensorViewIn", view)
        m.slave.doStep(currentCommunicationPoint=0.0, communicationStepSize=0.05)
        ranges.append(
            [d.position.distance for d in _detections(SensorData.FromString(m.get("OSMPSensorDataOut")))]
        )
        m.slave.terminate()
        m.slave.freeInstance()
    assert ranges[0] == ranges[1]  # same seed, same returns
    assert ranges[0] != ranges[2]  # the seed parameter reaches the model's noise


def _built_vlp16(tmp_path: Path) -> Path:
    path = tmp_path / "seeded.fmu"
    if not path.exists():
        assert main(["osi", "fmu", "--preset", "VLP-16", "--out", str(path)]) == 0
    return path
