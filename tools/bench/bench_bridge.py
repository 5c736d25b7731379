"""Our AirSimClient vs the stock airsim 1.8.1 client on the same 100k-point getLidarData answer.

    .venv/bin/python tools/bench/bench_bridge.py --out bench_bridge.json [--points 100000] [--reps 30]

One run: starts an AirSimServer (own process) whose lidar answers ``--points`` points, times
``get_lidar_data`` with our client in this process and ``getLidarData`` with the stock client in a
subprocess of the peer venv (``tools/setup_airsim_peer.sh``, default ``.venv-airsim``), both against
that server, and writes medians and the ratio stock / ours to ``--out``.

Three figures: end to end (request to arrays, server work and the loopback transfer included), the
client's own work on the same captured answer bytes (decode to arrays, stock: to ``LidarData`` and to
NumPy), and the floor no client can go under: the same request on a raw socket that only receives
the answer's bytes (``server_and_transfer_ms_median``).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.session.realtime import tune_allocator
from rt_lidar.unreal_bridge import (
    AirSimClient,
    AirSimServer,
    FluPose,
    LidarFrame,
    SimBackend,
    fast_decode,
    wire,
)

ROOT = Path(__file__).resolve().parents[2]

STOCK_SCRIPT = r"""
import json, sys, time
import airsim
c = airsim.CarClient(port=int(sys.argv[1]), timeout_value=60)
reps = int(sys.argv[2])
d = c.getLidarData()
times = []
for _ in range(reps):
    t0 = time.perf_counter()
    d = c.getLidarData()
    times.append(time.perf_counter() - t0)
# client-side cost alone: decode the captured answer bytes as msgpackrpc + airsim do
import msgpack, numpy as np
raw = open(sys.argv[3], "rb").read()
dec, dec_np = [], []
for _ in range(reps):
    t0 = time.perf_counter()
    u = msgpack.Unpacker()
    u.feed(raw)
    msg = next(u)
    d = airsim.LidarData.from_msgpack(msg[3])
    t1 = time.perf_counter()
    pts = np.array(d.point_cloud, dtype=np.float32).reshape(-1, 3)
    dec.append(t1 - t0)
    dec_np.append(time.perf_counter() - t0)
print(json.dumps({"times": times, "n_values": len(d.point_cloud), "decode": dec, "decode_numpy": dec_np}))
"""


class _PlaneLidar:
    """Only what getLidarData needs: a fixed grid of points on a plane, ids 0..255."""

    def __init__(self, n: int) -> None:
        side = int(np.ceil(np.sqrt(n)))
        i = np.arange(n)
        self.points = np.stack([(i % side) * 0.05 + 1.0, (i // side) * 0.05 - 5.0, np.full(n, -1.7)], 1)
        self.points = self.points.astype(np.float32)
        self.segmentation = (i % 256).astype(np.int32)

    def lidar_data(self, lidar_name: str, vehicle_name: str) -> LidarFrame:
        return LidarFrame(self.points, self.segmentation, FluPose(), 123_456_789)


def serve(points: int) -> None:
    """Serve the plane lidar on a free loopback port; print the port; run until stdin closes."""
    server = AirSimServer(cast(SimBackend, _PlaneLidar(points)), port=0).start()
    print(server.port, flush=True)
    sys.stdin.read()
    server.close()


def capture_answer(port: int) -> bytes:
    """The raw bytes of one getLidarData answer, read off a plain socket."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"\x94\x00\x00\xacgetLidarData\x92\xa0\xa0")  # [0, 0, "getLidarData", ["", ""]]
        buf = b""
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed before answering")
            buf += chunk
            try:
                end = fast_decode.decode(buf, 0)[1]
                return buf[:end]
            except fast_decode.Truncated:
                continue


def raw_roundtrip_ms(port: int, answer_bytes: int, reps: int) -> float:
    """Median ms from sending the request to holding every answer byte, decoding nothing."""
    times = []
    buf = bytearray(answer_bytes)
    view = memoryview(buf)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        for _ in range(reps + 1):
            t0 = time.perf_counter()
            sock.sendall(b"\x94\x00\x00\xacgetLidarData\x92\xa0\xa0")
            got = 0
            while got < answer_bytes:
                n = sock.recv_into(view[got:])
                if not n:
                    raise ConnectionError("server closed before answering")
                got += n
            times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times[1:])


def our_decode_ms(answer: bytes, reps: int) -> float:
    """Median ms for our client's work on the answer bytes: decode to arrays and convert the frame."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        msg = fast_decode.decode(answer, 0, {"point_cloud": np.float32, "segmentation": np.int32})[0]
        wire.ned_to_flu_points(msg[3]["point_cloud"], copy=False)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--peer", type=Path, default=ROOT / ".venv-airsim", help="peer venv with airsim 1.8.1")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    tune_allocator()  # as the rt-lidar CLI runs our client and server (the stock client runs untouched)
    if args.serve:
        serve(args.points)
        return 0

    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--out", "-", "--points", str(args.points)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        with AirSimClient(port=port) as client:
            frame = client.get_lidar_data()
            ours = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                frame = client.get_lidar_data()
                ours.append(time.perf_counter() - t0)
        assert frame.points.shape == (args.points, 3)
        answer = capture_answer(port)
        result: dict[str, Any] = {
            "answer_bytes": len(answer),
            "points": args.points,
            "reps": args.reps,
            "ours_ms_median": 1e3 * statistics.median(ours),
            "ours_ms_min": 1e3 * min(ours),
            "ours_decode_ms_median": our_decode_ms(answer, args.reps),
            "server_and_transfer_ms_median": raw_roundtrip_ms(port, len(answer), args.reps),
        }
        peer_python = args.peer / "bin" / "python"
        if peer_python.exists():
            with tempfile.NamedTemporaryFile(suffix=".msgpack") as tmp:
                tmp.write(answer)
                tmp.flush()
                proc = subprocess.run(
                    [peer_python, "-c", STOCK_SCRIPT, str(port), str(args.reps), tmp.name],
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=True,
                )
            stock = json.loads(proc.stdout.strip().splitlines()[-1])
            assert stock["n_values"] == 3 * args.points
            result["stock_ms_median"] = 1e3 * statistics.median(stock["times"])
            result["stock_ms_min"] = 1e3 * min(stock["times"])
            result["ratio_stock_over_ours"] = result["stock_ms_median"] / result["ours_ms_median"]
            result["stock_decode_ms_median"] = 1e3 * statistics.median(stock["decode"])
            result["stock_decode_to_numpy_ms_median"] = 1e3 * statistics.median(stock["decode_numpy"])
            result["decode_ratio_stock_over_ours"] = (
                result["stock_decode_ms_median"] / result["ours_decode_ms_median"]
            )
            result["decode_to_numpy_ratio_stock_over_ours"] = (
                result["stock_decode_to_numpy_ms_median"] / result["ours_decode_ms_median"]
            )
        else:
            result["stock"] = f"skipped: no peer venv at {args.peer} (tools/setup_airsim_peer.sh)"
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(10)
    write_json(args.out, result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
