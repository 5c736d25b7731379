"""Thread CPU a sim frame of the moving objects' part of every world cast of a demo, step by step.

    PYTHONPATH=. .venv/bin/python tools/bench/bench_moving_casts.py [--frames 6] -- DEMO-OPTIONS

e.g. ``-- --in-process --preset HDL-64E --beam full --return-mode dual --rain 25`` (the rain row).
Seed 3, the cast on the calling thread (no cast ahead, one cast thread); each step timed in thread CPU
time by a wrapper around the function that runs it (nested steps count in each): the whole of
``MovingObjects.cast``, the per-object casts at per-ray times, the culling bound of the origins, the
swept spheres and boxes, and the trajectories' poses at the rays' times. Run it with ``PYTHONPATH``
naming another checkout to time that one: it wraps functions both have.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

STEPS = (
    ("moving", "MovingObjects", "cast"),
    ("moving", "MovingObjects", "_cast_moving_at"),
    ("moving", None, "_spread"),
    ("moving", "MovingObjects", "_sweeps"),
    ("trajectory", "Looping", "positions_rotations"),
    ("trajectory", "WaypointTrajectory", "positions_rotations"),
    ("trajectory", "ConstantVelocity", "positions_rotations"),
)


def _timed(table: dict[str, list[float]], key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kw: Any) -> Any:
        c = time.thread_time()
        try:
            return fn(*args, **kw)
        finally:
            table[key][0] += 1
            table[key][1] += time.thread_time() - c

    return run


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=6, help="scans (two sim frames each)")
    parser.add_argument("demo", nargs="*", help="rt-lidar demo options (after --)")
    args = parser.parse_args()

    import rt_lidar.pipeline.frame_loop as frame_loop
    import rt_lidar.unreal_bridge.world.raycast as raycast
    from rt_lidar.unreal_bridge.world import moving, trajectory

    frame_loop.CAST_AHEAD = 0  # api.in_process_pipeline reads it here: no cast ahead
    raycast._N_THREADS = 1
    table: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    modules = {"moving": moving, "trajectory": trajectory}
    for mod, cls, name in STEPS:
        owner = modules[mod] if cls is None else getattr(modules[mod], cls, None)
        if owner is not None and hasattr(owner, name):
            setattr(owner, name, _timed(table, f"{cls + '.' if cls else ''}{name}", getattr(owner, name)))
    from rt_lidar.cli.main import main as rt_lidar

    with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()):
        demo = ["demo", "--quiet", "--out", d, "--seed", "3", "--frames", str(args.frames), *args.demo]
        if rt_lidar(demo) != 0:
            return 1
    sim_frames = 2 * args.frames
    for key, (calls, cpu) in table.items():
        print(f"{key:40s} {calls / sim_frames:6.1f} calls {cpu * 1000 / sim_frames:7.2f} ms a sim frame")
    return 0


if __name__ == "__main__":
    sys.exit(main())
