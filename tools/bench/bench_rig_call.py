"""Cost of one rig lidar's extension call against ``rt-lidar serve --rig`` (the per-call pose work).

    PYTHONPATH=. .venv/bin/python tools/bench/bench_rig_call.py [--rig docs/rigs/roof-and-corners.toml]

Prints medians: a ``rtLidarGetHits`` with no new firings, client to client over TCP; and server side
only (sweep + answer encoding, no transfer), a call after the clock advanced 0.5 ms and after a whole
20 Hz frame. Compare two versions by running each in turn, interleaved, on one machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rt_lidar.rig import load_rig  # noqa: E402
from rt_lidar.server.serve import ServeOptions, start_embedded_server  # noqa: E402
from rt_lidar.unreal_bridge import AirSimClient  # noqa: E402
from rt_lidar.unreal_bridge.hits_codec import encode_hits  # noqa: E402


def _server_side(sim, names: list[str], step_s: float, frames: int) -> float:
    times = []
    for _ in range(frames):
        sim.continue_for_time(step_s)
        for n in names:
            t = time.perf_counter()
            encode_hits(sim.lidar_hits(n, ""))
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    """Measure and print the figures as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rig", default=str(ROOT / "docs" / "rigs" / "roof-and-corners.toml"))
    args = ap.parse_args()
    names = list(load_rig(args.rig).names)
    served = start_embedded_server(ServeOptions(port=0, rig=args.rig, paused=True, seed=0))
    out: dict[str, float] = {}
    try:
        with AirSimClient("127.0.0.1", served.port, timeout=60.0) as client:
            for n in names:
                client.rt_lidar_get_hits(n)
            runs = []
            for _ in range(5):
                t = time.perf_counter()
                for _ in range(60):
                    for n in names:
                        client.rt_lidar_get_hits(n)
                runs.append((time.perf_counter() - t) / (60 * len(names)))
            out["client_call_no_new_firings_ms"] = statistics.median(runs) * 1e3
        out["server_call_0_5ms_of_firings_ms"] = _server_side(served.sim, names, 0.0005, 50)
        out["server_call_20hz_frame_ms"] = _server_side(served.sim, names, 0.05, 10)
    finally:
        served.close()
    print(json.dumps({k: round(v, 3) for k, v in out.items()}))


if __name__ == "__main__":
    main()
