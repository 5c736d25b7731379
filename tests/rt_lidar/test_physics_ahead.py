"""A frame's physics done on the thread that fetched it ahead (``Pipeline.physics_ahead``) gives the
points the frame loop's own thread gives: with dual returns, rain and sunlight, and following a sim
whose weather changes from frame to frame."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import numpy as np
import pytest

from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.frame_loop import Pipeline
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.beam import BeamConfig

names: set[str] = set()
"""The name prefixes of the threads the physics ran on in the latest :func:`_scans`."""

CONFIGS = {
    "default": PhysicsConfig(),
    "dual-rain-sun": PhysicsConfig(
        weather=WeatherConfig(rain_mm_h=25.0),
        beam=BeamConfig(return_mode="dual"),
        sun_illuminance_lux=50_000.0,
    ),
}


def _scans(pipe: Pipeline, ahead: bool, count: int = 3) -> tuple[list[bytes], set[int]]:
    """The scans' point bytes, and the threads the physics ran on."""
    pipe.physics_ahead = ahead
    threads: set[int] = set()
    names.clear()
    apply = SensorPhysics.apply

    def recording(self: SensorPhysics, hits: Hits, rng: np.random.Generator) -> Any:
        threads.add(threading.get_ident())
        names.add(threading.current_thread().name.rsplit("_", 1)[0])
        return apply(self, hits, rng)

    SensorPhysics.apply = recording  # type: ignore[method-assign]
    try:
        return [s.points.tobytes() for s in pipe.scans(count)], threads
    finally:
        SensorPhysics.apply = apply  # type: ignore[method-assign]
        pipe.close()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_physics_ahead_gives_the_points_of_physics_in_the_frame_loop(name: str) -> None:
    def pipe() -> Pipeline:
        return build_pipeline("VLP-16", "street", seed=4, physics=CONFIGS[name], prefetch=3).pipeline

    ahead, threads_ahead = _scans(pipe(), True)
    in_loop, threads_in_loop = _scans(pipe(), False)
    assert ahead == in_loop and all(len(b) > 10_000 for b in ahead)
    assert threads_in_loop == {threading.get_ident()}
    assert threading.get_ident() not in threads_ahead  # the physics did run where the frames came


class _ChangingWeather:
    """An in-process source that reports a sim's weather, changed every other frame."""

    SCHEDULE = (None, {"rain_mm_h": 20.0}, {"fog_visibility_m": 300.0}, {"rain_mm_h": 20.0}, {})

    def __init__(self, inner: Any, sim_hz: float) -> None:
        self.inner = inner
        self.sim_hz = sim_hz

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def capabilities(self) -> Any:
        return dataclasses.replace(self.inner.capabilities, weather=True)

    def hits(self, firings: Any, t0_ns: int, t1_ns: int) -> Hits:
        h = self.inner.hits(firings, t0_ns, t1_ns)
        frame = round(t0_ns * self.sim_hz / 1e9)
        h.weather = self.SCHEDULE[(frame // 2) % len(self.SCHEDULE)]
        return h


def test_physics_ahead_follows_a_changing_sim_weather_frame_by_frame() -> None:
    def pipe() -> Pipeline:
        built = build_pipeline("VLP-16", "street", seed=5)
        p = built.pipeline
        return Pipeline(
            p.preset, _ChangingWeather(p.source, 20.0), p.physics, sim_hz=20.0, seed=5, prefetch=2
        )

    ahead, _ = _scans(pipe(), True, count=5)
    in_loop, _ = _scans(pipe(), False, count=5)
    assert ahead == in_loop
    clear, _ = _scans(build_pipeline("VLP-16", "street", seed=5, prefetch=2).pipeline, True, count=5)
    assert clear[0] != ahead[0] or clear[1] != ahead[1]  # the weather did change the points


def test_with_one_fetching_thread_the_waveform_physics_runs_on_threads_of_its_own() -> None:
    """Frames fetched one at a time, in order (a server's answers; here a small sensor's frames): their
    waveform physics (dual returns) goes to two threads of its own, so consecutive frames' overlap,
    with the points of the physics in the loop; the single-return physics stays on the fetching thread."""
    dual = PhysicsConfig(beam=BeamConfig(return_mode="dual"))

    def pipe(physics: PhysicsConfig) -> Pipeline:
        return build_pipeline("VLP-16", "street", seed=6, physics=physics, prefetch=1).pipeline

    ahead, _ = _scans(pipe(dual), True)
    assert names == {"rt-lidar-physics"}
    in_loop, _ = _scans(pipe(dual), False)
    assert ahead == in_loop
    _scans(pipe(PhysicsConfig()), True)
    assert names == {"rt-lidar-prefetch"}
