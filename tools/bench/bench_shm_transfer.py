"""Per-frame transfer of one sim frame's hits: TCP against the same-host shared-memory path.

    .venv/bin/python tools/bench/bench_shm_transfer.py --out docs/bench/shm_transfer.json \
        [--preset HDL-64E] [--frames 150]

Records one rotation of real answers from the embedded street (``canned_server.py``) and replays them
from a server in its own process, so nothing is cast: what is timed is the extension call itself,
``AirSimClient.rt_lidar_get_hits`` from request to decoded arrays (the server's encoding and
packing, each call, as the embedded server does; the transfer; the client's decoding). TCP and shared
memory alternate in blocks of 10 calls on two connections to the same server, so both see the same
load. The decoded answers of the two paths are compared byte for byte.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from canned_server import record, start_canned_server
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.session.realtime import tune_allocator
from rt_lidar.unreal_bridge import AirSimClient, LidarHits


def _same(a: LidarHits, b: LidarHits) -> bool:
    core = ("points", "normals", "segmentation", "ring", "time", "range", "miss")
    if any(getattr(a, f).tobytes() != getattr(b, f).tobytes() for f in core):
        return False
    if a.extras.keys() != b.extras.keys() or a.info != b.info or a.pose != b.pose:
        return False
    return all(a.extras[k].tobytes() == b.extras[k].tobytes() for k in a.extras)


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.array(xs), q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="HDL-64E")
    ap.add_argument("--frames", type=int, default=150, help="timed calls per transport")
    ap.add_argument("--out", type=Path, default=Path("docs/bench/shm_transfer.json"))
    args = ap.parse_args()
    tune_allocator()
    with tempfile.TemporaryDirectory() as tmp:
        answers = Path(tmp) / "answers.npz"
        t0 = time.perf_counter()
        record(args.preset, answers)
        record_s = time.perf_counter() - t0
        proc, port = start_canned_server(answers, prepack=False)
        try:
            tcp = AirSimClient(port=port, timeout=60.0)
            shm = AirSimClient(port=port, timeout=60.0, shared_memory=True)
            times: dict[str, list[float]] = {"tcp": [], "shm": []}
            sizes: dict[str, int] = {}
            for c in (tcp, shm):  # warm-up: the segment is sized by the first answer
                for _ in range(3):
                    c.rt_lidar_get_hits()
            while len(times["shm"]) < args.frames:
                for name, c in (("tcp", tcp), ("shm", shm)):
                    for _ in range(10):
                        t = time.perf_counter()
                        h = c.rt_lidar_get_hits()
                        times[name].append(time.perf_counter() - t)
                    assert c.transport == name, (c.transport, c.shm_refused)
                    sizes[name] = len(h.points)
            # the same recorded frames both ways (the server counts calls: reset before each)
            got: dict[str, list[LidarHits]] = {}
            for name, c in (("tcp", tcp), ("shm", shm)):
                c.reset()
                got[name] = [c.rt_lidar_get_hits() for _ in range(3)]
            identical = all(_same(a, b) for a, b in zip(got["tcp"], got["shm"], strict=True))
            tcp.close()
            shm.close()
        finally:
            proc.stdin.close()  # type: ignore[union-attr]
            proc.wait(10)
    rays = sizes["tcp"]
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    result = {
        "bench": "shm_transfer",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "preset": args.preset,
        "rays_per_frame": rays,
        "bytes_per_frame_fields": _field_bytes(rays),
        "calls_per_transport": len(times["tcp"]),
        "tcp_ms_median": med["tcp"],
        "tcp_ms_p10": _pct(times["tcp"], 10) * 1e3,
        "tcp_ms_p90": _pct(times["tcp"], 90) * 1e3,
        "shm_ms_median": med["shm"],
        "shm_ms_p10": _pct(times["shm"], 10) * 1e3,
        "shm_ms_p90": _pct(times["shm"], 90) * 1e3,
        "speedup_median": med["tcp"] / med["shm"],
        "identical_answers": identical,
        "record_s": record_s,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "note": "the load average says how busy the cores were (the run's own processes included)",
    }
    write_json(args.out, result)
    print(json.dumps(result, indent=2))


def _field_bytes(rays: int) -> int:
    """Bytes of the per-ray fields the embedded server sends for ``rays`` one-ray pulses."""
    per_ray = 12 + 12 + 4 + 2 + 8 + 4 + 1  # point, normal, segmentation, ring, time, range, miss
    per_ray += 12 + 4 + 4 + 4 + 4 + 4 + 8 + 4  # direction, cos_incidence, material, glass_*
    return rays * per_ray


if __name__ == "__main__":
    main()
