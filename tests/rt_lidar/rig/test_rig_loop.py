"""The rig frame loop: each sensor's scans are those of the sensor run alone at its mount."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.rig import load_rig, rig_from_dict
from rt_lidar.rig.loop import RigLoop
from rt_lidar.sensor.scan_pattern import firings_between, firings_per_scan, scan_period_ns
from rt_lidar.unreal_bridge.world import World

EXAMPLE = Path(__file__).parents[3] / "docs" / "rigs" / "roof-and-corners.toml"
SCANS = 2
SIM_HZ = 20.0


@pytest.fixture(scope="module")
def rig_scans() -> dict[str, list]:
    rig = load_rig(EXAMPLE)
    loop = RigLoop(rig, build_world("street", seed=3), sim_hz=SIM_HZ, seed=3, prefetch=True)
    out: dict[str, list] = {n: [] for n in rig.names}
    try:
        while min(len(v) for v in out.values()) < SCANS:
            for name, scans in loop.step().items():
                out[name].extend(scans)
    finally:
        loop.close()
    return out


@pytest.mark.parametrize("name", ["top", "front_left", "front_right"])
def test_rig_scans_equal_the_sensor_alone_at_its_mount(rig_scans: dict[str, list], name: str) -> None:
    sensor = load_rig(EXAMPLE).sensor(name)
    scene = build_world("street", seed=3).scene
    alone_world = World(dataclasses.replace(scene, sensor_mount=sensor.mount))
    built = build_pipeline(sensor.preset, alone_world, seed=3, sim_hz=SIM_HZ)
    alone = built.pipeline.scans(SCANS)
    got = rig_scans[name][:SCANS]
    assert len(got) == SCANS
    for a, b in zip(got, alone, strict=True):
        assert a.points.size > 1000
        assert (a.index, a.start_ns, a.fired, a.dropped) == (b.index, b.start_ns, b.fired, b.dropped)
        assert a.points.tobytes() == b.points.tobytes()
        assert np.array_equal(a.sensor_position, b.sensor_position)
        assert np.array_equal(a.sensor_rotation, b.sensor_rotation)


def test_sensors_at_different_rates_stitch_their_own_scans(rig_scans: dict[str, list]) -> None:
    # HDL-64E 10 Hz and VLP-16 10 Hz in the example; scans carry each sensor's own schedule
    for scans in rig_scans.values():
        assert [s.index for s in scans[:SCANS]] == list(range(SCANS))
    fast = rig_from_dict(
        {
            "sensor": [
                {"name": "top", "preset": "HDL-64E", "mount": {"xyz": [0.0, 0.0, 1.9]}},
                {"name": "fast", "preset": "VLP-16", "mount": {"xyz": [2.2, 0.9, 0.7]}, "rotation_hz": 20.0},
                {"name": "solid", "preset": "scala-gen2", "mount": {"xyz": [2.3, 0.0, 0.5]}},
            ]
        }
    )
    loop = RigLoop(fast, build_world("street", seed=3), sim_hz=SIM_HZ, seed=3)
    got: dict[str, list] = {n: [] for n in fast.names}
    for _ in range(4):  # 0.2 s of sim time
        for n, scans in loop.step().items():
            got[n].extend(scans)
    period = {n: scan_period_ns(fast.sensor(n).preset) for n in fast.names}
    assert period["top"] == 2 * period["fast"]
    for n, scans in got.items():
        assert len(scans) == 200_000_000 // period[n]
        assert [s.start_ns for s in scans] == [i * period[n] for i in range(len(scans))]
        assert all(s.fired == firings_per_scan(fast.sensor(n).preset) for s in scans)


def test_phase_lock_puts_the_head_at_phase_deg_every_second() -> None:
    rig = load_rig(EXAMPLE)
    for s in rig.sensors:
        for t_s in (0, 1, 2):
            f = firings_between(s.preset, t_s * 10**9, t_s * 10**9 + 1)
            # the first firing slot of every second: the head's azimuth (plus each ring's offset)
            head = np.mod(f.azimuth_deg - s.preset.azimuth_offsets_deg[f.ring] + 180, 360) - 180
            assert s.entry.phase_deg is not None
            assert np.allclose(head, s.entry.phase_deg, atol=1e-9)
