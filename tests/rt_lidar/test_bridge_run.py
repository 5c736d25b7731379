"""The controller against the embedded AirSim-compatible server, over real loopback sockets."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest
from old_servers import WithoutBeamCall
from peers import run_peer_json
from pypcd4 import PointCloud
from scenes import targets_scene, wall_scene

from rt_lidar.bridge.hits import hits_from_wire
from rt_lidar.bridge.recover import recover_hits
from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.config import BridgeConfig, RunConfig, SunConfig
from rt_lidar.errors import RtLidarError
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.points import PointFlag
from rt_lidar.sensor.beam import BeamConfig, subray_pattern
from rt_lidar.sensor.presets import load_preset, preset_from_dict, preset_to_dict
from rt_lidar.sensor.scan_pattern import firings_between, firings_per_scan
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.session.live import run_controller
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer
from rt_lidar.unreal_bridge.world import World, street_scene

ROOT = Path(__file__).resolve().parents[2]


def _serve(scene, preset_name="VLP-16", paused=True):
    sim = EmbeddedSim(World(scene), load_preset(preset_name), paused=paused)
    server = AirSimServer(sim, port=0)
    server.start()
    return server


def test_lockstep_1000_frames_have_no_skipped_or_repeated_sector(tmp_path):
    preset = load_preset("VLP-16")
    server = _serve(wall_scene(20.0))
    try:
        with AirSimClient(port=server.port) as client:
            source = BridgeSource(client, preset, lockstep=True, sim_hz=100.0)
            physics = SensorPhysics.from_preset(preset, source.material_names)
            pipe = Pipeline(preset, source, physics, sim_hz=100.0, start_ns=source.start_ns, prefetch=True)
            fired: list[int] = []
            for _ in range(1000):
                fired.extend(scan.fired for scan in pipe.step())
            pipe.close()
        assert source.stats.frames >= 1000
        assert source.stats.sector_mismatches == 0, source.stats.mismatch_detail
        # 1000 frames of 10 ms = 10 s = 100 rotations; every complete one holds every firing once
        assert len(fired) in (99, 100)
        assert fired[1:] == [firings_per_scan(preset)] * (len(fired) - 1)
    finally:
        server.close()


def test_stock_getlidardata_is_recovered_to_the_extension_hits():
    preset = load_preset("VLP-16")
    server = _serve(street_scene(0))
    try:
        with AirSimClient(port=server.port) as client:
            client.sim_pause(True)
            client.rt_lidar_get_hits()
            client.get_lidar_data()
            client.sim_continue_for_time(0.1)
            truth = hits_from_wire(client.rt_lidar_get_hits())
            stock = client.get_lidar_data()
        t0, t1 = int(truth.firings.t_ns.min()), int(truth.firings.t_ns.max()) + 1
        local = firings_between(preset, t0, t1)
        rec = recover_hits(stock.points, stock.segmentation, local, preset)
        np.testing.assert_array_equal(rec.firings.t_ns, truth.firings.t_ns)
        hit_true = np.isfinite(truth.range_m)
        hit_rec = np.isfinite(rec.range_m)
        assert (hit_true == hit_rec).mean() > 0.995
        both = hit_true & hit_rec
        np.testing.assert_allclose(rec.range_m[both], truth.range_m[both], atol=1e-3)
        assert (rec.segment[both] == truth.segment[both]).mean() > 0.995
        # normals from the organised range image agree with the exact ones on most surfaces
        err = np.abs(rec.cos_incidence[both] - truth.cos_incidence[both])
        # 0.045 on the street before issue 40 made cars hollow behind their glazing (the cabins' faces
        # are small and at all angles: neighbours' ranges there say little of a face's normal); 0.053 after;
        # 0.080 once issue 40 parked the cars nose to tail and gave their cabins seats (more of the view
        # is small car faces)
        assert np.median(err) < 0.09
    finally:
        server.close()


def test_killing_the_server_mid_run_ends_cleanly_with_complete_scans(tmp_path):
    server = _serve(wall_scene(15.0))
    port = server.port

    def kill_later():
        while len(list((tmp_path / "scans").glob("*.pcd"))) < 3:
            time.sleep(0.01)
        server.close()

    killer = threading.Thread(target=kill_later)
    killer.start()
    t0 = time.perf_counter()
    with pytest.raises(RtLidarError, match=rf"server at 127.0.0.1:{port} went away after \d+ scans"):
        run_controller(
            RunConfig(
                command="run",
                preset="VLP-16",
                frames=10_000,
                out=str(tmp_path),
                progress=False,
                bridge=BridgeConfig(airsim=f"127.0.0.1:{port}", lockstep=True, timeout_s=5.0),
            )
        )
    killer.join()
    assert time.perf_counter() - t0 < 30
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert "went away" in summary["stopped_early"]
    pcds = sorted((tmp_path / "scans").glob("*.pcd"))
    assert len(pcds) >= 3
    assert not list((tmp_path / "scans").glob("*.part"))
    for p in pcds:
        assert PointCloud.from_path(p).points > 1000


def test_demo_pipeline_through_the_bridge_equals_in_process():
    """The same scene and seed through the server gives the same scan as casting in-process."""
    preset = load_preset("VLP-16")
    server = _serve(wall_scene(18.0))
    try:
        with AirSimClient(port=server.port) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            assert source.start_ns == 0
            physics = SensorPhysics.from_preset(preset, source.material_names)
            pipe = Pipeline(preset, source, physics, sim_hz=20.0, seed=3)
            bridged = pipe.scans(2)[1].points
    finally:
        server.close()
    direct = build_pipeline(preset, wall_scene(18.0), sim_hz=20.0, seed=3).pipeline.scans(2)[1].points
    assert bridged.tobytes() == direct.tobytes()


PEER_SCRIPT = r"""
import json, sys, contextlib, io
mod = __import__(sys.argv[1])
c = mod.CarClient(port=int(sys.argv[2]), timeout_value=30)
with contextlib.redirect_stdout(io.StringIO()):
    c.confirmConnection()
c.simPause(True)
c.simContinueForTime(0.1)
lidar = c.getLidarData()
T = mod.ImageType
imgs = c.simGetImages([mod.ImageRequest("0", T.Scene), mod.ImageRequest("0", T.DepthPlanar, True, False)])
p0 = c.simGetVehiclePose()
c.simContinueForTime(1.0)
p1 = c.simGetVehiclePose()
state = c.getCarState()
print(json.dumps({"n": len(lidar.point_cloud), "seg": len(getattr(lidar, "segmentation", []) or []),
  "img": [[r.width, r.height, bytes(r.image_data_uint8[:4]).hex(), len(r.image_data_float)] for r in imgs],
  "x0": p0.position.x_val, "x1": p1.position.x_val, "speed": state.speed}))
"""


@pytest.mark.parametrize("module", ["airsim", "cosysairsim"])
def test_stock_clients_drive_the_embedded_street(module):
    server = _serve(street_scene(0), "VLP-16")
    try:
        seen = run_peer_json("airsim", ["-c", PEER_SCRIPT, module, str(server.port)])
    finally:
        server.close()
    # 0.1 s of a 10 Hz VLP-16 = one rotation of 28,800 rays, most of which hit the street
    assert 20_000 * 3 < seen["n"] <= 28_800 * 3
    assert module == "cosysairsim" or seen["seg"] == seen["n"] // 3
    assert seen["img"][0][:3] == [640, 360, "89504e47"]
    assert seen["img"][1][3] == 640 * 360
    assert seen["x1"] - seen["x0"] == pytest.approx(10.0, abs=0.5)  # the ego drives at ~10 m/s
    assert seen["speed"] == pytest.approx(10.0, abs=0.5)


def test_with_reconnect_the_controller_waits_for_the_server_and_goes_on(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    preset = load_preset("VLP-16")
    first = AirSimServer(EmbeddedSim(World(wall_scene(15.0)), preset, paused=True), port=port)
    first.start()
    second: list[AirSimServer] = []

    def restart_later():
        while len(list((tmp_path / "scans").glob("*.pcd"))) < 3:
            time.sleep(0.01)
        first.close()
        time.sleep(1.0)
        server = AirSimServer(EmbeddedSim(World(wall_scene(15.0)), preset, paused=True), port=port)
        server.start()
        second.append(server)

    helper = threading.Thread(target=restart_later)
    helper.start()
    try:
        summary = run_controller(
            RunConfig(
                command="run",
                preset="VLP-16",
                frames=8,
                out=str(tmp_path),
                progress=False,
                bridge=BridgeConfig(
                    airsim=f"127.0.0.1:{port}",
                    lockstep=True,
                    timeout_s=5.0,
                    reconnect=True,
                    reconnect_timeout_s=20.0,
                ),
            )
        )
    finally:
        helper.join()
        for srv in second:
            srv.close()
    assert summary["frames"] == 8
    assert summary["parts"] == 2
    # summary.json describes the whole run and every part, not the first part only
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["frames"] == 8 and on_disk["scans_written"] == 8 and on_disk["reconnects"] == 1
    first = json.loads((tmp_path / "part01" / "summary.json").read_text())  # part 1 kept its own
    listed = on_disk["part_summaries"]
    assert [p["dir"] for p in listed] == [".", "part01"]
    assert sum(p["frames"] for p in listed) == 8 and listed[1]["frames"] == first["frames"]
    assert (
        listed[0]["stopped_early"] and listed[1]["stopped_early"] is None and on_disk["stopped_early"] is None
    )
    assert on_disk["sim_time_s"] == pytest.approx(sum(p["sim_time_s"] for p in listed))
    assert on_disk["bridge"]["frames"] == sum(p["bridge"]["frames"] for p in listed)
    pcds = sorted(tmp_path.glob("**/scans/*.pcd"))
    assert len(pcds) == 8
    for p in pcds:
        assert PointCloud.from_path(p).points > 1000


# -- sub-ray bundles over the bridge (rtLidarGetBeamHits) ----------------------------------------------


def _two_planes():
    """A 1 m concrete panel at 12 m before a wall at 20 m: the panel's edges give two returns a pulse."""
    scene = wall_scene(20.0)
    panel = targets_scene(["concrete"], 12.0, width_m=1.0)
    return dataclasses.replace(panel, objects=[*panel.objects, *scene.objects])


def _off_centre_table_preset():
    """VLP-16 with a measured (table) beam profile whose centre is off the axis: sub-ray 0 is not the
    pulse's direction, so the bridge must carry the pulse directions."""
    d = preset_to_dict(load_preset("VLP-16"))
    d["optics"].update(
        beam_profile="table",
        beam_profile_h_mrad=[-1.0, 0.0, 3.0],
        beam_profile_v_mrad=[-1.0, 1.0],
        beam_profile_table=[0.2, 1.0, 0.3, 0.2, 1.0, 0.3],
    )
    return preset_from_dict(d, "table.toml")


def _bridged_scans(backend, preset, beam, scans=2, use_extension=None, sun=None):
    server = AirSimServer(backend, port=0)
    server.start()
    try:
        with AirSimClient(port=server.port) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0, use_extension=use_extension)
            pipe = bridge_pipeline(source, 20.0, seed=3, beam=beam, sun=sun)
            try:
                return pipe.scans(scans), source.stats
            finally:
                pipe.close()
    finally:
        server.close()


def _in_process_scans(preset, scene, beam, scans=2, sun=None):
    sun = sun or SunConfig()
    cfg = PhysicsConfig(beam=beam, sun_illuminance_lux=sun.lux, sun_direction=sun.direction)
    return build_pipeline(preset, scene, sim_hz=20.0, seed=3, physics=cfg).pipeline.scans(scans)


DUAL7 = BeamConfig(sub_rays=7, return_mode="dual")


@pytest.mark.parametrize(
    ("scene", "preset", "beam"),
    [
        (_two_planes, lambda: load_preset("VLP-16"), DUAL7),
        (lambda: street_scene(0), lambda: load_preset("VLP-16"), DUAL7),  # moving ego, cars, glass
        (_two_planes, _off_centre_table_preset, BeamConfig(sub_rays=10, return_mode="dual", epw=True)),
    ],
    ids=["two-planes", "street", "table-profile"],
)
def test_sub_rays_over_the_bridge_give_the_in_process_points_byte_for_byte(scene, preset, beam, recwarn):
    p = preset()
    bridged, stats = _bridged_scans(EmbeddedSim(World(scene()), p, paused=True), p, beam)
    assert not [w for w in recwarn if "sub-rays" in str(w.message)]
    assert stats.sub_rays == beam.sub_rays and stats.sector_mismatches == 0
    direct = _in_process_scans(p, scene(), beam)
    for b, d in zip(bridged, direct, strict=True):
        assert b.points.size > 1000
        assert b.points.tobytes() == d.points.tobytes()
        assert (b.fired, b.dropped) == (d.fired, d.dropped)
        assert b.extras.keys() == d.extras.keys()
        for k in b.extras:
            assert b.extras[k].tobytes() == d.extras[k].tobytes()


def test_the_two_plane_scene_gives_dual_returns_over_the_bridge():
    preset = load_preset("VLP-16")
    beam = BeamConfig(sub_rays=7, return_mode="dual")
    (scan,), stats = _bridged_scans(EmbeddedSim(World(_two_planes()), preset, paused=True), preset, beam, 1)
    pts = scan.points
    second = pts[pts["return_id"] == 1]
    assert stats.sub_rays == 7 and second.size > 0
    assert scan.fired - scan.dropped == int((pts["return_id"] == 0).sum()) < pts.size
    assert np.all(np.sqrt(second["x"] ** 2 + second["y"] ** 2 + second["z"] ** 2) > 12.5)  # the wall


@pytest.mark.parametrize("use_extension", [None, False], ids=["older-server", "stock-calls"])
def test_sub_rays_from_a_server_without_the_call_warn_and_cast_one_ray_a_pulse(use_extension):
    preset = load_preset("VLP-16")
    backend = WithoutBeamCall(EmbeddedSim(World(_two_planes()), preset, paused=True))
    with pytest.warns(UserWarning, match=r"no rtLidarGetBeamHits .* 7 sub-rays .* not applied"):
        bridged, stats = _bridged_scans(backend, preset, DUAL7, use_extension=use_extension)
    assert stats.sub_rays == 1 and stats.extension is (use_extension is None)
    assert all(s.points.size > 1000 for s in bridged)
    if use_extension is None:  # exactly the in-process single-ray pipeline in the same return mode
        direct = _in_process_scans(preset, _two_planes(), BeamConfig(sub_rays=1, return_mode="dual"))
        assert [s.points.tobytes() for s in bridged] == [s.points.tobytes() for s in direct]


# sha256[:16] of the msgpack of a 2-argument rtLidarGetHits answer (two-plane scene, VLP-16, 10 ms),
# computed at git fbc8de0, before rtLidarGetBeamHits existed (cb69cc1853b37eb9); re-pinned when issue 40
# added the materials interior and car_glass, which every answer's info.materials lists: with those two
# names taken out of the list the answer still hashes to cb69cc1853b37eb9; re-pinned again when issue 40
# added car_glass_ir and car_glass_privacy to the street's materials (with those two names taken out the
# answer hashes to 4d226a704e2e3a86, the pin before); re-pinned when issue 40 gave cars' cabins their own
# material car_interior and added the metallic paint car_paint_silver (docs/realism.md changes 23 and
# 28: with those names taken out the answer hashes to c3b9bd8c2ed66f56, the pin before)
HITS_ANSWER_V1 = "19552246546a8595"


def _raw_hits(client, method="rtLidarGetHits", *extra):
    return msgpack.packb(client.call(method, "Lidar1", "Car1", *extra), use_bin_type=True)


def test_a_two_argument_rtlidargethits_answer_is_unchanged():
    preset = load_preset("VLP-16")
    pattern = subray_pattern(preset, 7)
    beam = {"sub_rays": {"offsets_rad": pattern.offsets_rad.tolist(), "weights": pattern.weights.tolist()}}
    answers = []
    for first in ("rtLidarGetHits", "rtLidarGetBeamHits"):
        server = AirSimServer(EmbeddedSim(World(_two_planes()), preset, paused=True), port=0)
        server.start()
        try:
            with AirSimClient(port=server.port) as client:
                _raw_hits(client)
                client.sim_continue_for_time(0.01)
                one = _raw_hits(client, first, *([beam] if first == "rtLidarGetBeamHits" else []))
                client.sim_continue_for_time(0.01)
                answers.append((one, _raw_hits(client)))
        finally:
            server.close()
    (plain, plain_next), (bundled, after_bundle) = answers
    assert hashlib.sha256(plain).hexdigest()[:16] == HITS_ANSWER_V1
    assert after_bundle == plain_next  # a beam call leaves nothing behind for the 2-argument call
    assert len(bundled) > 6 * len(plain)


def test_sub_rays_in_free_run_follow_the_running_sim():
    preset = load_preset("VLP-16")
    server = AirSimServer(EmbeddedSim(World(wall_scene(15.0)), preset, paused=False), port=0)
    server.start()
    try:
        with AirSimClient(port=server.port) as client:
            source = BridgeSource(client, preset, lockstep=False, sim_hz=50.0)
            pipe = bridge_pipeline(source, 50.0, beam=DUAL7)
            sectors = []
            pipe.on_sector = lambda pts, t0, t1: sectors.append(pts)
            for _ in range(2):  # (each frame casts what the sim swept meanwhile: keep it short)
                pipe.step()
            pipe.close()
    finally:
        server.close()
    assert source.stats.sub_rays == 7 and source.stats.frames >= 2
    assert sum(s.size for s in sectors) > 0
    assert set(np.unique(np.concatenate(sectors)["return_id"]).tolist()) <= {0, 1}


# -- sunlight over the bridge (rtLidarGetBeamHits with a sun) --------------------------------------------

LOW_SUN = SunConfig(100_000.0, (-1.0, 0.0, 0.05))  # behind the sensor: lights the wall it looks at
ONE_RAY = BeamConfig(sub_rays=1)


def _sunlit_wall():
    return wall_scene(30.0, material="concrete")


def _assert_same_scans(bridged, direct):
    for b, d in zip(bridged, direct, strict=True):
        assert b.points.size > 1000 and b.points.tobytes() == d.points.tobytes()
        assert (b.fired, b.dropped) == (d.fired, d.dropped)


@pytest.mark.parametrize(
    ("scene", "beam", "sun"),
    [
        (_sunlit_wall, ONE_RAY, LOW_SUN),
        (_two_planes, DUAL7, LOW_SUN),
        (lambda: street_scene(0), None, SunConfig(100_000.0)),  # the scene's own sun: the server's
        (lambda: street_scene(0), DUAL7, SunConfig(60_000.0, (0.3, -0.5, 0.4))),
    ],
    ids=["one-ray", "sub-rays", "scene-sun-street", "sub-rays-street"],
)
def test_sunlight_over_the_bridge_gives_the_in_process_points_byte_for_byte(scene, beam, sun, recwarn):
    preset = load_preset("VLP-16")
    backend = EmbeddedSim(World(scene()), preset, paused=True)
    bridged, stats = _bridged_scans(backend, preset, beam, sun=sun)
    assert not [w for w in recwarn if "sun" in str(w.message) or "sub-rays" in str(w.message)]
    assert stats.sun and stats.sub_rays == (beam.sub_rays if beam else 1) and stats.sector_mismatches == 0
    expect = sun.direction or backend.world.scene.sun_direction
    np.testing.assert_allclose(stats.sun_direction, np.asarray(expect) / np.linalg.norm(expect), atol=1e-7)
    direct = _in_process_scans(preset, scene(), beam, sun=sun)
    _assert_same_scans(bridged, direct)
    night = _in_process_scans(preset, scene(), beam)
    assert all(b.points.tobytes() != n.points.tobytes() for b, n in zip(bridged, night, strict=True))


def test_the_sun_over_the_bridge_adds_false_detections_and_blinds_near_the_sun():
    preset = load_preset("VLP-16")
    (night,), _ = _bridged_scans(EmbeddedSim(World(_sunlit_wall()), preset, paused=True), preset, None, 1)
    (day,), stats = _bridged_scans(
        EmbeddedSim(World(_sunlit_wall()), preset, paused=True), preset, None, 1, sun=LOW_SUN
    )
    night_noise = int(((night.points["flags"] & PointFlag.AMBIENT_NOISE) != 0).sum())
    assert stats.sun and night_noise < 0.001 * night.fired  # the dark noise's rare false detections
    pts = day.points
    noise = (pts["flags"] & PointFlag.AMBIENT_NOISE) != 0
    assert noise.sum() > 10 + 5 * night_noise and night.points.tobytes() != pts.tobytes()
    az = np.degrees(np.arctan2(pts["y"], pts["x"]))
    el = np.degrees(np.arctan2(pts["z"], np.hypot(pts["x"], pts["y"])))
    near_sun = (np.abs(np.abs(az) - 180.0) < 1.0) & (np.abs(el - 2.9) < 1.0)  # 2.9 deg = atan(0.05)
    assert near_sun.sum() > 0 and noise[near_sun].all()  # blinded: only noise where the sun is
    front = pts[(pts["x"] > 0) & ~noise]  # the sunlit wall ahead: its ranges jitter more
    assert float(front["x"].std()) > float(night.points[night.points["x"] > 0]["x"].std())


class _WithoutSun(WithoutBeamCall):
    """A server that has ``rtLidarGetBeamHits`` but predates its sun entry (it casts no sun)."""

    def lidar_beam_hits(self, lidar, vehicle, offsets_rad, weights, sun=None):
        return self._sim.lidar_beam_hits(lidar, vehicle, offsets_rad, weights)


@pytest.mark.filterwarnings("ignore:the AirSim server offers no rtLidarGetBeamHits")
@pytest.mark.parametrize(
    ("backend", "use_extension", "beam"),
    [(WithoutBeamCall, None, None), (WithoutBeamCall, False, DUAL7), (_WithoutSun, None, DUAL7)],
    ids=["no-call", "stock-calls", "call-without-sun"],
)
def test_sunlight_from_a_server_without_it_warns_and_goes_on_without_sun(backend, use_extension, beam):
    preset = load_preset("VLP-16")
    sim = backend(EmbeddedSim(World(_sunlit_wall()), preset, paused=True))
    with pytest.warns(UserWarning, match=r"sun cosines, which this AirSim server does not send.*not applied"):
        bridged, stats = _bridged_scans(sim, preset, beam, use_extension=use_extension, sun=LOW_SUN)
    assert not stats.sun and stats.sun_direction is None
    # no sun: at most the receiver's rare dark-noise false detections of a night (issue 14 item 4)
    assert all(((s.points["flags"] & PointFlag.AMBIENT_NOISE) != 0).sum() < 0.001 * s.fired for s in bridged)
    if backend is _WithoutSun:  # the sub-rays still are: the in-process night scans with 7 sub-rays
        assert stats.sub_rays == 7
        _assert_same_scans(bridged, _in_process_scans(preset, _sunlit_wall(), beam))
    elif use_extension is None:
        assert stats.sub_rays == 1
        _assert_same_scans(bridged, _in_process_scans(preset, _sunlit_wall(), beam))


def test_bridged_and_in_process_scan_poses_are_equal_with_prefetch():
    """The scan's pose comes from the hits the frame consumed (the poses at its slice's ends), not from
    the source after the physics step, while the prefetch thread already moved the bridge's pose."""
    preset = load_preset("VLP-16")
    bridged, _ = _bridged_scans(EmbeddedSim(World(street_scene(0)), preset, paused=True), preset, None, 4)
    built = build_pipeline(preset, street_scene(0), sim_hz=20.0, seed=3, prefetch=2)
    try:
        direct = built.pipeline.scans(4)
    finally:
        built.pipeline.close()
    for b, d in zip(bridged, direct, strict=True):
        assert b.start_ns == d.start_ns
        # equal up to the wire's float32 poses (one frame of the ego's motion is 0.5 m)
        np.testing.assert_allclose(b.sensor_position, d.sensor_position, rtol=0, atol=1e-6)
        np.testing.assert_allclose(b.sensor_rotation, d.sensor_rotation, rtol=0, atol=1e-7)
    xs = [float(s.sensor_position[0]) for s in direct]
    assert xs == sorted(xs) and xs[-1] - xs[0] > 0.5  # the ego drives: the poses differ scan to scan
    # the pose at each scan's start is the world's, up to interpolation within one frame
    for s in direct:
        exact = built.world.sensor_pose(s.start_ns * 1e-9)
        assert np.allclose(s.sensor_position, exact.position, atol=1e-6)


class _WeatherChanger:
    """The embedded sim whose rain starts at sim time ``at_ns`` (a driver setting the weather)."""

    def __init__(self, sim: EmbeddedSim, at_ns: int) -> None:
        self._sim, self._at = sim, at_ns

    def lidar_hits(self, *args):
        ans = self._sim.lidar_hits(*args)
        if ans.info["t1_ns"] >= self._at:
            ans.info["weather"] = {"rain_mm_h": 40.0, "fog_visibility_m": None, "snow_mm_h": 0.0}
        return ans

    def __getattr__(self, name: str):
        return getattr(self._sim, name)


def test_the_servers_weather_rides_in_the_hits_of_the_frame_it_was_cast_in():
    """Weather that changes mid-run applies from the frame whose answer reported it, whatever the
    prefetch thread fetched meanwhile: two runs give the same bytes, and the rainy scan differs from
    a clear one."""
    preset = load_preset("VLP-16")

    def run():
        backend = _WeatherChanger(EmbeddedSim(World(wall_scene(20.0)), preset, paused=True), 150_000_000)
        return _bridged_scans(backend, preset, None, 3)[0]

    first, second = run(), run()
    assert [s.points.tobytes() for s in first] == [s.points.tobytes() for s in second]
    clear, _ = _bridged_scans(EmbeddedSim(World(wall_scene(20.0)), preset, paused=True), preset, None, 3)
    assert first[0].points.tobytes() == clear[0].points.tobytes()  # before the rain
    assert first[2].points.tobytes() != clear[2].points.tobytes()  # in it


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_bridged_scan_poses_do_not_depend_on_the_prefetch_depth(depth):
    preset = load_preset("VLP-16")
    server = _serve(street_scene(0))
    try:
        with AirSimClient(port=server.port) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            physics = SensorPhysics.from_preset(preset, source.material_names)
            pipe = Pipeline(preset, source, physics, sim_hz=20.0, start_ns=source.start_ns, prefetch=depth)
            try:
                scans = pipe.scans(3)
            finally:
                pipe.close()
    finally:
        server.close()
    poses = [(s.sensor_position.tolist(), s.sensor_rotation.tolist()) for s in scans]
    assert poses == [
        ([0.0, -1.75, 1.7999999523162842], [1.0, 0.0, 0.0, 0.0]),
        ([1.0, -1.75, 1.7999999523162842], [1.0, 0.0, 0.0, 0.0]),
        ([2.0, -1.75, 1.7999999523162842], [1.0, 0.0, 0.0, 0.0]),
    ]


def test_a_run_records_what_a_stock_server_granted_and_re_runs_from_it(tmp_path, recwarn):
    """Sub-rays and sunlight a server without rtLidarGetBeamHits refuses are recorded as refused (one
    ray a pulse, no sun): ``run --config`` against the same kind of server re-runs the same bytes,
    without asking again."""
    from rt_lidar.cli.main import main

    preset = load_preset("VLP-16")

    def serve():
        backend = WithoutBeamCall(EmbeddedSim(World(_two_planes()), preset, paused=True))
        server = AirSimServer(backend, port=0)
        server.start()
        return server

    a, b = tmp_path / "a", tmp_path / "b"
    server = serve()
    try:
        opts = [
            "--preset",
            "VLP-16",
            "--frames",
            "2",
            "--quiet",
            "--lockstep",
            "--sub-rays",
            "7",
            "--return-mode",
            "dual",
            "--sun-lux",
            "50000",
        ]
        assert main(["run", f"--airsim=127.0.0.1:{server.port}", *opts, "--out", str(a)]) == 0
    finally:
        server.close()
    assert len([w for w in recwarn if "not applied" in str(w.message)]) == 2
    cfg = json.loads((a / "config.json").read_text())["config"]
    want = {"sub_rays": 1, "return_mode": "dual", "epw": False, "full": False, "bundle": "sparse"}
    assert cfg["beam"] == want
    assert cfg["sun"]["lux"] == 0.0 and cfg["bridge"]["lockstep"] is True
    recwarn.clear()
    server = serve()
    try:
        args = ["run", "--config", str(a / "config.json"), f"--airsim=127.0.0.1:{server.port}"]
        assert main([*args, "--out", str(b)]) == 0
    finally:
        server.close()
    assert not [w for w in recwarn if "not applied" in str(w.message)]
    names = sorted(p.name for p in (a / "scans").glob("*.pcd"))
    assert len(names) == 2
    for name in names:
        assert (a / "scans" / name).read_bytes() == (b / "scans" / name).read_bytes()


def test_a_lockstep_run_asking_two_frames_ahead_writes_the_same_scans(tmp_path):
    """``run --lockstep --ask-ahead 2`` against rt-lidar's server (which casts the two frames asked
    ahead at once), over TCP and with ``--shm`` (a segment a frame in flight): the scans of
    ``--ask-ahead 1`` over TCP, byte for byte, and the run's config records it."""
    from rt_lidar.cli.main import main
    from rt_lidar.unreal_bridge.shm import list_segments

    preset = load_preset("VLP-16")
    out = {}
    for run, extra in {"ahead1": ["1"], "ahead2": ["2"], "ahead2-shm": ["2", "--shm"]}.items():
        server = AirSimServer(EmbeddedSim(World(street_scene(0)), preset, paused=True), port=0)
        server.start()
        try:
            out[run] = tmp_path / run
            opts = ["--preset", "VLP-16", "--frames", "3", "--quiet", "--lockstep", "--ask-ahead", *extra]
            assert main(["run", f"--airsim=127.0.0.1:{server.port}", *opts, "--out", str(out[run])]) == 0
        finally:
            server.close()
    for run in ("ahead2", "ahead2-shm"):
        assert json.loads((out[run] / "config.json").read_text())["config"]["bridge"]["ask_ahead"] == 2
    bridged = json.loads((out["ahead2-shm"] / "summary.json").read_text())["bridge"]
    assert bridged["transport"] == "shm" and bridged["shm_refused"] is None
    assert list_segments(pid=os.getpid()) == []
    names = sorted(p.name for p in (out["ahead1"] / "scans").glob("*.pcd"))
    assert len(names) == 3
    for run in ("ahead2", "ahead2-shm"):
        for name in names:
            assert (out["ahead1"] / "scans" / name).read_bytes() == (out[run] / "scans" / name).read_bytes()
