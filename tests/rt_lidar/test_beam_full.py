"""``--beam full``: which pulses get the bundle, and that each group keeps its own exact physics."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from beam_setup import full_beam_source, world_source

from rt_lidar.physics.beam_full import merge_detections
from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.physics.returns import Detections
from rt_lidar.pipeline.beam_full import bundle_pulses, take_pulses
from rt_lidar.pipeline.builder import build_pipeline, build_world
from rt_lidar.pipeline.sources import WorldSource
from rt_lidar.points import PointFlag
from rt_lidar.sensor.beam import FULL_BEAM_SUB_RAYS, BeamConfig
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.unreal_bridge.world import MeshObject, Pose, Scene, StaticTrajectory, World

ROOT = Path(__file__).resolve().parents[2]


def _quiet_physics(beam: BeamConfig) -> PhysicsConfig:
    """No random draw in the physics: the points are a function of the hits alone."""
    return PhysicsConfig(beam=beam, receiver_noise=False, range_noise=False)


def _points_by_pulse(points: np.ndarray) -> dict[tuple[int, int, int], np.ndarray]:
    return {(int(p["t"]), int(p["ring"]), int(p["return_id"])): p for p in points}


def _sensed(preset: str, beam: BeamConfig, frames: int = 3) -> list:
    built = build_pipeline(preset, "street", seed=3, physics=_quiet_physics(beam))
    out: list = []
    built.pipeline.on_sensed = out.append
    try:
        for _ in range(frames):
            built.pipeline.step()
    finally:
        built.pipeline.close()
    return out


def test_plain_pulses_are_single_ray_and_bundled_pulses_are_the_dense_bundle() -> None:
    """Without random draws, every point of ``--beam full`` is bit for bit the single-ray run's point of
    that pulse (pulses without the bundle) or the 19-sub-ray run's (pulses with it)."""
    full = _sensed("VLP-32C", BeamConfig(return_mode="dual", full=True, bundle="dense"))
    single = _sensed("VLP-32C", BeamConfig(1, "dual"))
    dense = _sensed("VLP-32C", BeamConfig(FULL_BEAM_SUB_RAYS, "dual"))
    n_plain = n_bundle = 0
    for f, s, d in zip(full, single, dense, strict=True):
        bundle = f.hits.bundle
        assert bundle is not None and 0 < bundle.pulses.size < f.hits.pulses
        key = np.stack([f.hits.firings.t_ns, f.hits.firings.ring.astype(np.int64)], axis=1)
        bundled = {(int(t), int(r)) for t, r in key[bundle.pulses]}
        want_single = _points_by_pulse(s.result.points)
        want_dense = _points_by_pulse(d.result.points)
        got = _points_by_pulse(f.result.points)
        for k, p in got.items():
            ref = want_dense if (k[0], k[1]) in bundled else want_single
            assert k in ref, k
            assert p.tobytes() == ref[k].tobytes()
        for ref, in_bundle in ((want_single, False), (want_dense, True)):
            keys = {k for k in ref if ((k[0], k[1]) in bundled) == in_bundle}
            assert keys <= set(got)  # nothing lost either way
        n_bundle += sum((k[0], k[1]) in bundled for k in got)
        n_plain += sum((k[0], k[1]) not in bundled for k in got)
    assert n_plain > 0 and n_bundle > 0


def _wall_scene() -> Scene:
    """A wall 10 m ahead whose left half (y > 0) stands 4 m nearer: one vertical depth edge at y = 0."""
    names = list(Scene(objects=[]).material_names)
    concrete = names.index("concrete")

    def panel(name: str, x: float, y0: float, y1: float, seg: int) -> MeshObject:
        v = np.array([[x, y0, -5], [x, y1, -5], [x, y1, 5], [x, y0, 5]], np.float32)
        f = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
        return MeshObject(name, v, f, np.full(2, concrete, np.int16), seg)

    objs = [panel("far", 10.0, -8.0, 0.0, 1), panel("near", 6.0, 0.0, 8.0, 1)]
    return Scene(objects=objs, ego=StaticTrajectory(Pose.identity()), sensor_mount=Pose.identity())


def test_bundle_goes_to_the_pulses_beside_a_depth_edge_only() -> None:
    preset = load_preset("VLP-16")
    world = World(_wall_scene())
    source, plan = full_beam_source(preset, world)
    f = firings_between(preset, 0, 100_000_000)
    central = source.hits(f, 0, 100_000_000)
    chosen, reasons = bundle_pulses(f, central, plan)
    facing = (np.abs(f.azimuth_deg) < 30) & (np.abs(f.elevation_deg) < 15)
    az = f.azimuth_deg
    step = 0.5  # deg: a few firings either side of the edge (y = 0 is azimuth 0)
    near_edge = facing & (np.abs(az) <= step)
    inside = facing & (np.abs(az) > 3 * step) & (np.abs(az) < 20)
    assert chosen[near_edge].any()
    assert not chosen[inside].any()  # flat walls square on: one ray is exact there
    assert reasons["edge"] > 0 and reasons["glass"] == 0 and reasons["retro"] == 0


def test_take_pulses_and_merge_keep_pulse_order() -> None:
    def det(pulse: list[int], rid: list[int]) -> Detections:
        n = len(pulse)
        r = np.arange(n, dtype=np.float32) + 10 * np.asarray(pulse, np.float32)
        return Detections(
            np.asarray(pulse, np.int64),
            np.asarray(rid, np.uint8),
            r,
            r,
            r,
            np.zeros(n, np.uint32),
            np.zeros(n, np.uint8),
        )

    plain = np.array([0, 2, 5])
    bundled = np.array([1, 3, 4])
    merged = merge_detections([(plain, det([0, 1, 2], [0, 0, 0])), (bundled, det([0, 0, 2], [0, 1, 0]))])
    assert merged.pulse.tolist() == [0, 1, 1, 2, 4, 5]
    assert merged.return_id.tolist() == [0, 0, 1, 0, 0, 0]
    assert merged.epw_ns is None

    preset = load_preset("VLP-16")
    world = build_world("street", seed=1)
    src = world_source(preset, world)
    f = firings_between(preset, 0, 5_000_000)
    hits = src.hits(f, 0, 5_000_000)
    idx = np.array([3, 7, 11])
    sub = take_pulses(hits, idx)
    assert sub.pulses == 3 and np.array_equal(sub.range_m, hits.range_m[idx])
    assert np.array_equal(sub.firings.t_ns, f.t_ns[idx])


def test_summary_beam_section_and_config(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "rt_lidar.cli.main",
        "demo",
        "--in-process",
        "--preset",
        "VLP-16",
        "--frames",
        "2",
        "--beam",
        "full",
        "--return-mode",
        "dual",
        "--quiet",
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, check=True, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    summary = json.loads((out / "summary.json").read_text())
    beam = summary["beam"]
    said = f"--beam full: {100 * beam['bundled_share']:.1f} % of pulses cast as the 19-sub-ray bundle"
    assert said in done.stdout
    assert beam["mode"] == "full" and beam["sub_rays"] == FULL_BEAM_SUB_RAYS
    assert 0 < beam["bundled_pulses"] < beam["pulses"]
    assert beam["bundled_share"] == pytest.approx(beam["bundled_pulses"] / beam["pulses"])
    config = json.loads((out / "config.json").read_text())
    assert json.dumps(config).count('"full": true') == 1


def test_fixed_beam_summary_names_the_sub_rays(tmp_path: Path) -> None:
    built = build_pipeline("VLP-16", "street", physics=PhysicsConfig(beam=BeamConfig(sub_rays=3)))
    from rt_lidar.pipeline.beam_full import beam_summary

    got = beam_summary(built.pipeline)
    built.pipeline.close()
    assert got == {"mode": "fixed", "sub_rays": 3, "return_mode": "strongest"}


class _NoFullBeam:
    """A source without the capability: ``negotiate`` must say so and fall back to the dense bundle."""

    def __init__(self, inner: WorldSource) -> None:
        self.inner = inner
        self.asked: int | None = None

    @property
    def material_names(self) -> list[str]:
        return self.inner.material_names

    @property
    def capabilities(self):
        import dataclasses

        return dataclasses.replace(self.inner.capabilities, full_beam=False)

    def use_beam(self, pattern, sun=None):
        self.asked = len(pattern)
        return self.inner.use_beam(pattern, sun)


def test_a_source_without_full_beam_warns_and_casts_the_dense_bundle() -> None:
    from rt_lidar.pipeline.builder import negotiate

    preset = load_preset("VLP-16")
    world = build_world("street", seed=1)
    plain = world_source(preset, world)
    src = _NoFullBeam(plain)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ran = negotiate(src, preset, PhysicsConfig(beam=BeamConfig(full=True)))  # type: ignore[arg-type]
    assert any("--beam full" in str(w.message) for w in caught)
    assert src.asked == FULL_BEAM_SUB_RAYS
    assert ran.beam is not None and not ran.beam.full and ran.beam.sub_rays == FULL_BEAM_SUB_RAYS


def _scan_bytes(tmp: Path, name: str, extra: list[str], env: dict[str, str] | None = None) -> list[bytes]:
    import os

    out = tmp / name
    cmd = [sys.executable, "-m", "rt_lidar.cli.main", "demo", "--in-process", "--preset", "VLP-16"]
    cmd += ["--frames", "2", "--beam", "full", "--return-mode", "dual", "--rain", "25", "--quiet"]
    cmd += ["--out", str(out), *extra]
    full_env = dict(os.environ)
    full_env.pop("RT_LIDAR_NO_TWINS", None)
    full_env.update(env or {})
    subprocess.run(cmd, check=True, cwd=tmp, capture_output=True, timeout=120, env=full_env)
    return [f.read_bytes() for f in sorted((out / "scans").glob("*.bin"))]


def test_full_beam_repeats_bit_for_bit(tmp_path: Path) -> None:
    """The determinism contract for ``--beam full`` (docs/determinism.md): the same seed gives the same
    scan bytes, with the NumPy code alone too; another seed does not."""
    first = _scan_bytes(tmp_path, "a", [])
    assert first and first == _scan_bytes(tmp_path, "b", [])
    assert first == _scan_bytes(tmp_path, "numpy", [], {"RT_LIDAR_NO_TWINS": "1"})
    assert first != _scan_bytes(tmp_path, "seed", ["--seed", "9"])


def test_frames_cast_ahead_on_threads_give_the_same_full_beam_scans() -> None:
    from rt_lidar.pipeline.frame_loop import CAST_AHEAD

    cfg = PhysicsConfig(beam=BeamConfig(return_mode="dual", full=True))

    def scans(prefetch: int) -> list[bytes]:
        built = build_pipeline("VLP-32C", "street", seed=2, physics=cfg, prefetch=prefetch)
        try:
            return [s.points.tobytes() for s in built.pipeline.scans(2)]
        finally:
            built.pipeline.close()

    assert scans(0) == scans(CAST_AHEAD)


def test_power_faults_act_on_the_bundled_pulses_too() -> None:
    """A blockage leaves no point in its sector, from plain and bundled pulses alike (but the receiver's
    own false alarms, which need no echo)."""
    from rt_lidar.faults.spec import faults_from_table
    from rt_lidar.faults.wiring import fault_plan

    faults = faults_from_table({"fault": [{"kind": "blockage", "azimuth_deg": [60, 150]}]}, "test")
    built = build_pipeline("VLP-16", "street", seed=0, physics=PhysicsConfig(beam=BeamConfig(full=True)))
    plan = fault_plan(faults, built.pipeline.preset, 0)
    assert plan is not None
    built.pipeline.on_hits = plan.on_hits
    bundled_in_sector = 0
    sensed: list = []
    built.pipeline.on_sensed = sensed.append
    try:
        scans = built.pipeline.scans(2)
    finally:
        built.pipeline.close()
    for s in sensed:
        b = s.hits.bundle
        if b is not None:
            az = b.hits.firings.azimuth_deg
            bundled_in_sector += int(np.count_nonzero((az > 61) & (az < 149)))
    assert bundled_in_sector > 0  # the sector has pulses that got the bundle
    for scan in scans:
        p = scan.points[(scan.points["flags"] & PointFlag.AMBIENT_NOISE) == 0]
        az = np.degrees(np.arctan2(p["y"], p["x"]))
        assert not np.any((az > 60.5) & (az < 149.5))


def test_a_full_beam_run_re_runs_from_its_config_json(tmp_path: Path) -> None:
    first = _scan_bytes(tmp_path, "a", [])
    cmd = [sys.executable, "-m", "rt_lidar.cli.main", "demo", "--config", str(tmp_path / "a" / "config.json")]
    cmd += ["--quiet", "--out", str(tmp_path / "again")]
    subprocess.run(cmd, check=True, cwd=tmp_path, capture_output=True, timeout=120)
    again = [f.read_bytes() for f in sorted((tmp_path / "again" / "scans").glob("*.bin"))]
    assert again == first
    assert json.loads((tmp_path / "again" / "summary.json").read_text())["beam"]["mode"] == "full"


def test_full_beam_of_one_sub_ray_is_refused_in_one_line(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "rt_lidar.cli.main", "demo", "--in-process", "--preset", "VLP-16"]
    cmd += ["--frames", "1", "--beam", "full", "--sub-rays", "1", "--out", str(tmp_path / "x")]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "sub_rays" in lines[0] and "--beam full" in lines[0] and "2..127" in lines[0]


def test_take_pulses_of_a_bundle_takes_each_pulses_rows() -> None:
    """Of a bundle (several rows a pulse), every per-ray field of the pulses taken is their rows
    ``pulse * n + k`` in order (the block-wise gather gives the row-wise one's elements), negative
    indices as NumPy takes them."""
    from rt_lidar.pipeline.beam_full import _PER_RAY
    from rt_lidar.sensor.beam import subray_pattern

    preset = load_preset("VLP-16")
    world = build_world("street", seed=1)
    src = world_source(preset, world)
    f = firings_between(preset, 0, 2_000_000)
    pattern = subray_pattern(preset, 7)
    hits = src.beam_hits(f, 0, 2_000_000, pattern)
    n = hits.subrays
    assert n == 7
    for idx in (np.array([5, 0, 11, 11, 3]), np.array([-1, 2], np.int32), np.zeros(0, np.int64)):
        sub = take_pulses(hits, idx)
        rows = (np.asarray(idx, np.int64)[:, None] * n + np.arange(n)).ravel()
        assert sub.pulses == idx.size
        checked = 0
        for name in _PER_RAY:
            got, whole = getattr(sub, name), getattr(hits, name)
            if whole is None:
                assert got is None
                continue
            assert got.dtype == whole.dtype
            assert np.array_equal(got, whole[rows], equal_nan=got.dtype.kind == "f")
            checked += 1
        assert checked >= 10
