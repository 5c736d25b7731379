"""End-to-end behaviour of the frame loop on analytic scenes and on the default street."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scenes import glass_scene, targets_scene, wall_scene

from rt_lidar.physics.model import PhysicsConfig
from rt_lidar.pipeline.builder import build_pipeline
from rt_lidar.pipeline.frame_loop import CAST_AHEAD, frame_workers
from rt_lidar.pipeline.sources import Capabilities
from rt_lidar.points import PointFlag
from rt_lidar.sensor.presets import list_presets, load_preset
from rt_lidar.sensor.scan_pattern import firings_per_scan
from rt_lidar.unreal_bridge.world import World


def _with_scan(preset, **changes):
    return dataclasses.replace(preset, scan=dataclasses.replace(preset.scan, **changes))


def _central_ring(preset) -> int:
    return int(np.argmin(np.abs(preset.elevations_deg)))


@pytest.mark.parametrize("name", list_presets())
def test_every_preset_runs_the_whole_pipeline(name):
    built = build_pipeline(name, wall_scene(20.0), sim_hz=30.0)
    scans = built.pipeline.scans(1)
    scan = scans[0]
    assert scan.fired == firings_per_scan(built.preset)
    assert scan.points.size > 0
    assert (scan.points["t"] >= 0).all()
    assert scan.points["ring"].max() < built.preset.n_rings
    r = np.sqrt(scan.points["x"] ** 2 + scan.points["y"] ** 2 + scan.points["z"] ** 2)
    assert r.max() <= built.preset.range.max_m + 1.0


@pytest.mark.parametrize("name", ["VLP-16", "OS1-64"])
def test_range_to_a_plane_is_right_within_the_noise(name):
    preset = load_preset(name)
    built = build_pipeline(preset, wall_scene(25.0), sim_hz=20.0)
    pts = built.pipeline.scans(1)[0].points
    # the strong returns within 30 deg of the normal: the datasheet accuracy (weak returns far out on
    # the wall jitter as 1 / sqrt(SNR), test_radar_equation.py)
    near_normal = np.abs(pts["y"]) < np.tan(np.radians(30.0)) * pts["x"]
    front = pts[(pts["x"] > 0) & near_normal & ((pts["flags"] & PointFlag.AMBIENT_NOISE) == 0)]
    assert front.size > 100
    err = front["x"] - 25.0
    sigma = preset.range.accuracy_m
    assert abs(float(err.mean())) < 0.2 * sigma + 1e-3
    assert float(err.std()) == pytest.approx(sigma, rel=0.5)
    assert np.abs(err).max() < 6 * sigma * np.sqrt(2)


def test_no_noise_means_exact_ranges():
    built = build_pipeline("VLP-16", wall_scene(25.0), physics=PhysicsConfig(range_noise=False))
    pts = built.pipeline.scans(1)[0].points
    front = pts[pts["x"] > 0]
    np.testing.assert_allclose(front["x"], 25.0, atol=2e-4)


@pytest.mark.parametrize("sim_hz", [20.0, 37.0, 333.3])
def test_ego_motion_gives_the_analytic_seam(sim_hz):
    """Ego at 20 m/s towards a wall, 10 Hz sensor cutting the scan straight ahead: the wall seen at the
    end of the rotation is 2.0 m closer than at its start."""
    preset = _with_scan(load_preset("HDL-64E"), rotation_hz=10.0, scan_start_azimuth_deg=0.0)
    built = build_pipeline(preset, wall_scene(60.0, ego_speed=20.0), sim_hz=sim_hz)
    scan = built.pipeline.scans(2)[1]
    pts = scan.points
    az = np.degrees(np.arctan2(pts["y"], pts["x"]))
    period_ns = 100_000_000
    ahead = np.abs(az) < 2.0
    first = ahead & (pts["t"] < 0.01 * period_ns)
    last = ahead & (pts["t"] > 0.99 * period_ns)
    assert first.sum() > 20 and last.sum() > 20
    # x of a point on the wall = 60 - ego travel at its firing time; remove the (small) in-window spread
    x_first = pts["x"][first] + 20.0 * pts["t"][first] * 1e-9
    x_last = pts["x"][last] + 20.0 * (pts["t"][last] * 1e-9 - 0.1)
    seam = float(np.mean(x_first) - np.mean(x_last))
    assert seam == pytest.approx(2.0, abs=0.02)
    # and the raw jump between the last and first firings straight ahead is 2 m less one firing step
    assert float(np.mean(pts["x"][first]) - np.mean(pts["x"][last])) == pytest.approx(2.0, abs=0.05)


def test_intensity_orders_retro_paint_asphalt():
    mats = ["plate_sheeting", "lane_paint", "asphalt"]
    built = build_pipeline("VLP-16", targets_scene(mats, 15.0))
    pts = built.pipeline.scans(1)[0].points
    seg_of = {m: 10 + i for i, m in enumerate(mats)}
    mean = {m: float(pts["intensity"][pts["segment"] == s].mean()) for m, s in seg_of.items()}
    assert mean["plate_sheeting"] > mean["lane_paint"] > mean["asphalt"] > 0
    assert mean["plate_sheeting"] > 100  # Velodyne: retro-reflectors above 100


def test_glass_drops_rays():
    built = build_pipeline("VLP-16", glass_scene(10.0))
    scan = built.pipeline.scans(1)[0]
    # rays through the pane have nothing behind them: only the near-normal mirror echo may come back
    through = scan.points[scan.points["segment"] == 3]
    az = np.degrees(np.arctan2(scan.points["y"], scan.points["x"]))
    pane_rays = scan.fired * (2 * np.degrees(np.arctan(5.0 / 10.0))) / 360.0
    assert through.size < 0.05 * pane_rays
    assert (
        np.abs(az[scan.points["segment"] == 3]) < 2.0
    ).all()  # a glint only within ~2 deg of normal incidence at 10 m


def test_same_seed_gives_byte_identical_scans_and_another_seed_does_not():
    def run(seed):
        b = build_pipeline("VLP-16", "street", seed=seed, sim_hz=25.0)
        return b.pipeline.scans(2)[1].points.tobytes()

    a, b, c = run(1), run(1), run(2)
    assert a == b
    assert a != c


def test_sim_rate_does_not_change_the_scan():
    def run(hz):
        cfg = PhysicsConfig(range_noise=False, receiver_noise=False)  # no random draws: per-frame streams
        b = build_pipeline("VLP-16", wall_scene(30.0), sim_hz=hz, physics=cfg)
        return b.pipeline.scans(2)[1]

    a, b = run(20.0), run(71.0)
    assert a.fired == b.fired
    np.testing.assert_array_equal(np.sort(a.points["t"]), np.sort(b.points["t"]))


def test_street_scene_sees_the_street():
    built = build_pipeline("HDL-64E", "street", sim_hz=20.0)
    scan = built.pipeline.scans(1)[0]
    world: World = built.world
    names = world.material_names
    assert scan.points.size > 50_000
    assert 0.0 < scan.drop_fraction < 0.6
    seen = set(np.unique(scan.points["segment"]).tolist())
    assert len(seen) > 20
    assert set(world.segment_ids().values()) & seen
    assert len(names) >= 10


def test_a_user_mesh_file_is_a_scene(tmp_path):
    import trimesh

    box = trimesh.creation.box(extents=(1.0, 40.0, 10.0))
    box.apply_translation((12.0, 0.0, 1.0))
    path = tmp_path / "wall.ply"
    box.export(path)
    built = build_pipeline("VLP-16", str(path), physics=PhysicsConfig(range_noise=False))
    pts = built.pipeline.scans(1)[0].points
    front = pts[np.abs(np.degrees(np.arctan2(pts["y"], pts["x"]))) < 30]
    # the box's near face is at x = 11.5; the sensor sits 1.8 m up at the origin
    np.testing.assert_allclose(front["x"], 11.5, atol=1e-3)
    with pytest.raises(ValueError, match="unknown scene 'nowhere'"):
        build_pipeline("VLP-16", "nowhere")


def test_prefetching_gives_the_same_scans():
    def run(prefetch):
        b = build_pipeline("VLP-16", "street", seed=4, sim_hz=30.0, prefetch=prefetch)
        try:
            return [s.points.tobytes() for s in b.pipeline.scans(3)]
        finally:
            b.pipeline.close()

    plain = run(False)
    assert run(True) == plain
    assert run(4) == plain  # four frames cast ahead (VLP-16's are small: one at a time)


def test_frames_cast_at_the_same_time_give_the_scans_of_one_split_cast():
    """HDL-64E frames are large enough for World.cast to split each over two threads; with frames
    cast ahead each is cast whole on a thread of its own, several at once: the bytes are the same."""

    def run(prefetch):
        b = build_pipeline("HDL-64E", "street", seed=2, sim_hz=20.0, prefetch=prefetch)
        try:
            scans = [s.points.tobytes() for s in b.pipeline.scans(2)]
            return scans, b.pipeline.source.cast_threads, b.pipeline._pool
        finally:
            b.pipeline.close()

    split, threads, pool = run(False)
    assert threads is None and pool is None
    whole, threads, _ = run(CAST_AHEAD)
    assert threads == 1
    assert whole == split


def test_a_started_pipeline_gives_the_same_scans_and_casts_its_first_frames_side_by_side():
    """``start`` starts every cast thread before the first frame; frame 0 is then cast beside
    frame 1 (not alone in the loop's thread), and the bytes are those of an unstarted pipeline."""
    import threading
    import time

    def run(start: bool):
        b = build_pipeline("HDL-64E", "street", seed=2, sim_hz=20.0, prefetch=CAST_AHEAD)
        pipe, spans = b.pipeline, {}
        hits = pipe.source.hits

        def timed(firings, t0, t1):
            began = time.perf_counter()
            out = hits(firings, t0, t1)
            time.sleep(0.05)  # long enough that casts on two threads overlap whatever the machine
            spans[t0] = (threading.current_thread().name, began, time.perf_counter())
            return out

        pipe.source.hits = timed
        try:
            if start:
                pipe.start()
                pipe.start()  # idempotent
                names = {t.name for t in threading.enumerate() if t.name.startswith("rt-lidar-prefetch")}
                assert len(names) == frame_workers(pipe.source, CAST_AHEAD, 66_656) == 2
            scans = [s.points.tobytes() for s in pipe.scans(2)]
        finally:
            pipe.close()
        return scans, spans

    plain, _ = run(False)
    started, spans = run(True)
    assert started == plain
    (name0, a0, b0), (name1, a1, b1) = spans[0], spans[50_000_000]
    assert name0.startswith("rt-lidar-prefetch") and name1.startswith("rt-lidar-prefetch")
    assert name0 != name1 and a1 < b0 and a0 < b1  # frames 0 and 1 in flight at once


def test_a_cast_thread_that_cannot_start_fails_start_at_once(monkeypatch):
    """A thread whose set-up fails (here its memory touch) makes ``start`` raise the pool's error at
    once instead of waiting for the other threads."""
    import threading
    import time
    from concurrent.futures.thread import BrokenThreadPool

    from rt_lidar.pipeline import frame_loop

    def broken(nbytes: int) -> int:  # fails in the cast threads, not in the loop's own
        if threading.current_thread() is not threading.main_thread():
            raise MemoryError("no memory for the cast thread")
        return 0

    monkeypatch.setattr(frame_loop, "prefault_heap", broken)
    b = build_pipeline("HDL-64E", "street", seed=2, sim_hz=20.0, prefetch=CAST_AHEAD)
    began = time.perf_counter()
    try:
        with pytest.raises(BrokenThreadPool, match="initializer failed"):
            b.pipeline.start()
    finally:
        b.pipeline.close()
    assert time.perf_counter() - began < 10.0


def test_only_an_in_process_world_casts_frames_at_the_same_time():
    b = build_pipeline("VLP-16", "street", seed=4)

    class Remote:  # any other source: a server answers in order, one frame at a time
        capabilities = Capabilities()

    assert frame_workers(b.pipeline.source, 1, 70_000) == 1
    assert frame_workers(b.pipeline.source, CAST_AHEAD, 70_000) >= 2
    assert frame_workers(b.pipeline.source, CAST_AHEAD, 5_000) == 1  # small frames: one at a time
    assert frame_workers(Remote(), CAST_AHEAD, 70_000) == 1  # type: ignore[arg-type]


def test_lookahead_casts_ahead_and_survives_a_jump():
    b = build_pipeline("VLP-16", "street", seed=4, sim_hz=30.0, prefetch=3)
    pipe = b.pipeline
    try:
        pipe.step()
        assert [k for k, _ in pipe._pending] == [1, 2, 3]
        pipe.frame = 7  # a jump: the frames asked for are dropped and the lookahead starts again
        pipe.step()
        assert [k for k, _ in pipe._pending] == [8, 9, 10]
    finally:
        pipe.close()
    assert not pipe._pending
    with pytest.raises(ValueError, match="prefetch must be a bool or a number of frames >= 0, got -1"):
        build_pipeline("VLP-16", "street", prefetch=-1)


def test_scans_say_when_the_pipeline_had_their_last_sector() -> None:
    import time

    from rt_lidar.pipeline.builder import build_pipeline

    pipe = build_pipeline("VLP-16", "street", seed=0).pipeline
    before = time.time_ns()
    scans = pipe.scans(2)
    after = time.time_ns()
    stamps = [s.sim_wall_ns for s in scans]
    assert all(t is not None and before <= t <= after for t in stamps) and stamps[0] < stamps[1]


def test_rotating_by_one_quaternion_broadcast_gives_the_bits_of_the_same_quaternion_on_every_row() -> None:
    """The sensor not turning: its one quaternion broadcast to every ray is taken as four scalars,
    the same float32 products as the quaternion written out on every row."""
    from rt_lidar.pipeline.sources import _rotate_f32, _rows_f32

    rng = np.random.default_rng(5)
    v = rng.normal(size=(1000, 3)).astype(np.float32)
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    one = _rows_f32(np.broadcast_to(q, (1000, 4)))
    assert one.strides[0] == 0
    every = np.ascontiguousarray(one)
    assert _rotate_f32(one, v).tobytes() == _rotate_f32(every, v).tobytes()
    w, x, y, z = q
    r = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    np.testing.assert_allclose(_rotate_f32(one, v), v.astype(np.float64) @ r.T, atol=1e-5)


def test_the_once_per_run_work_is_done_before_the_first_frame(monkeypatch) -> None:
    """The scan's firing table and the compiled physics' check are made when the loop is built (before
    a run's clock starts), not by its first frame: frame 0 builds neither."""
    from rt_lidar.physics import fused
    from rt_lidar.sensor import scan_pattern

    scan_pattern._scan_table.cache_clear()
    fused.powf_is_numpys.cache_clear()
    built = build_pipeline("VLS-128", wall_scene(25.0), sim_hz=20.0)
    assert scan_pattern._scan_table.cache_info().currsize == 1
    assert fused.powf_is_numpys.cache_info().currsize == (1 if fused.available() else 0)
    tables, checks = scan_pattern._scan_table.cache_info(), fused.powf_is_numpys.cache_info()
    built.pipeline.step()
    assert scan_pattern._scan_table.cache_info().misses == tables.misses
    assert fused.powf_is_numpys.cache_info().misses == checks.misses


def test_the_embedded_server_builds_its_lidars_firing_tables_before_the_first_answer() -> None:
    from rt_lidar.sensor import scan_pattern
    from rt_lidar.server.embedded_sim import EmbeddedSim

    scan_pattern._scan_table.cache_clear()
    sim = EmbeddedSim(World(wall_scene(25.0)), load_preset("HDL-64E"), paused=True)
    assert scan_pattern._scan_table.cache_info().currsize == 1
    built = scan_pattern._scan_table.cache_info().misses
    sim.continue_for_time(0.05)
    assert len(sim.lidar_hits("", "").points) > 0
    assert scan_pattern._scan_table.cache_info().misses == built
