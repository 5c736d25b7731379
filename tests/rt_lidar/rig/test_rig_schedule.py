"""A rig's scheduling (where each sensor's physics runs, how many frames are sensed ahead) changes no
byte of its scans, the crosstalk's false points included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rt_lidar.backend.schedule import RIG_FRAMES_AHEAD, RIG_PHYSICS_AHEAD
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.builder import build_world
from rt_lidar.points import PointFlag
from rt_lidar.rig import load_rig
from rt_lidar.rig.experiment import _ground, facing_pair
from rt_lidar.rig.loop import RigLoop

EXAMPLE = Path(__file__).parents[3] / "docs" / "rigs" / "roof-and-corners.toml"
SCANS = 2


def _run(rig_name: str, prefetch: bool | int, physics_ahead: bool | None) -> dict[str, list[bytes]]:
    """Each sensor's first scans' point bytes, the rig run with crosstalk and rain: the example rig on
    the street, or two VLP-16s facing each other over a ground plane (many false points)."""
    physics = PhysicsConfig(weather=WeatherConfig(rain_mm_h=25.0))
    if rig_name == "example":
        rig, world = load_rig(EXAMPLE), build_world("street", seed=3)
    else:
        rig, world = facing_pair("VLP-16"), _ground()
    loop = RigLoop(rig, world, seed=3, prefetch=prefetch, crosstalk=True, physics=physics)
    if physics_ahead is not None:
        for unit in loop.units.values():
            unit.pipeline.physics_ahead = physics_ahead
    out: dict[str, list[bytes]] = {n: [] for n in rig.names}
    crosstalk = 0
    try:
        loop.start()
        while min(len(v) for v in out.values()) < SCANS:
            for name, scans in loop.step().items():
                for scan in scans:
                    crosstalk += int(np.count_nonzero(scan.points["flags"] & int(PointFlag.CROSSTALK)))
                    out[name].append(scan.points.tobytes())
    finally:
        loop.close()
    if rig_name == "facing":
        assert crosstalk > 0  # the false points are part of what is compared
    return {n: v[:SCANS] for n, v in out.items()}


@pytest.fixture(scope="module", params=["example", "facing"])
def on_loop_thread(request: pytest.FixtureRequest) -> tuple[str, dict[str, list[bytes]]]:
    """The rig's name and its scans with nothing fetched ahead: everything on the loop's thread."""
    return request.param, _run(request.param, prefetch=False, physics_ahead=None)


def test_the_rig_senses_ahead_on_the_sensors_threads_by_default() -> None:
    loop = RigLoop(load_rig(EXAMPLE), build_world("street", seed=3), seed=3, prefetch=True)
    try:
        for unit in loop.units.values():
            assert unit.pipeline.physics_ahead is RIG_PHYSICS_AHEAD is True
            assert unit.pipeline.prefetch == RIG_FRAMES_AHEAD >= 1
    finally:
        loop.close()


def test_no_sensor_waits_in_lockstep_behind_the_slowest() -> None:
    """While the loop holds frame n, every sensor has frames n+1 and n+2 in flight: a light sensor
    need not wait for the HDL-64E's frame n+1 to be taken before it starts n+2."""
    loop = RigLoop(load_rig(EXAMPLE), build_world("street", seed=3), seed=3, prefetch=True)
    try:
        loop.start()
        sensed = {name: unit.pipeline.sense() for name, unit in loop.units.items()}
        for name, unit in loop.units.items():
            in_flight = [k for k, _future in unit.pipeline._pending]
            assert in_flight == [sensed[name].frame + 1, sensed[name].frame + 2], name
    finally:
        loop.close()


@pytest.mark.parametrize(
    ("prefetch", "physics_ahead"), [(True, None), (1, True), (2, True), (1, False), (3, True)]
)
def test_scans_are_the_same_bytes_however_the_rig_is_scheduled(
    on_loop_thread: tuple[str, dict[str, list[bytes]]], prefetch: bool | int, physics_ahead: bool | None
) -> None:
    rig_name, want = on_loop_thread
    got = _run(rig_name, prefetch, physics_ahead)
    assert got.keys() == want.keys()
    for name, scans in got.items():
        assert len(scans) == SCANS
        assert scans == want[name], name
