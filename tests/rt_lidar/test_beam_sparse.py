"""``--beam full``'s sparse bundle (:mod:`rt_lidar.pipeline.beam_sparse`): the dense 19-sub-ray bundle
with its rim thinned to every other sub-ray, each weighted for two; the pulses without the bundle stay the
single-ray model bit for bit, the bundled ones are the dense bundle's kept sub-rays bit for bit, and the
CLI and config.json name the bundle that ran. Its statistics against dense sampling are held by
tests/rt_lidar/test_beam_full_fidelity.py (the tolerances of docs/beam-full.md)."""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from rt_lidar.cli.main import main as rt_lidar
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.pipeline.beam_full import _PER_RAY, bundle_that_runs, full_beam_plan, take_firings
from rt_lidar.pipeline.beam_probe import probe_pattern
from rt_lidar.pipeline.beam_sparse import sparse_bundle
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.sensor.beam import FULL_BEAM_SUB_RAYS, BeamConfig, subray_pattern
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between

KEPT = [*range(7), *range(7, 19, 2)]
"""The dense 19's sub-rays the sparse bundle keeps: the centre, the inner ring of 6 and every other of
the rim's 12, from its first."""
CAST = len(KEPT)


@pytest.mark.parametrize("preset", ["HDL-64E", "VLP-16", "VLS-128"])
def test_the_sparse_bundle_is_the_dense_one_with_every_other_rim_sub_ray(preset: str) -> None:
    p = load_preset(preset)
    dense = subray_pattern(p, FULL_BEAM_SUB_RAYS)
    sparse = sparse_bundle(dense)
    assert len(sparse) == CAST == 13
    assert np.array_equal(sparse.offsets_rad, dense.offsets_rad[KEPT])
    w = dense.weights.astype(np.float64)
    folded = np.array([*w[:7], *(w[k] + w[k + 1] for k in KEPT[7:])])
    np.testing.assert_allclose(sparse.weights, folded / folded.sum(), rtol=1e-6)
    assert abs(float(sparse.weights.sum()) - 1.0) < 1e-6
    # the footprint and the probes at its rim are the dense bundle's (to the last bits of a float)
    d_plan = full_beam_plan(p, np.zeros(1))
    s_plan = full_beam_plan(p, np.zeros(1), bundle="sparse")
    assert s_plan.bundle == "sparse" and s_plan.stands_for == FULL_BEAM_SUB_RAYS
    assert s_plan.footprint_rad == pytest.approx(d_plan.footprint_rad, rel=1e-12)
    np.testing.assert_allclose(
        probe_pattern(s_plan.pattern).offsets_rad, probe_pattern(d_plan.pattern).offsets_rad, atol=1e-15
    )


def test_a_sparse_bundle_needs_full_rings() -> None:
    p = load_preset("HDL-64E")
    with pytest.raises(ValueError, match="even count"):
        sparse_bundle(subray_pattern(p, 18))
    with pytest.raises(ValueError, match="an inner ring"):
        sparse_bundle(subray_pattern(p, 7))
    runs = [bundle_that_runs(n, "sparse") for n in (7, 13, 19, 37, 61, 91, 127)]
    assert runs == ["dense", "dense", "sparse", "dense", "sparse", "dense", "sparse"]
    for n in (19, 61, 127):  # the thinned rim keeps the dense rim's widest offsets: the same probes
        dense = subray_pattern(p, n)
        np.testing.assert_allclose(
            probe_pattern(sparse_bundle(dense)).offsets_rad, probe_pattern(dense).offsets_rad, atol=1e-15
        )
    assert bundle_that_runs(19, "dense") == "dense"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built = build_pipeline("VLP-16", "street", physics=PhysicsConfig(beam=BeamConfig(13, full=True)))
    try:
        plan = built.pipeline.source.full_beam
        assert plan is not None and plan.bundle == "dense" and len(plan.pattern) == 13
        assert built.pipeline.physics.beam.bundle == "dense"
    finally:
        built.pipeline.close()
    assert any("cast whole" in str(w.message) for w in caught)


def test_the_bundled_pulses_are_the_dense_bundles_kept_sub_rays_bit_for_bit() -> None:
    """The sparse bundle's rays are the dense bundle's kept rays: the same starts, the same hits."""
    cfg = PhysicsConfig(beam=BeamConfig(return_mode="dual", full=True))
    built = build_pipeline("HDL-64E", "street", seed=3, physics=cfg)
    pipe = built.pipeline
    try:
        source = pipe.source
        assert source.full_beam is not None and source.full_beam.bundle == "sparse"
        dense = subray_pattern(pipe.preset, FULL_BEAM_SUB_RAYS)
        t0, t1 = pipe.frame_interval(2)
        f = firings_between(pipe.preset, t0, t1)
        hits = source.hits(f, t0, t1)
        bundle = hits.bundle
        assert bundle is not None and 0 < bundle.pulses.size < hits.pulses
        assert bundle.hits.subrays == CAST
        again = source.beam_hits(take_firings(f, bundle.pulses), t0, t1, dense, None)
        for name in (
            "range_m",
            "cos_incidence",
            "material",
            "segment",
            "glass_range_m",
            "glass_transmission",
        ):
            want = getattr(again, name).reshape(bundle.pulses.size, FULL_BEAM_SUB_RAYS)[:, KEPT]
            got = getattr(bundle.hits, name).reshape(bundle.pulses.size, CAST)
            assert np.array_equal(got, want, equal_nan=True), name
    finally:
        pipe.close()


def _sensed(beam: BeamConfig, frames: int = 2) -> list:
    """The sensed frames of the street (VLP-32C, seed 3) without random draws in the physics."""
    cfg = PhysicsConfig(beam=beam, receiver_noise=False, range_noise=False)
    built = build_pipeline("VLP-32C", "street", seed=3, physics=cfg)
    out: list = []
    built.pipeline.on_sensed = out.append
    try:
        for _ in range(frames):
            built.pipeline.step()
    finally:
        built.pipeline.close()
    return out


def _by_pulse(points: np.ndarray) -> dict[tuple[int, int, int], bytes]:
    return {(int(p["t"]), int(p["ring"]), int(p["return_id"])): p.tobytes() for p in points}


def test_the_pulses_without_the_bundle_stay_single_ray_bit_for_bit() -> None:
    n_plain = n_bundled = 0
    for f, s in zip(
        _sensed(BeamConfig(return_mode="dual", full=True)), _sensed(BeamConfig(1, "dual")), strict=True
    ):
        bundle = f.hits.bundle
        assert bundle is not None and bundle.hits.subrays == CAST
        key = np.stack([f.hits.firings.t_ns, f.hits.firings.ring.astype(np.int64)], axis=1)
        bundled = {(int(t), int(r)) for t, r in key[bundle.pulses]}
        got, want = _by_pulse(f.result.points), _by_pulse(s.result.points)
        plain = {k for k in got if (k[0], k[1]) not in bundled}
        assert plain == {k for k in want if (k[0], k[1]) not in bundled}
        assert all(got[k] == want[k] for k in plain)
        n_plain += len(plain)
        n_bundled += len(got) - len(plain)
    assert n_plain > 0 and n_bundled > 0


def test_the_cli_names_the_bundle_that_ran(tmp_path: Path) -> None:
    for beam, want in (("full", "sparse"), ("full-dense", "dense")):
        out = tmp_path / beam
        args = ["demo", "--in-process", "--preset", "VLP-16", "--frames", "1", "--beam", beam]
        with contextlib.redirect_stdout(io.StringIO()) as said:
            assert rt_lidar([*args, "--out", str(out)]) == 0
        summary = json.loads((out / "summary.json").read_text())["beam"]
        line = f"of pulses cast as the {FULL_BEAM_SUB_RAYS}-sub-ray bundle"
        assert line + (f", sparse ({CAST} sub-rays)" if want == "sparse" else "\n") in said.getvalue()
        assert summary["mode"] == "full" and summary["bundle"] == want
        assert summary["sub_rays"] == FULL_BEAM_SUB_RAYS
        assert summary["cast_sub_rays"] == (CAST if want == "sparse" else FULL_BEAM_SUB_RAYS)
        config = json.loads((out / "config.json").read_text())
        assert json.dumps(config).count(f'"bundle": "{want}"') == 1


@pytest.mark.parametrize(("preset", "bundle"), [("HDL-64E", "sparse"), ("VLP-16", "dense")])
def test_the_bundles_centre_taken_from_the_central_ray_is_the_bundle_cast_whole(
    preset: str, bundle: str
) -> None:
    """The bundle's sub-ray 0 is not cast again: the central ray stands in for it, every field bit for bit
    what casting the whole bundle gives (sunlight and a wet road's mirror rays and spray included)."""
    cfg = PhysicsConfig(
        beam=BeamConfig(return_mode="dual", full=True, bundle=bundle),
        sun_illuminance_lux=50_000.0,
        weather=WeatherConfig(road_wetness=0.8),
    )
    built = build_pipeline(preset, "street", seed=3, physics=cfg)
    pipe = built.pipeline
    try:
        source = pipe.source
        for k in (1, 2):
            t0, t1 = pipe.frame_interval(k)
            f = firings_between(pipe.preset, t0, t1)
            got = source.hits(f, t0, t1).bundle
            assert got is not None and got.pulses.size > 0
            whole = source.beam_hits(
                take_firings(f, got.pulses), t0, t1, source.full_beam.pattern, source._sun
            )
            assert got.hits.subrays == whole.subrays == len(source.full_beam.pattern)
            assert got.hits.subray_weight.tobytes() == whole.subray_weight.tobytes()
            assert got.hits.wet is not None and got.hits.sun_cos is not None
            for name in _PER_RAY:
                a, b = getattr(got.hits, name), getattr(whole, name)
                assert (a is None) == (b is None), name
                assert a is None or a.tobytes() == b.tobytes(), name
    finally:
        pipe.close()
