"""Run ``rt-lidar`` and record the CPU time its frame loop took (every thread, the sinks' last writes
included): ``python tools/bench/cpu_probe.py OUT.json rt-lidar-arguments...``.

The clock starts when the frame loop's threads are ready (the first ``Pipeline.start`` or
``RigLoop.start`` returns, where ``rt-lidar demo`` starts its wall clock) and stops when the scan loop
returns with every sink closed (``run_scans``; a rig's ``drive_rig``, its rosbag written too). Imports,
building the world, the range image written after the loop and the shutdown are left out. It patches
only those functions, so it measures any checkout's code alike (``bench_beam_full.py --before``): the
one on ``PYTHONPATH`` runs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> int:
    """Run the CLI with ``argv[1:]``, write the loop's CPU seconds to ``argv[0]``; the CLI's exit code."""
    import rt_lidar.pipeline.scan_loop as scan_loop
    import rt_lidar.rig.run as rig_run
    from rt_lidar.cli.main import main as cli_main
    from rt_lidar.pipeline.frame_loop import Pipeline
    from rt_lidar.rig.loop import RigLoop

    started: list[float] = []
    ended: list[float] = []

    def timed(start: Any) -> Any:
        def wrapper(self: Any) -> None:
            start(self)
            if not started:
                started.append(time.process_time())

        return wrapper

    def until_return(run: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            got = run(*args, **kwargs)
            ended.append(time.process_time())
            return got

        return wrapper

    Pipeline.start = timed(Pipeline.start)  # type: ignore[method-assign]
    RigLoop.start = timed(RigLoop.start)  # type: ignore[method-assign]
    scan_loop.run_scans = until_return(scan_loop.run_scans)
    rig_run.drive_rig = until_return(rig_run.drive_rig)
    try:
        code = cli_main(argv[1:])
    except SystemExit as exc:
        code = int(exc.code or 0)
    end = time.process_time()
    loop_cpu = ended[0] - started[0] if started and ended else None
    Path(argv[0]).write_text(json.dumps({"loop_cpu_s": loop_cpu, "process_cpu_s": end}))
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
