"""A fault on the sensor's window dims every echo that passes it, not only the surfaces' (issue 43/40):
the rain, fog and snow clutter, the tyre spray and the wet road's mirror ghosts are drawn through the
window's transmission inside their kernels. One test body over every backend present (NumPy, the
compiled twins, the CUDA kernels' source built for the CPU, CuPy on a GPU; the device frame on its CPU
twin and on a GPU) and every way a pulse becomes returns (one ray, dual returns through the waveform,
sub-rays with echo pulse widths, ``--beam full``), in-process and over the bridge.

The power faults act on the hits alone here (``Pipeline.on_hits``), without the plan's point filter
that takes a blocked sector's points out of a run afterwards: what is checked is the physics."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from rt_lidar.backend.physics_ops import BACKEND_NAMES, available_backends, backend_named
from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.faults.spec import faults_from_table
from rt_lidar.faults.wiring import fault_plan
from rt_lidar.kernels.xp import cupy_available
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.device_world import world_on_device
from rt_lidar.points import PointFlag
from rt_lidar.sensor.beam import BeamConfig
from rt_lidar.sensor.presets import load_preset
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.unreal_bridge import AirSimClient, AirSimServer
from rt_lidar.unreal_bridge.world import World, street_scene
from rt_lidar.validation.wet_experiments import spray_scene

PRESET = "VLP-16"
NO_CUDA = pytest.mark.skipif(not cupy_available(), reason="no CUDA device")
MODES = {
    "strongest": None,
    "dual": BeamConfig(return_mode="dual"),
    "sub-rays-epw": BeamConfig(sub_rays=4, return_mode="dual", epw=True),
    "beam-full": BeamConfig(return_mode="dual", full=True),
}
DEVICE_FRAMES = [
    ("device:cuda-source-on-cpu", "device-frame-cpu-twin", ()),
    ("device:cuda", "device-frame-cuda", NO_CUDA),
]


def _runs(modes: list[str], device_modes: list[str]) -> list:
    """(run, mode) of every host backend in ``modes`` and of the device frame (its CPU twin's BVH cast is
    slow: fewer) in ``device_modes``."""
    out = [pytest.param(b, m, id=f"{b}-{m}") for b in BACKEND_NAMES for m in modes]
    for run, label, marks in DEVICE_FRAMES:
        out += [pytest.param(run, m, id=f"{label}-{m}", marks=marks) for m in device_modes]
    return out


ALL_WEATHER = WeatherConfig(rain_mm_h=25.0, fog_visibility_m=100.0, snow_mm_h=5.0, road_wetness=0.8)
CLUTTER = int(PointFlag.RAIN_CLUTTER | PointFlag.FOG_CLUTTER | PointFlag.SNOW_CLUTTER)
SECTOR = (60.0, 150.0)
HALF = math.sqrt(0.5)  # one way: the window passes T^2 = 1/2 of every echo (exactly 0.5 in float32)
IDEAL = {"receiver_noise": False, "range_noise": False, "range_walk": False}  # reflectivity = power


def _faults(table: dict) -> tuple:
    return faults_from_table({"fault": [table]}, "test")


def _scan(run: str, scene, physics: PhysicsConfig, faults: tuple | None, seed: int = 0) -> np.ndarray:
    """The second scan of ``scene`` on backend ``run`` (or ``device:NAME``, the device frame), the power
    faults ``faults`` on the hits."""
    device = run.split(":", 1)[1] if run.startswith("device:") else None
    why = available_backends()[run] if device is None else None
    if device == "cuda" and not cupy_available():
        why = "no CUDA device"
    if why is not None:
        pytest.skip(f"{run}: {why}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a device frame that hands the wet road to the host says so
        if device is None:
            built = build_pipeline(PRESET, scene, seed=seed, physics=physics, backend=backend_named(run))
        else:
            world = world_on_device(build_world(scene, seed=seed), device)
            built = build_pipeline(PRESET, world, seed=seed, physics=physics)
        if faults is not None:
            built.pipeline.on_hits = fault_plan(faults, built.pipeline.preset, seed).on_hits
        try:
            return built.pipeline.scans(2)[1].points
        finally:
            built.pipeline.close()


def _azimuth(p: np.ndarray) -> np.ndarray:
    return np.degrees(np.arctan2(p["y"], p["x"])) % 360.0


def _echoes(p: np.ndarray) -> np.ndarray:
    """The points that are echoes (not the receiver's noise false alarms)."""
    return p[(p["flags"] & int(PointFlag.AMBIENT_NOISE)) == 0]


def _in_sector(p: np.ndarray, span: tuple[float, float], margin: float = 1.0) -> np.ndarray:
    az = (_azimuth(p) - span[0]) % 360.0
    return (az > margin) & (az < span[1] - span[0] - margin)


@pytest.mark.parametrize(("run", "mode"), _runs(list(MODES), ["strongest", "beam-full"]))
def test_a_blocked_window_lets_no_echo_through(run: str, mode: str) -> None:
    """Rain, fog, snow and a wet road: a blockage over 60..150 deg leaves no point at all in its sector
    (the old kernels drew ~35 rain drops a scan there, and the wet road's ghosts), and the weather still
    acts everywhere else."""
    physics = PhysicsConfig(weather=ALL_WEATHER, beam=MODES[mode])
    blocked = _echoes(
        _scan(run, "street", physics, _faults({"kind": "blockage", "azimuth_deg": list(SECTOR)}))
    )
    inside = _in_sector(blocked, SECTOR)
    assert int(inside.sum()) == 0, np.unique(blocked["flags"][inside], return_counts=True)
    outside = blocked[_in_sector(blocked, (SECTOR[1], SECTOR[0] + 360.0))]
    assert outside.size > 5000 and int(np.count_nonzero(outside["flags"] & CLUTTER)) > 500


def _matched(clean: np.ndarray, dirty: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(clean, dirty) rows of the same echo: the same pulse (time, ring) at the same place."""

    def key(p: np.ndarray) -> np.ndarray:
        cols = [p[c].astype(np.float64) for c in ("x", "y", "z")]
        return np.rec.fromarrays([p["t"].astype(np.int64), p["ring"].astype(np.int64), *cols])

    _, i, j = np.intersect1d(key(clean), key(dirty), return_indices=True)
    return clean[i], dirty[j]


@pytest.mark.parametrize(("run", "mode"), _runs(list(MODES), ["strongest"]))
def test_half_a_window_halves_the_weather_s_echoes_as_it_halves_a_wall_s(run: str, mode: str) -> None:
    """Dirt passing half of every echo (T^2 = 1/2) over the whole window, ideal receiver: each rain, fog
    and snow point seen both ways reads half as bright, exactly as the hard targets do (the old kernels
    left the clutter at full power)."""
    weather = WeatherConfig(rain_mm_h=50.0, fog_visibility_m=300.0, snow_mm_h=5.0)  # each kind seen
    physics = PhysicsConfig(weather=weather, beam=MODES[mode], **IDEAL)
    dirt = _faults({"kind": "dirt", "transmission": HALF, "scatter_rate": 0.0})
    clean, dirty = (_echoes(_scan(run, "street", physics, f)) for f in (None, dirt))
    a, b = _matched(clean, dirty)
    assert a.size > 0.5 * dirty.size
    ratio = b["reflectivity"].astype(np.float64) / a["reflectivity"]
    hard = (a["flags"] & CLUTTER) == 0
    assert int(hard.sum()) > 2000
    np.testing.assert_allclose(np.median(ratio[hard]), 0.5, rtol=1e-3)
    for flag in (PointFlag.RAIN_CLUTTER, PointFlag.FOG_CLUTTER, PointFlag.SNOW_CLUTTER):
        kind = (a["flags"] & int(flag)) != 0
        assert int(kind.sum()) >= 3, flag.name
        np.testing.assert_allclose(ratio[kind], 0.5, rtol=2e-3, err_msg=flag.name)
    # the drops the dimmed window no longer lifts over the threshold are gone, none is new
    n_clean = int(np.count_nonzero(clean["flags"] & CLUTTER))
    assert int(np.count_nonzero(dirty["flags"] & CLUTTER)) < n_clean


@pytest.mark.parametrize(("run", "mode"), _runs(["strongest", "dual"], ["strongest"]))
def test_a_window_fault_dims_tyre_spray_and_the_wet_road_s_ghosts(run: str, mode: str) -> None:
    """A car driving away on a wet road: a blockage ahead leaves neither its spray nor the road's mirror
    ghosts; half a window halves the spray's points as the car's."""
    physics = PhysicsConfig(weather=WeatherConfig(road_wetness=1.0), beam=MODES[mode], **IDEAL)
    ahead = (-40.0, 40.0)
    clean = _echoes(_scan(run, spray_scene(), physics, None))
    spray = (clean["flags"] & int(PointFlag.RAIN_CLUTTER)) != 0
    ghost = clean["z"] < -2.0  # below the road (the sensor is 1.8 m up)
    assert (
        int((spray & _in_sector(clean, ahead)).sum()) > 10
        and int((ghost & _in_sector(clean, ahead)).sum()) > 10
    )
    blocked = _echoes(
        _scan(run, spray_scene(), physics, _faults({"kind": "blockage", "azimuth_deg": list(ahead)}))
    )
    assert int(_in_sector(blocked, ahead).sum()) == 0
    dirty = _echoes(
        _scan(
            run, spray_scene(), physics, _faults({"kind": "dirt", "transmission": HALF, "scatter_rate": 0.0})
        )
    )
    a, b = _matched(clean, dirty)
    ratio = b["reflectivity"].astype(np.float64) / a["reflectivity"]
    for what, sel in (("spray", (a["flags"] & int(PointFlag.RAIN_CLUTTER)) != 0), ("ghost", a["z"] < -2.0)):
        assert int(sel.sum()) > 5, what
        np.testing.assert_allclose(ratio[sel], 0.5, rtol=2e-3, err_msg=what)


def _bridged_scan(beam: BeamConfig | None, faults: tuple) -> np.ndarray:
    preset = load_preset(PRESET)
    server = AirSimServer(EmbeddedSim(World(street_scene(0)), preset, paused=True), port=0)
    server.start()
    try:
        with AirSimClient(port=server.port) as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            pipe = bridge_pipeline(source, 20.0, seed=0, beam=beam, weather=ALL_WEATHER)
            pipe.on_hits = fault_plan(faults, pipe.preset, 0).on_hits
            try:
                return pipe.scans(2)[1].points
            finally:
                pipe.close()
    finally:
        server.close()


@pytest.mark.parametrize("mode", ["strongest", "beam-full"])
def test_over_the_bridge_a_blocked_window_lets_no_echo_through(mode: str) -> None:
    """The bridged run (the server casts, the client's physics draws the weather; ``--beam full``'s
    bundles cast by the server): the same blocked sector holds no point."""
    blocked = _echoes(_bridged_scan(MODES[mode], _faults({"kind": "blockage", "azimuth_deg": list(SECTOR)})))
    inside = _in_sector(blocked, SECTOR)
    assert int(inside.sum()) == 0, np.unique(blocked["flags"][inside], return_counts=True)
    assert int(np.count_nonzero(blocked["flags"] & CLUTTER)) > 500
