"""The single-ray physics' reuse of what its object echoes computed (issue 43, session 26): the
detections' path factor and each laser's focus taken from the object echoes where a detection keeps
its ray's range, and the glass ghosts compared by the rows that have one, give the values computed
afresh, bit for bit, on the NumPy and the compiled backends."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest

from rt_lidar.backend import CompiledBackend, NumpyBackend, PhysicsBackend
from rt_lidar.physics.echo import EchoModel, KeptRows, RayFactors
from rt_lidar.physics.glass_ghost import glass_ghost_echoes, glass_ghost_rows
from rt_lidar.physics.model import SensorPhysics, detection_focus
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.frame_loop import frame_time_ns
from rt_lidar.pipeline.sources import Hits
from rt_lidar.sensor.scan_pattern import firings_between

BACKENDS: list[Callable[[], PhysicsBackend]] = [NumpyBackend, CompiledBackend]


@pytest.fixture(scope="module")
def street() -> tuple[SensorPhysics, list[Hits]]:
    """The default demo's HDL-64E physics and two frames of the street (glass, ghosts, cars)."""
    built = build_pipeline("HDL-64E", build_world("street", seed=0), seed=0, sim_hz=20.0)
    preset, source = built.preset, built.pipeline.source
    frames = []
    for k in (2, 3):
        t0, t1 = frame_time_ns(k, 20.0), frame_time_ns(k + 1, 20.0)
        frames.append(source.hits(firings_between(preset, t0, t1), t0, t1))
    return built.pipeline.physics, frames


def _path_at(echo: EchoModel, r: np.ndarray, k: np.ndarray) -> np.ndarray:
    return echo.path_factor(r[k])


def _echo(physics: SensorPhysics, backend: PhysicsBackend) -> EchoModel:
    return EchoModel(physics.preset, physics.materials, physics.config.extinction_per_m, backend)


def test_kept_rows_take_the_kept_value_only_where_the_range_is_the_same() -> None:
    at = np.array([1.0, 2.0, np.nan, 4.0, -0.0, np.inf], np.float32)
    factors = RayFactors(at, at * 10, None)
    rows = np.array([0, 1, 2, 3, 4, 5, 1], np.int64)
    ranges = np.array([1.0, 2.5, np.nan, 4.0, 0.0, np.inf, 2.0], np.float32)
    kept = factors.at(rows, ranges)
    # only the changed range and the NaN are others; +-0 and inf compare equal and are kept
    assert kept.other.tolist() == [1, 2]
    asked: list[np.ndarray] = []

    def compute(k: np.ndarray) -> np.ndarray:
        asked.append(k)
        return ranges[k] * 10

    got = kept.take(factors.path, compute)
    assert len(asked) == 1 and asked[0].tolist() == [1, 2]
    np.testing.assert_array_equal(got, ranges * 10)
    assert got.dtype == np.float32
    none_other = factors.at(rows[:1], ranges[:1])
    assert none_other.take(factors.path, compute).tolist() == [10.0] and len(asked) == 1


@pytest.mark.parametrize("make_backend", BACKENDS)
def test_object_echo_power_with_the_path_given_is_the_same(
    street: tuple[SensorPhysics, list[Hits]], make_backend: Callable[[], PhysicsBackend]
) -> None:
    physics, frames = street
    backend = make_backend()
    echo = _echo(physics, backend)
    for hits in frames:
        with np.errstate(invalid="ignore", over="ignore"):
            path = echo.path_factor(hits.range_m)
        fresh = backend.object_echo_power(echo, hits)
        given = backend.object_echo_power(echo, hits, path)
        for a, b in zip(fresh, given, strict=True):
            assert a.tobytes() == b.tobytes()
        (_, kept) = echo.object_echoes_kept(hits)
        assert kept.path.tobytes() == path.tobytes()
        assert kept.range_m is hits.range_m


@pytest.mark.parametrize("make_backend", BACKENDS)
def test_detections_take_the_object_echoes_path_and_focus_bit_for_bit(
    street: tuple[SensorPhysics, list[Hits]], make_backend: Callable[[], PhysicsBackend]
) -> None:
    physics, frames = street
    backend = make_backend()
    echo = _echo(physics, backend)
    other_rows = 0
    for k, hits in enumerate(frames):
        det, kept = physics._single_kept(echo, hits, np.random.default_rng(k))
        assert kept.factors.focus is not None  # the HDL-64E's lasers have their own focus
        assert kept.rows is det.pulse
        ring = np.take(hits.firings.ring, det.pulse)
        fresh_focus = echo.beam_focus(ring, det.range_m)
        assert fresh_focus is not None
        for focus in (detection_focus(echo, hits, det, kept), detection_focus(echo, hits, det, None)):
            assert focus is not None and focus.tobytes() == fresh_focus.tobytes()
        # the measured reflectivity of the detections: with the kept path factor and without
        idx, r = det.pulse, det.range_m
        path = kept.take(kept.factors.path, functools.partial(_path_at, echo, r))
        assert path.tobytes() == echo.path_factor(r).tobytes()
        power = np.zeros(len(hits), np.float32)
        power[idx] = det.power_w
        rng_m = np.full(len(hits), np.inf, np.float32)
        rng_m[idx] = r
        seg, flags = np.zeros(len(hits), np.uint32), np.zeros(len(hits), np.uint8)
        fresh = backend.select_detections(echo, idx, rng_m, power, seg, flags)
        given = backend.select_detections(echo, idx, rng_m, power, seg, flags, path)
        for a, b in zip(fresh, given, strict=True):
            assert a.tobytes() == b.tobytes()
        other_rows += int(kept.other.size)
        assert kept.other.tolist() == np.flatnonzero(r != np.take(hits.range_m, idx)).tolist()
    assert other_rows > 0  # glass and ghost detections: the computed branch ran too


def test_ghost_rows_are_the_full_ghosts_rows(street: tuple[SensorPhysics, list[Hits]]) -> None:
    physics, frames = street
    echo = physics.echo
    for hits in frames:
        full = glass_ghost_echoes(echo, hits)
        rows = glass_ghost_rows(echo, hits)
        assert full is not None and rows is not None
        gi, r, p, s, seg = rows
        assert gi.size > 0
        g_r, g_p, g_s, g_seg = full
        for whole, part in ((g_r, r), (g_p, p), (g_s, s), (g_seg, seg)):
            assert part.dtype == whole.dtype
            assert whole[gi].tobytes() == part.tobytes()
        rest = np.setdiff1d(np.arange(len(hits)), gi)
        assert not g_p[rest].any() and np.isinf(g_r[rest]).all()  # no ghost elsewhere: none can win


@pytest.mark.parametrize("make_backend", BACKENDS)
def test_apply_with_the_reuse_gives_the_points_computed_afresh(
    street: tuple[SensorPhysics, list[Hits]],
    make_backend: Callable[[], PhysicsBackend],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    physics, frames = street
    phys = SensorPhysics(physics.preset, physics.materials, physics.config, make_backend())
    reused = [phys.apply(h, np.random.default_rng(k)).points.tobytes() for k, h in enumerate(frames)]

    def afresh(self: KeptRows, values: np.ndarray, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        return compute(np.arange(self.rows.shape[0]))  # every value computed at the detections' ranges

    monkeypatch.setattr(KeptRows, "take", afresh)
    fresh = [phys.apply(h, np.random.default_rng(k)).points.tobytes() for k, h in enumerate(frames)]
    assert reused == fresh
