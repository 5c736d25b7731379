"""Real-time factor of the three-sensor rig (an HDL-64E on the roof, two VLP-16s at the front corners).

    .venv/bin/python tools/bench/bench_rig.py --frames 20 [--rig docs/rigs/roof-and-corners.toml]
        [--repeats 1] [--single] [--out docs/bench/rig.json]

Three paths, each what its command runs (scans into ``OUT/<sensor>/scans`` as PCD + KITTI, no rosbag):

- ``in_process``: ``rt-lidar demo --rig RIG --no-rosbag``: every sensor cast into the world directly;
- ``bridged_tcp``: ``rt-lidar serve --rig RIG`` in its own process + ``rt-lidar run --rig RIG
  --lockstep --no-rosbag`` here (one extension call per sensor a frame, the per-ray fields over TCP);
- ``bridged_shm``: the same with ``--shm`` (the per-ray fields through a shared-memory segment).

``--frames`` is the scans each sensor writes (the HDL-64E and the VLP-16s turn at 10 Hz, the sim steps
at 20 Hz). The real-time factor is sim time over the frame loop's wall time (``realtime_factor`` of the
run's ``summary.json``), and ``cpu_s_per_sim_s`` the CPU seconds every process of the run spent (its
start-up and world build included) per sim second, steadier on a loaded machine. ``--single`` also
runs the roof HDL-64E alone on the first two paths, so a loaded machine's figures can be compared as
ratios within one run. Runs alternate path by path.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from machine_record import write_json  # noqa: E402  (tools/bench, beside this script)

from rt_lidar.cli.main import main as cli_main  # noqa: E402
from rt_lidar.server.serve import ServeOptions, start_server_process  # noqa: E402
from rt_lidar.session.realtime import tune_allocator  # noqa: E402

DEFAULT_RIG = ROOT / "docs" / "rigs" / "roof-and-corners.toml"


def _cli(argv: list[str]) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli_main(argv)
    if code != 0:
        raise RuntimeError(f"rt-lidar {' '.join(argv)} exited {code}")


def _stop(proc: Any) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except Exception:
        proc.kill()
        proc.wait()


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished children (the server, once it exited)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_path(path: str, rig: str, frames: int, work: Path, single: bool = False) -> dict[str, Any]:
    """One run of ``path`` (``in_process``, ``bridged_tcp`` or ``bridged_shm``); its summary's figures."""
    cpu0 = _cpu_s()
    out = work / f"{path}{'_single' if single else ''}_{time.monotonic_ns()}"
    common = ["--frames", str(frames), "--out", str(out), "--quiet"]
    what = ["--preset", "HDL-64E"] if single else ["--rig", rig, "--no-rosbag"]
    if path == "in_process":
        _cli(["demo", *what, *common, *(["--in-process"] if single else [])])
    else:
        serve = ServeOptions(port=0, rig=None if single else rig, preset="HDL-64E", seed=0)
        proc, port = start_server_process(serve)
        try:
            argv = ["run", "--airsim", f"127.0.0.1:{port}", "--lockstep", *what, *common]
            _cli([*argv, *(["--shm"] if path == "bridged_shm" else [])])
        finally:
            _stop(proc)
    cpu_s = _cpu_s() - cpu0
    summary = json.loads((out / "summary.json").read_text())
    sim_s = float(summary.get("sim_time_s", summary.get("sim_s")))
    got: dict[str, Any] = {
        "realtime_factor": round(float(summary["realtime_factor"]), 4),
        "sim_time_s": sim_s,
        "wall_time_s": summary.get("wall_time_s", summary.get("wall_s")),
        # CPU seconds a sim second, every process of the run (world build and start-up included):
        # steadier than the wall clock on a loaded machine
        "cpu_s_per_sim_s": round(cpu_s / sim_s, 3),
    }
    bridge = summary.get("bridge")
    if isinstance(bridge, dict) and not single:
        got["transport"] = {name: b.get("transport") for name, b in bridge.items()}
        got["sector_mismatches"] = sum(int(b.get("sector_mismatches", 0)) for b in bridge.values())
    return got


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; writes ``--out`` (JSON) and prints it."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=20, help="scans each sensor writes (default 20)")
    p.add_argument("--rig", default=str(DEFAULT_RIG))
    p.add_argument("--repeats", type=int, default=1, help="runs of each path (default 1)")
    p.add_argument(
        "--single", action="store_true", help="also the roof HDL-64E alone, in-process and bridged"
    )
    p.add_argument("--paths", nargs="+", default=["in_process", "bridged_tcp", "bridged_shm"])
    p.add_argument("--out", default=str(ROOT / "docs" / "bench" / "rig.json"))
    a = p.parse_args(argv)
    tune_allocator()
    cases = [(path, False) for path in a.paths]
    if a.single:
        cases += [(path, True) for path in a.paths if path != "bridged_shm"]
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_rig_") as tmp:
        for _ in range(a.repeats):
            for path, single in cases:
                key = f"{path}{' (HDL-64E alone)' if single else ''}"
                got = run_path(path, a.rig, a.frames, Path(tmp), single)
                runs.setdefault(key, []).append(got)
                print(
                    f"{key:<32} realtime_factor {got['realtime_factor']:.3f}  "
                    f"cpu_s/sim_s {got['cpu_s_per_sim_s']}",
                    file=sys.stderr,
                    flush=True,
                )
    result = {
        "benchmark": "bench_rig",
        "command": "tools/bench/bench_rig.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "rig": os.path.relpath(a.rig, ROOT),
        "frames_per_sensor": a.frames,
        "load_avg_1min_at_end": round(os.getloadavg()[0], 2),
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "realtime_factor_median": {
            k: statistics.median(r["realtime_factor"] for r in v) for k, v in runs.items()
        },
        "cpu_s_per_sim_s_median": {
            k: statistics.median(r["cpu_s_per_sim_s"] for r in v) for k, v in runs.items()
        },
        "runs": runs,
    }
    write_json(a.out, result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
