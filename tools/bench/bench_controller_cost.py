"""The controller's own cost on one core, against a server that answers instantly.

    .venv/bin/python tools/bench/bench_controller_cost.py --out docs/bench/controller_cost.json \
        [--presets HDL-64E VLS-128] [--scans 10] [--rain 25] [--transport tcp]

What a user with Unreal on its own machine gets: the server's time is not ours, so it answers from
memory (``canned_server.py``: one rotation of the embedded street recorded once, replayed with its
times moved on, in its own process on the other core). The controller runs pinned to one core
(``os.sched_setaffinity``): ``BridgeSource`` in lockstep + ``bridge_pipeline`` (prefetch on), i.e. the
extension call and its decoding, the physics with rain (``--rain`` mm/h), the sweep into whole scans,
and one sink (KITTI ``.bin`` files, written in line). Figures: M rays/s and M points/s (points kept)
over the wall time and over the controller process's CPU time; on a loaded machine the CPU-time figure
is the closer one to a quiet core's.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy: no BLAS threads off our core
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from canned_server import record, start_canned_server
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.bridge.source import BridgeSource, bridge_pipeline
from rt_lidar.physics.weather import WeatherConfig
from rt_lidar.sensor.presets import load_preset
from rt_lidar.session.realtime import tune_allocator
from rt_lidar.sinks.base import SinkContext, make_sink
from rt_lidar.unreal_bridge import AirSimClient


def run_one(preset_name: str, scans: int, rain: float, transport: str, cpu: int, tmp: Path) -> dict[str, Any]:
    """Record, serve, and time ``scans`` whole scans of ``preset_name`` on core ``cpu``."""
    answers = tmp / f"{preset_name}.npz"
    record(preset_name, answers)
    others = sorted(os.sched_getaffinity(0) - {cpu})
    proc, port = start_canned_server(answers, cpu=others[0] if others else None)
    preset = load_preset(preset_name)
    try:
        with AirSimClient(port=port, timeout=60.0, shared_memory=transport == "shm") as client:
            client.reset()
            source = BridgeSource(client, preset, lockstep=True, sim_hz=20.0)
            weather = WeatherConfig(rain_mm_h=rain) if rain > 0 else None
            pipe = bridge_pipeline(source, 20.0, seed=0, weather=weather)
            sink = make_sink(f"kitti:{tmp / preset_name}")
            sink.open(SinkContext(preset, lockstep=True))
            try:
                for scan in pipe.scans(1):  # warm-up: the first scan (and the segment's size)
                    sink.write(scan)
                rays = points = frames = done = 0
                w0, c0 = time.perf_counter(), time.process_time()
                s0, ru0 = _cpu_of(proc.pid), resource.getrusage(resource.RUSAGE_SELF)
                while done < scans:
                    for scan in pipe.step():
                        sink.write(scan)
                        done += 1
                    assert pipe.last_stats is not None
                    rays += pipe.last_stats.fired
                    points += pipe.last_stats.kept
                    frames += 1
                wall, cpu_s = time.perf_counter() - w0, time.process_time() - c0
                server_cpu_s = _cpu_of(proc.pid) - s0
                ru1 = resource.getrusage(resource.RUSAGE_SELF)
            finally:
                pipe.close()
                sink.close()
            stats = source.stats
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    return {
        "preset": preset_name,
        "transport": stats.transport,
        "scans": scans,
        "sim_frames": frames,
        "rays": rays,
        "points_kept": points,
        "wall_s": wall,
        "cpu_s": cpu_s,
        "M_rays_per_s_wall": rays / wall / 1e6,
        "M_points_per_s_wall": points / wall / 1e6,
        "M_rays_per_s_cpu": rays / cpu_s / 1e6,
        "M_points_per_s_cpu": points / cpu_s / 1e6,
        "real_time_factor_wall": frames / 20.0 / wall,
        "server_cpu_s": server_cpu_s,
        "controller_involuntary_switches": ru1.ru_nivcsw - ru0.ru_nivcsw,
        "sector_mismatches": stats.sector_mismatches,
    }


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", nargs="+", default=["HDL-64E", "VLS-128"])
    ap.add_argument("--scans", type=int, default=10, help="timed scans per preset (after one warm-up)")
    ap.add_argument("--rain", type=float, default=25.0, help="rain rate mm/h (0: clear)")
    ap.add_argument("--transport", choices=("tcp", "shm"), default="tcp")
    ap.add_argument("--cpu", type=int, default=None, help="the controller's core (default: the first)")
    ap.add_argument("--out", type=Path, default=Path("docs/bench/controller_cost.json"))
    args = ap.parse_args()
    cpu = args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})  # this thread; the prefetch thread inherits it
    tune_allocator()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run_one(p, args.scans, args.rain, args.transport, cpu, Path(tmp)) for p in args.presets]
    result = {
        "bench": "controller_cost",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "controller_cpu": cpu,
        "rain_mm_h": args.rain,
        "sink": "kitti (.bin files, in line)",
        "rows": rows,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "note": "the load average says how busy the cores were (the run's own processes included)",
    }
    write_json(args.out, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
