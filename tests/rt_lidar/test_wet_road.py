"""Wet road and tyre spray (issue 14, item 11): the water film's darkening, mirror ghosts, spray
plumes, the AirSim Roadwetness parameter, and bridged == in-process."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.cli.validate import add_weather_arguments, weather_from_args
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig, airsim_weather_to_config
from rt_lidar.physics.wet_road import (
    fresnel_reflectance,
    internal_diffuse_reflectance,
    mirror_factor,
    wet_diffuse_factor,
)
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.points import PointFlag
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import load_preset
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer
from rt_lidar.unreal_bridge.world import World, wall_scene
from rt_lidar.unreal_bridge.world.spray import spray_segments
from rt_lidar.validation.wet_experiments import spray_scene

SENSOR_Z = 1.8
WALL_M = 40.0


def _wall():
    return wall_scene(WALL_M, "building_plaster", width_m=30.0, height_m=6.0)


def _scan(scene, wetness, *, beam=None, scans=1, seed=3):
    weather = WeatherConfig(road_wetness=wetness) if wetness else None
    cfg = PhysicsConfig(weather=weather, beam=beam, range_noise=False)
    return [s.points for s in build_pipeline("VLP-16", scene, seed=seed, physics=cfg).pipeline.scans(scans)]


# -- the film's optics ------------------------------------------------------------------------------


def test_fresnel_of_water_is_two_per_cent_head_on_and_total_at_grazing():
    r = fresnel_reflectance(np.array([1.0, np.cos(np.radians(60.0)), 1e-6]))
    assert r[0] == pytest.approx(((1.33 - 1) / (1.33 + 1)) ** 2, rel=1e-9)
    assert 0.04 < r[1] < 0.07  # 60 deg: ~0.059
    assert r[2] > 0.999
    assert internal_diffuse_reflectance() == pytest.approx(0.47, abs=0.01)  # Lekner & Dorf's r_i


def test_the_film_darkens_more_towards_grazing_and_mirrors_more():
    cos = np.cos(np.radians([0.0, 60.0, 80.0, 85.0, 88.0]))
    m = wet_diffuse_factor(cos, np.full(5, 0.27))
    assert np.all(np.diff(m) < 0) and m[0] < 1.0 and m[-1] < 0.05
    g = mirror_factor(cos, 1.0)
    assert np.all(np.diff(g) > 0)
    assert mirror_factor(cos, 0.5) == pytest.approx(0.5 * g)


# -- configuration ------------------------------------------------------------------------------------


def test_airsim_roadwetness_and_the_cli_option_set_the_road_wetness():
    cfg = airsim_weather_to_config({1: 0.6})
    assert cfg is not None and cfg.road_wetness == pytest.approx(0.6) and cfg.is_clear_air
    assert not cfg.is_clear
    assert airsim_weather_to_config({1: 0.0}) is None
    p = argparse.ArgumentParser()
    add_weather_arguments(p)
    w = weather_from_args(p.parse_args(["--road-wetness", "0.8"]))
    assert w is not None and w.road_wetness == 0.8
    assert weather_from_args(p.parse_args([])) is None
    sim = EmbeddedSim(World(_wall()), load_preset("VLP-16"), paused=True)
    sim.enable_weather(True)
    sim.set_weather_parameter(1, 0.5)
    assert sim.weather_config() == {
        "rain_mm_h": 0.0,
        "fog_visibility_m": None,
        "snow_mm_h": 0.0,
        "road_wetness": 0.5,
    }


# -- the road and its ghosts --------------------------------------------------------------------------


def test_road_returns_fall_with_wetness_at_grazing_angles_only():
    world = build_world(_wall())
    road = world.segment_ids()["ground"]
    far, near = [], []
    for w in (0.0, 0.5, 1.0):
        pts = _scan(world, w)[0]
        r = np.hypot(pts["x"], pts["y"])
        on_road = (pts["segment"] == road) & (np.abs(pts["z"] + SENSOR_Z) < 0.2)
        far.append(int(np.count_nonzero(on_road & (r > 25.0))))
        near.append(int(np.count_nonzero(on_road & (r < 10.0))))
    assert far[0] > 200 and far[0] > far[1] > far[2] and far[2] < 0.1 * far[0]
    assert near[0] == near[1] == near[2]  # steep incidence: still far above the threshold


def test_mirror_ghosts_lie_below_the_road_at_the_wall_s_mirror_image():
    world = build_world(_wall())
    wall = world.segment_ids()["wall"]
    dry = _scan(world, 0.0)[0]
    wet = _scan(world, 1.0)[0]
    z_dry = dry["z"] + SENSOR_Z
    assert np.count_nonzero(z_dry < -0.2) <= 2  # dry: nothing below the road (a stray noise point at most)
    z = wet["z"] + SENSOR_Z
    ghost = (z < -0.2) & (wet["segment"] == wall)
    assert np.count_nonzero(ghost) > 100
    # the mirror image of the wall face (x = 40, 0 < z < 6) is x = 40, -6 < z < 0, at the same y
    np.testing.assert_allclose(wet["x"][ghost], WALL_M, atol=1e-3)
    assert np.all(z[ghost] > -6.0 - 1e-3) and np.all(np.abs(wet["y"][ghost]) <= 15.0 + 1e-3)
    assert np.all((wet["flags"][ghost] & int(PointFlag.RAIN_CLUTTER)) == 0)


def test_a_dry_road_is_the_dry_cast_byte_for_byte():
    world = build_world(spray_scene())
    none = build_pipeline("VLP-16", world, seed=3).pipeline
    zero = build_pipeline("VLP-16", world, seed=3, physics=PhysicsConfig(weather=WeatherConfig())).pipeline
    for a, b in zip(none.scans(2), zero.scans(2), strict=True):
        assert a.points.tobytes() == b.points.tobytes()


# -- spray -------------------------------------------------------------------------------------------


def test_spray_plumes_trail_moving_cars_only():
    scene = spray_scene(distance_m=10.0, speed_m_s=25.0)
    objs = [(o.name, o.trajectory) for o in scene.objects if not o.is_static]
    origin = np.array([[0.0, 0.0, 1.0]], np.float32)
    d = np.array([[1.0, 0.0, 0.0]], np.float32)
    t = np.zeros(1)
    z_in, z_out, dens = spray_segments(objs, origin, d, t, np.array([7.0], np.float32))
    # the plume runs from the front wheels (11.6 m) back 10 m behind the rear bumper (7.75 - 10 < 0)
    assert z_in[0] == pytest.approx(0.0, abs=1e-6) and z_out[0] == pytest.approx(7.0)  # up to the hit
    assert 0 < dens[0] <= 1.0
    above = np.array([[0.0, 0.0, 2.0]], np.float32)  # over the 1.5 m high plume
    assert not np.isfinite(spray_segments(objs, above, d, t, np.array([50.0], np.float32))[0][0])
    slow = spray_scene(distance_m=10.0, speed_m_s=2.0)
    objs = [(o.name, o.trajectory) for o in slow.objects if not o.is_static]
    assert spray_segments(objs, origin, d, t, np.array([7.0], np.float32))[2][0] == 0.0


def test_spray_points_grow_with_wetness_behind_a_moving_car():
    world = build_world(spray_scene())
    counts = []
    for w in (0.0, 0.3, 1.0):
        pts = _scan(world, w, scans=2)
        counts.append(sum(int(np.count_nonzero(p["flags"] & int(PointFlag.RAIN_CLUTTER))) for p in pts))
        if w:
            sp = np.concatenate([p[(p["flags"] & int(PointFlag.RAIN_CLUTTER)) != 0] for p in pts])
            assert np.all(sp["z"] + SENSOR_Z < 1.5 + 0.05) and np.all(np.abs(sp["y"]) < 1.3)
    assert counts[0] == 0 and 0 < counts[1] < counts[2]


# -- bridged == in-process -------------------------------------------------------------------------


def _bridged(scene, wetness, beam, *, via_server):
    preset = load_preset("VLP-16")
    server = AirSimServer(EmbeddedSim(World(scene), preset, paused=True), port=0)
    server.start()
    try:
        with AirSimClient(port=server.port) as client:
            client.reset()
            weather = None
            if via_server:  # the sim's own weather (AirSim's call), which the physics follows
                client.sim_enable_weather(True)
                client.sim_set_weather_parameter(1, wetness)
            else:  # --road-wetness: the controller sets the sim's Roadwetness itself
                weather = WeatherConfig(road_wetness=wetness)
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            pipe = bridge_pipeline(source, 20.0, seed=3, beam=beam, weather=weather)
            try:
                return [s.points for s in pipe.scans(2)]
            finally:
                pipe.close()
    finally:
        server.close()


@pytest.mark.parametrize(
    ("scene", "beam", "via_server"),
    [
        (_wall, None, True),
        (spray_scene, None, False),
        (spray_scene, BeamConfig(sub_rays=7, return_mode="dual"), True),
    ],
    ids=["wall-airsim-call", "spray-cli", "spray-sub-rays"],
)
def test_a_wet_road_over_the_bridge_gives_the_in_process_points_byte_for_byte(scene, beam, via_server):
    # 0.75: AirSim's simSetWeatherParameter takes a float32, so the sim's wetness is exactly this one
    bridged = _bridged(scene(), 0.75, beam, via_server=via_server)
    cfg = PhysicsConfig(weather=WeatherConfig(road_wetness=0.75), beam=beam)
    direct = [s.points for s in build_pipeline("VLP-16", scene(), seed=3, physics=cfg).pipeline.scans(2)]
    dry_cfg = PhysicsConfig(beam=beam)
    dry = [s.points for s in build_pipeline("VLP-16", scene(), seed=3, physics=dry_cfg).pipeline.scans(2)]
    for b, d, n in zip(bridged, direct, dry, strict=True):
        assert b.size > 1000 and b.tobytes() == d.tobytes()
        assert b.tobytes() != n.tobytes()  # the wet road did change the scan


@pytest.mark.parametrize("beam", [None, BeamConfig(sub_rays=7, return_mode="dual")], ids=["one-ray", "dual7"])
def test_fog_dims_the_ghosts_too(beam):
    world = build_world(_wall())
    wall = world.segment_ids()["wall"]

    def ghosts(weather):
        cfg = PhysicsConfig(weather=weather, beam=beam, range_noise=False)
        pts = build_pipeline("VLP-16", world, seed=3, physics=cfg).pipeline.scans(1)[0].points
        return int(np.count_nonzero((pts["z"] + SENSOR_Z < -0.2) & (pts["segment"] == wall)))

    clear = ghosts(WeatherConfig(road_wetness=1.0))
    foggy = ghosts(WeatherConfig(road_wetness=1.0, fog_visibility_m=150.0))
    assert clear > 100 and foggy < clear


def test_a_wet_road_over_a_bridge_without_the_extension_warns():
    preset = load_preset("VLP-16")
    server = AirSimServer(EmbeddedSim(World(_wall()), preset, paused=True), port=0)
    server.start()
    try:
        with AirSimClient(port=server.port) as client:
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0, use_extension=False)
            with pytest.warns(UserWarning, match="road-wetness is not applied"):
                pipe = bridge_pipeline(source, 20.0, weather=WeatherConfig(road_wetness=0.5))
            pipe.close()
    finally:
        server.close()
