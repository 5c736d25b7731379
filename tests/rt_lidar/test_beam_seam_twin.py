"""The compiled seam probes (``rt_lidar.pipeline._bundle_choice.seam``, through
``beam_steps.seam_probe_keys``) are NumPy's keys (``beam_probe.numpy_seam_keys``): on real frames of
several sensors, and on made-up firings whose sort tests the compiled order's every branch (azimuths
that decrease and increase along a ring, equal keys, rings whose keys overlap, missing ranks)."""

from __future__ import annotations

import numpy as np
import pytest

from rt_lidar.pipeline import beam_steps
from rt_lidar.pipeline.beam_full import NEIGHBOUR_MAX_DEG, ring_ranks
from rt_lidar.pipeline.beam_probe import SEAM_STEPS, numpy_seam_keys, seam_keys
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between, scan_period_ns

needs_compiled = pytest.mark.skipif(
    beam_steps._choice is None or not hasattr(beam_steps._choice, "seam"),
    reason="_bundle_choice.seam not built",
)


def _compiled(rank: np.ndarray, az: np.ndarray) -> np.ndarray:
    got = beam_steps.seam_probe_keys(rank, az, SEAM_STEPS, NEIGHBOUR_MAX_DEG)
    assert got is not None
    return got


@needs_compiled
@pytest.mark.parametrize("preset", ["HDL-64E", "VLS-128", "VLP-16", "OS1-64"])
def test_a_frame_s_seam_probes_are_numpy_s(preset: str) -> None:
    sensor = load_preset(preset)
    per = scan_period_ns(sensor)
    for k in range(4):  # frames of 20 Hz, each starting a quarter turn on
        f = firings_between(sensor, per + k * per // 4, per + k * per // 4 + per // 2)
        rank, az = ring_ranks(f), np.asarray(f.azimuth_deg, np.float64)
        want = numpy_seam_keys(rank, az)
        got = _compiled(rank, az)
        assert got.dtype == want.dtype == np.int64 and np.array_equal(got, want)
        assert np.array_equal(seam_keys(f), want)
    if preset == "HDL-64E":
        assert want.size > 100  # the rotational corrections leave seam probes


@needs_compiled
@pytest.mark.parametrize("seed", range(6))
def test_made_up_firings_are_numpy_s(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rings, cols = int(rng.integers(2, 40)), int(rng.integers(5, 400))
    col_az = np.linspace(170.0, -190.0, cols) if seed % 2 else np.linspace(-179.0, 181.0, cols)
    az = col_az[None, :] + rng.uniform(-9.0, 9.0, (rings, 1))  # each ring its own offset: seams
    az = np.where(az >= 180.0, az - 360.0, np.where(az < -180.0, az + 360.0, az))
    rank = np.repeat(np.arange(rings, dtype=np.int64)[:, None], cols, axis=1)
    # the firings in time order (column by column), some dropped, some ranks missing
    rank, az = rank.T.ravel(), az.T.ravel()
    keep = rng.random(rank.size) > 0.1
    keep &= rank != rings // 2
    rank, az = rank[keep], az[keep]
    cases = [(rank, az)]
    cases.append((rank, np.round(az * 2.0) / 2.0))  # equal keys: the stable order decides
    cases.append((rank, rng.uniform(-400.0, 400.0, rank.size)))  # rings whose keys overlap
    cases.append((rank[::-1].copy(), az[::-1].copy()))  # the other way round
    shuffled = rng.permutation(rank.size)
    cases.append((rank[shuffled], np.round(az[shuffled])))
    for r, a in cases:
        want = numpy_seam_keys(r, a)
        got = _compiled(r, a)
        assert np.array_equal(got, want)


def test_what_the_compiled_step_does_not_take_runs_numpy() -> None:
    rank, az = np.array([0, 1, 0, 1], np.int64), np.array([0.0, 0.5, np.nan, 1.0])
    assert beam_steps.seam_probe_keys(rank, az, SEAM_STEPS, NEIGHBOUR_MAX_DEG) is None  # a NaN azimuth
    assert beam_steps.seam_probe_keys(rank.astype(np.int32), az, SEAM_STEPS, NEIGHBOUR_MAX_DEG) is None
    assert beam_steps.seam_probe_keys(rank * 4, np.zeros(4), SEAM_STEPS, NEIGHBOUR_MAX_DEG) is None  # rank 4
    beam_steps.enabled = False
    try:
        assert beam_steps.seam_probe_keys(rank, np.zeros(4), SEAM_STEPS, NEIGHBOUR_MAX_DEG) is None
    finally:
        beam_steps.enabled = True


@needs_compiled
@pytest.mark.parametrize("bad", [-1, 4, 2**62])
def test_the_compiled_pass_refuses_a_ring_rank_outside_the_firings(bad: int) -> None:
    rank = np.array([0, 1, bad, 1], np.int64)
    keys = np.empty(8, np.int64)
    with pytest.raises(ValueError, match=r"ring rank outside 0\.\.3"):
        beam_steps._choice.seam(rank, np.zeros(4), 4, float(SEAM_STEPS), NEIGHBOUR_MAX_DEG, keys)
