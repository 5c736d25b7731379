"""``rt-lidar run --lockstep --realtime``: the sim clock is held to the wall clock, never ahead of it;
when the run cannot keep up, the progress line, a warning and ``summary.json`` say by how much.

The pacer alone on a scripted clock, then whole runs of the controller (its own process) against our
server on loopback, whose ``simContinueForTime`` calls are timed where they land."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from served import served

from rt_lidar.bridge.pacing import RealtimePacer
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.server.serve import ServeOptions, start_embedded_server

REPO = Path(__file__).resolve().parents[2]
FRAME_NS = 50_000_000  # 20 Hz


class ScriptedClock:
    """A wall clock that moves only when slept on or told to (``work``)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def work(self, seconds: float) -> None:
        self.now += seconds


def test_pacer_releases_each_frame_at_its_wall_time_never_before() -> None:
    clock = ScriptedClock()
    pacer = RealtimePacer(1.0, 20.0, clock=clock, sleep=clock.sleep)
    start = clock.now + 0.01  # the first request anchors sim time 0 to the wall clock
    for k in range(10):
        clock.work(0.01)  # a frame's work takes 10 ms of its 50
        pacer.hold(k * FRAME_NS, (k + 1) * FRAME_NS)
        assert clock.now - start == pytest.approx((k + 1) * 0.05)  # sim t_(k+1) at wall t_(k+1)
    s = pacer.summary()
    assert s["achieved"] == pytest.approx(1.0) and s["late_frames"] == 0 and s["behind_s_max"] == 0.0
    assert s["held_s"] == pytest.approx(0.05 + 9 * 0.04)
    assert pacer.live_text() == "1.00x"


def test_pacer_falling_behind_says_by_how_much_and_catches_up_without_passing() -> None:
    clock = ScriptedClock()
    pacer = RealtimePacer(2.0, 20.0, clock=clock, sleep=clock.sleep)  # twice real time
    start = clock.now
    pacer.hold(0, FRAME_NS)
    assert clock.now - start == pytest.approx(0.025)
    clock.work(0.3)  # a stall: the next frames are late
    pacer.hold(FRAME_NS, 2 * FRAME_NS)
    assert pacer.behind_s == pytest.approx(0.325 - 0.05) and pacer.late_frames == 1  # due at 2 x 25 ms
    assert pacer.live_text().endswith(f" -{0.275:.1f}s")
    for k in range(2, 20):  # quick frames: released at once until caught up, then held again
        clock.work(0.001)
        pacer.hold(k * FRAME_NS, (k + 1) * FRAME_NS)
        assert clock.now - start >= (k + 1) * 0.025 - 1e-9  # never ahead of 2x the wall clock
    assert pacer.behind_s == 0.0 and pacer.behind_s_max == pytest.approx(0.275)
    assert pacer.summary()["achieved"] == pytest.approx(2.0)


def test_pacer_restart_does_not_count_the_time_between_connections() -> None:
    clock = ScriptedClock()
    pacer = RealtimePacer(1.0, 20.0, clock=clock, sleep=clock.sleep)
    for k in range(4):
        pacer.hold(k * FRAME_NS, (k + 1) * FRAME_NS)
    clock.work(30.0)  # the server was away
    pacer.restart()
    for k in range(4, 8):
        pacer.hold(k * FRAME_NS, (k + 1) * FRAME_NS)
    assert pacer.late_frames == 0 and pacer.summary()["achieved"] == pytest.approx(1.0)


@pytest.fixture
def timed_server() -> Iterator[tuple[int, list[tuple[float, int]]]]:
    """Our server on a free port, paused, its clock's every ``simContinueForTime`` timed: (wall s on
    the monotonic clock every process shares, sim ns after it)."""
    with served("VLP-16") as (sim, server):
        advances: list[tuple[float, int]] = []
        original = sim.continue_for_time
        lock = threading.Lock()

        def timed(seconds: float, _sim: EmbeddedSim = sim) -> None:
            original(seconds)
            with lock:
                advances.append((time.monotonic(), _sim.now_ns()))

        sim.continue_for_time = timed  # type: ignore[method-assign]
        yield server.port, advances


def run_live(
    port: int, out: Path, *extra: str, frames: int = 6
) -> tuple[subprocess.CompletedProcess[str], float]:
    args = ["run", "--lockstep", "--airsim", f"127.0.0.1:{port}", "--preset", "VLP-16"]
    args += ["--frames", str(frames), "--out", str(out), "--no-scans", "--sink", f"pcd:{out}/pcd", *extra]
    t0 = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "rt_lidar.cli.main", *args],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    return run, time.monotonic() - t0


def test_a_realtime_run_never_runs_the_sim_ahead_of_the_wall_clock(
    tmp_path: Path, timed_server: tuple[int, list[tuple[float, int]]]
) -> None:
    port, advances = timed_server
    run, took = run_live(port, tmp_path / "live", "--realtime", "--quiet", frames=8)
    assert run.returncode == 0, run.stderr
    summary = json.loads((tmp_path / "live" / "summary.json").read_text())
    sim_s = summary["sim_time_s"]
    assert summary["frames"] == 8 and sim_s == pytest.approx(8 * 0.1)  # VLP-16: 10 Hz, 2 sim frames a scan
    assert took >= sim_s and summary["wall_time_s"] >= sim_s - 0.05
    # every advance of the sim lands no earlier than the wall clock allows, counted from the first (the
    # first frame is released one frame after the pacer's origin; 0.1 s for loopback and scheduling on
    # a loaded machine: the unpaced run below gains ~0.5 s over the same frames)
    assert len(advances) >= 16
    w1, s1 = advances[0]
    for w, s in advances[1:]:
        assert (s - s1) * 1e-9 <= (w - w1) + 0.1, f"sim {(s - s1) * 1e-9:.3f} s ahead of wall {w - w1:.3f} s"
    rt = summary["realtime"]
    assert rt["target"] == 1.0 and rt["achieved"] <= 1.01 and rt["frames"] >= 16
    assert set(rt) >= {"behind_s_max", "late_frames", "achieved"}


def test_without_realtime_the_same_run_is_not_paced(
    tmp_path: Path, timed_server: tuple[int, list[tuple[float, int]]]
) -> None:
    port, advances = timed_server
    run, _ = run_live(port, tmp_path / "free", "--quiet", frames=8)
    assert run.returncode == 0, run.stderr
    summary = json.loads((tmp_path / "free" / "summary.json").read_text())
    assert "realtime" not in summary
    (w1, s1), (wn, sn) = advances[0], advances[-1]
    assert (sn - s1) * 1e-9 > (wn - w1) + 0.2  # unpaced, the sim runs ahead of the wall clock


def test_a_run_that_cannot_keep_up_says_by_how_much(
    tmp_path: Path, timed_server: tuple[int, list[tuple[float, int]]]
) -> None:
    port, _ = timed_server
    run, _ = run_live(port, tmp_path / "fast", "--realtime", "50", frames=4)  # 50x real time: no chance
    assert run.returncode == 0, run.stderr
    rt = json.loads((tmp_path / "fast" / "summary.json").read_text())["realtime"]
    assert rt["target"] == 50.0 and rt["achieved"] < 50.0
    assert rt["late_frames"] > 0 and rt["behind_s_max"] > 0.0
    warning = [ln for ln in run.stderr.splitlines() if ln.startswith("rt-lidar run: warning: --realtime 50")]
    assert len(warning) == 1 and "could not keep up" in warning[0] and "s behind the wall clock" in warning[0]
    assert "realtime=" in run.stderr  # the progress line carried the live figure


def test_realtime_needs_lockstep(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "rt_lidar.cli.main", "run", "--realtime", "--airsim", "127.0.0.1:9"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and run.stderr.strip() == (
        "rt-lidar run: error: --realtime needs --lockstep (free run follows the server's own clock)"
    )


TWO_VLP16 = """
[[sensor]]
name = "left"
preset = "VLP-16"
mount = { xyz = [1.0, 0.8, 1.5], rpy_deg = [0.0, 0.0, 30.0] }

[[sensor]]
name = "right"
preset = "VLP-16"
mount = { xyz = [1.0, -0.8, 1.5], rpy_deg = [0.0, 0.0, -30.0] }
"""


def test_a_rig_run_is_paced_too(tmp_path: Path) -> None:
    rig = tmp_path / "rig.toml"
    rig.write_text(TWO_VLP16)
    served_rig = start_embedded_server(ServeOptions(port=0, rig=str(rig), paused=True))
    advances: list[tuple[float, int]] = []
    original = served_rig.sim.continue_for_time

    def timed(seconds: float) -> None:
        original(seconds)
        advances.append((time.monotonic(), served_rig.sim.now_ns()))

    served_rig.sim.continue_for_time = timed  # type: ignore[method-assign]
    try:
        args = [
            "run",
            "--rig",
            str(rig),
            "--airsim",
            f"127.0.0.1:{served_rig.port}",
            "--lockstep",
            "--realtime",
        ]
        args += ["--frames", "3", "--out", str(tmp_path / "rig"), "--quiet", "--no-rosbag"]
        run = subprocess.run(
            [sys.executable, "-m", "rt_lidar.cli.main", *args],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        served_rig.close()
    assert run.returncode == 0, run.stderr
    rt = json.loads((tmp_path / "rig" / "summary.json").read_text())["realtime"]
    assert rt["target"] == 1.0 and rt["achieved"] <= 1.01 and rt["frames"] >= 6
    w1, s1 = advances[0]
    for w, s in advances[1:]:
        assert (s - s1) * 1e-9 <= (w - w1) + 0.1


def test_the_stream_carries_the_pace_to_the_viewers_hud(
    tmp_path: Path, timed_server: tuple[int, list[tuple[float, int]]]
) -> None:
    import zmq

    from rt_lidar.viewer.help_text import live_lines

    port, _ = timed_server
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        stream_port = s.getsockname()[1]
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(f"tcp://127.0.0.1:{stream_port}")  # before the run binds: no scan is missed
    headers: list[dict[str, object]] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            if sub.poll(100):
                parts = sub.recv_multipart()
                header = json.loads(parts[0])
                if header.get("kind") == "scan":
                    headers.append(header)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        run, _ = run_live(
            port, tmp_path / "live", "--realtime", "--quiet", "--sink", f"zmq:tcp://127.0.0.1:{stream_port}"
        )
        assert run.returncode == 0, run.stderr
        time.sleep(0.3)
    finally:
        stop.set()
        reader.join(5)
        sub.close()
    assert headers, "no scan came over the stream"
    live = headers[-1]["live"]
    assert isinstance(live, dict) and str(live["realtime"]).endswith("x")
    (line,) = live_lines(headers[-1])
    assert line.startswith("run      realtime ") and line.endswith("x")
