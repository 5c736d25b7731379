"""Issue 18: lidar calls cast outside the server's call lock.

A full-budget lidar call (500 k rays) casts for a second or more; the lock is held only to take its
interval and a frozen view of the state, so another client's ``getCarState`` is answered meanwhile.
A prepared cast answers as if nothing happened after it was prepared; heavy casts take FIFO turns.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
from attacks import (  # tools/fuzz/attacks.py (tests/unreal_bridge/conftest.py)
    LatencyWatcher,
    full_budget_call,
)
from waiting import until

from rt_lidar.sensor.presets import load_preset
from rt_lidar.server.embedded_sim import MAX_RAYS_PER_CALL, EmbeddedSim
from rt_lidar.server.serve import ServeOptions, start_embedded_server, start_server_process
from rt_lidar.unreal_bridge import AirSimClient, CarControls
from rt_lidar.unreal_bridge.beam_call import encode_beam
from rt_lidar.unreal_bridge.casts import HEAVY_BUDGET_RAYS, CastQueue
from rt_lidar.unreal_bridge.world import World, street_scene


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc, port = start_server_process(ServeOptions(port=0, scene="street", preset="VLP-16", paused=True))
    try:
        yield proc, port
    finally:
        proc.terminate()
        proc.wait(10)


def test_get_car_state_is_answered_while_full_budget_calls_cast(
    server: tuple[subprocess.Popen[str], int],
) -> None:
    _, port = server
    beam = encode_beam(np.random.default_rng(0).uniform(-0.002, 0.002, size=(7, 2)), np.ones(7))
    watcher = LatencyWatcher("127.0.0.1", port, period_s=0.01)
    try:
        with AirSimClient("127.0.0.1", port, timeout=60.0) as client:
            calls = [full_budget_call(client, beam) for _ in range(2)]
    finally:
        line = watcher.stop()
    assert all(rays >= 490_000 for rays, _ in calls), calls
    slowest = max(s for _, s in calls)
    lat = np.array(watcher.latencies)
    assert watcher.failures == 0, line
    # under one call lock getCarState waited for the whole cast (max ~ the call's duration)
    assert lat.size >= 10, line
    assert float(np.percentile(lat, 50)) < 0.1, line
    assert float(lat.max()) < 0.5 * slowest, f"{line}; lidar calls took {calls}"


def _sim() -> EmbeddedSim:
    return EmbeddedSim(World(street_scene(0)), load_preset("VLP-16"), paused=True)


def _driven(sim: EmbeddedSim) -> None:
    sim.set_car_controls(CarControls(throttle=0.6, steering=0.3), "")
    sim.continue_for_time(0.15)


def test_a_prepared_cast_answers_as_at_its_call_whatever_happens_before_it_runs() -> None:
    ref, sim = _sim(), _sim()
    _driven(ref)
    _driven(sim)
    offsets, weights = np.array([[0.0, 0.0], [0.001, 0.0], [0.0, 0.001]]), np.ones(3)
    want_hits = ref.lidar_beam_hits("", "", offsets, weights)
    want_data = ref.lidar_data("", "")
    hits_job = sim.prepare_lidar_beam_hits("", "", offsets, weights)
    data_job = sim.prepare_lidar_data("", "")
    # everything another client could do before the casts run
    sim.set_car_controls(CarControls(throttle=-1.0, steering=-1.0), "")
    sim.continue_for_time(0.5)
    sim.car_state("")
    for name in sim.world.objects:
        sim.set_segmentation_object_id(name, 7, False)
    sim.set_weather_parameter(0, 0.5)
    sim.enable_weather(True)
    got_hits, got_data = hits_job.run(), data_job.run()
    assert hits_job.rays == len(want_hits.points) > 0
    for key in ("points", "normals", "segmentation", "ring", "time", "range", "miss"):  # byte-identical
        assert np.asarray(getattr(got_hits, key)).tobytes() == np.asarray(getattr(want_hits, key)).tobytes()
    got_info, want_info = dict(got_hits.info), dict(want_hits.info)
    got_samples, want_samples = got_info.pop("pose_samples"), want_info.pop("pose_samples")
    assert np.asarray(got_samples).tobytes() == np.asarray(want_samples).tobytes()
    assert got_info == want_info and got_hits.pose == want_hits.pose
    assert got_data.points.tobytes() == want_data.points.tobytes()
    assert got_data.segmentation.tobytes() == want_data.segmentation.tobytes()
    assert (got_data.pose, got_data.time_stamp) == (want_data.pose, want_data.time_stamp)


def test_heavy_casts_larger_than_half_the_budget_take_fifo_turns_one_at_a_time() -> None:
    queue = CastQueue(heavy_rays=10, max_light=2, heavy_budget=150)
    order: list[int] = []
    inside = [0]
    most = [0]
    lock = threading.Lock()

    def cast(i: int, rays: int) -> None:
        with queue.turn(rays):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                order.append(i)
            time.sleep(0.05)
            with lock:
                inside[0] -= 1

    threads = []
    for i in range(5):
        threads.append(threading.Thread(target=cast, args=(i, 100)))
        threads[-1].start()
        time.sleep(0.01)  # draw tickets in order
    light = threading.Thread(target=cast, args=(99, 5))
    light.start()
    for t in [*threads, light]:
        t.join(5)
    heavy_order = [i for i in order if i != 99]
    assert heavy_order == [0, 1, 2, 3, 4]
    assert most[0] <= 2  # one heavy plus the light one at most
    assert order.index(99) < 4  # the light cast did not wait for the heavy queue
    assert queue.stats["heavy"] == 5 and queue.stats["heavy_waited"] == 4
    assert queue.stats["heavy_at_once"] == 1


class _Recorder:
    """Heavy casts through a queue, each held until released, recording what runs when."""

    def __init__(self, queue: CastQueue) -> None:
        self.queue = queue
        self.started: list[str] = []
        self.running: dict[str, int] = {}
        self.most_rays = 0
        self._lock = threading.Lock()
        self._release: dict[str, threading.Event] = {}
        self._threads: list[threading.Thread] = []

    def start(self, name: str, rays: int) -> None:
        self._release[name] = threading.Event()

        def run() -> None:
            with self.queue.turn(rays):
                with self._lock:
                    self.started.append(name)
                    self.running[name] = rays
                    self.most_rays = max(self.most_rays, sum(self.running.values()))
                self._release[name].wait(5)
                with self._lock:
                    del self.running[name]

        drawn = self.queue.stats["heavy"]
        self._threads.append(threading.Thread(target=run))
        self._threads[-1].start()
        assert until(lambda: self.queue.stats["heavy"] == drawn + 1)  # tickets in the order started

    def release(self, name: str) -> None:
        self._release[name].set()
        assert until(lambda: name not in self.running)

    def has_started(self, *names: str) -> bool:
        """Whether exactly ``names`` have started, in that order (waiting a little for them)."""
        until(lambda: self.started == list(names), timeout_s=2.0)
        time.sleep(0.02)  # and nothing more starts
        return self.started == list(names)

    def join(self) -> None:
        for event in self._release.values():
            event.set()
        for t in self._threads:
            t.join(5)


def test_heavy_casts_run_together_while_their_rays_fit_the_budget_and_never_overtake() -> None:
    rec = _Recorder(CastQueue(heavy_rays=10, heavy_budget=150))
    try:
        rec.start("a", 60)
        rec.start("b", 60)  # fits beside a: 120 <= 150
        assert rec.has_started("a", "b")
        rec.start("c", 60)  # 180 > 150: waits
        rec.start("d", 20)  # would fit (140) but may not overtake c
        assert rec.has_started("a", "b")
        rec.release("a")  # b + c = 120, then d: 140
        assert rec.has_started("a", "b", "c", "d")
        rec.start("e", 400)  # larger than the budget: waits until it can run alone
        rec.release("b")
        rec.release("c")
        rec.start("f", 20)  # behind e, though it would fit beside d
        assert rec.has_started("a", "b", "c", "d")
        rec.release("d")
        assert rec.has_started("a", "b", "c", "d", "e") and rec.running == {"e": 400}
        rec.release("e")
        assert rec.has_started("a", "b", "c", "d", "e", "f")
    finally:
        rec.join()
    assert rec.most_rays == 400  # the budget, or one cast larger than it alone
    assert rec.queue.stats["heavy"] == 6 and rec.queue.stats["heavy_at_once"] == 3


def test_a_cast_queue_refuses_an_empty_budget() -> None:
    with pytest.raises(ValueError, match="heavy_budget must be >= 1 ray, got 0"):
        CastQueue(heavy_budget=0)


@pytest.mark.parametrize("max_rays", [None, 123_456])
def test_the_embedded_servers_heavy_casts_share_one_calls_ray_budget(max_rays: int | None) -> None:
    opts = ServeOptions(port=0, scene="street", preset="VLP-16", paused=True)
    if max_rays is not None:
        opts = replace(opts, max_rays=max_rays)
    srv = start_embedded_server(opts)
    try:
        assert srv.server.casts.heavy_budget == srv.sim.max_rays_per_call == (max_rays or MAX_RAYS_PER_CALL)
    finally:
        srv.close()
    assert HEAVY_BUDGET_RAYS == MAX_RAYS_PER_CALL  # the bare server's default is the sim's call budget
