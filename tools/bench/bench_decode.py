"""Decoding a ``getLidarData`` answer shaped as AirSim's own server packs it: ours against the stock client.

    .venv/bin/python tools/bench/bench_decode.py --out docs/bench/decode.json [--points 100000] [--reps 20]

AirSim's server is C++ (rpclib on msgpack-c), which writes every int in its smallest form: a
segmentation array whose ids run over 0..255 mixes positive fixints (0..127, one byte), ``0xcc``
uint8 elements (128..255, two bytes) and ``-1`` (no object) as a negative fixint; the points are
float32 (``0xca``). The answers are built here exactly so (msgpack-python's packer writes ints in the
same smallest forms; the float32 array by NumPy), for ``--points`` points:

- ``mixed``: ids uniform over 0..255, one in ten -1 (the realistic case);
- ``uniform``: every id in 0..127 (one type byte for the whole array: the fast case);

and decoded to NumPy arrays (points in the project frame, int32 ids) by our client's decoder
(``fast_decode.decode`` + the frame conversion, as ``AirSimClient.get_lidar_data``) in this process,
and by the stock ``airsim`` 1.8.1 client (``msgpack`` + ``LidarData.from_msgpack`` + ``np.array``) in the
peer venv (``tools/setup_airsim_peer.sh``, default ``.venv-airsim``). Both decodes are checked against
the ids and points the answer was built from. Medians of ``--reps`` runs; the answers are the same bytes
for both clients.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.session.realtime import tune_allocator
from rt_lidar.unreal_bridge import fast_decode, wire

ROOT = Path(__file__).resolve().parents[2]

STOCK_SCRIPT = r"""
import json, sys, time
import msgpack, numpy as np
import airsim
raw = open(sys.argv[1], "rb").read()
reps = int(sys.argv[2])
dec, dec_np = [], []
for _ in range(reps):
    t0 = time.perf_counter()
    u = msgpack.Unpacker()
    u.feed(raw)
    msg = next(u)
    d = airsim.LidarData.from_msgpack(msg[3])
    t1 = time.perf_counter()
    pts = np.array(d.point_cloud, dtype=np.float32).reshape(-1, 3)
    seg = np.array(d.segmentation, dtype=np.int32)
    dec.append(t1 - t0)
    dec_np.append(time.perf_counter() - t0)
np.save(sys.argv[3], seg)
np.save(sys.argv[4], pts)
print(json.dumps({"decode": dec, "decode_numpy": dec_np}))
"""
_ARRAYS = {"point_cloud": np.float32, "segmentation": np.int32}


def build_answer(points: np.ndarray, ids: np.ndarray) -> bytes:
    """A msgpack-RPC response ``[1, 0, nil, LidarData]`` as msgpack-c packs AirSim's struct."""
    packer = msgpack.Packer(use_single_float=True, use_bin_type=True)
    pose = {
        "position": {"x_val": 1.0, "y_val": 2.0, "z_val": -1.5},
        "orientation": {"w_val": 1.0, "x_val": 0.0, "y_val": 0.0, "z_val": 0.0},
    }
    body = [
        b"\x94\x01\x00\xc0",  # [1, 0, nil, ...]
        b"\x84",  # LidarData: MSGPACK_DEFINE_MAP(time_stamp, point_cloud, pose, segmentation)
        packer.pack("time_stamp"),
        packer.pack(123_456_789_000),
        packer.pack("point_cloud"),
        fast_decode.pack_float32_array(points.ravel()),
        packer.pack("pose"),
        packer.pack(pose),
        packer.pack("segmentation"),
        packer.pack(ids.tolist()),  # each int in its smallest form, as msgpack-c writes it
    ]
    return b"".join(body)


def ours(answer: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Our client's decode of a getLidarData answer to arrays (as ``AirSimClient.get_lidar_data``)."""
    msg = fast_decode.decode(answer, 0, _ARRAYS)[0]
    raw = msg[3]
    points = wire.ned_to_flu_points(np.asarray(raw["point_cloud"], np.float32).ravel(), copy=False)
    return points, np.asarray(raw["segmentation"], np.int32).ravel()


def time_ours(answer: bytes, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        ours(answer)
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("docs/bench/decode.json"))
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--peer", type=Path, default=ROOT / ".venv-airsim", help="peer venv with airsim 1.8.1")
    args = ap.parse_args()
    tune_allocator()  # as the rt-lidar CLI runs our client (the stock client runs untouched)
    rng = np.random.default_rng(0)
    n = args.points
    points = (rng.normal(size=(n, 3)) * 20).astype(np.float32)
    cases = {
        "mixed": np.where(rng.random(n) < 0.1, -1, rng.integers(0, 256, n)),
        "uniform": rng.integers(0, 128, n),
    }
    peer_python = args.peer / "bin" / "python"
    result: dict[str, Any] = {
        "bench": "decode",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "points": n,
        "reps": args.reps,
    }
    for name, ids in cases.items():
        answer = build_answer(points, ids)
        p, s = ours(answer)
        flu = points * np.array([1, -1, -1], np.float32)
        assert np.array_equal(s, ids) and p.tobytes() == flu.tobytes(), name
        row: dict[str, Any] = {"answer_bytes": len(answer), "ours_ms_median": 0.0}
        times = time_ours(answer, args.reps)
        if peer_python.exists():
            with tempfile.TemporaryDirectory() as tmp:
                f = Path(tmp) / "answer.msgpack"
                f.write_bytes(answer)
                seg_f, pts_f = Path(tmp) / "seg.npy", Path(tmp) / "pts.npy"
                proc = subprocess.run(
                    [peer_python, "-c", STOCK_SCRIPT, str(f), str(args.reps), str(seg_f), str(pts_f)],
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=True,
                )
                assert np.array_equal(np.load(seg_f), ids) and np.array_equal(np.load(pts_f), points), name
            stock = json.loads(proc.stdout.strip().splitlines()[-1])
            times += time_ours(answer, args.reps)  # ours again, after: both see the same load
            row["stock_decode_ms_median"] = 1e3 * statistics.median(stock["decode"])
            row["stock_decode_to_numpy_ms_median"] = 1e3 * statistics.median(stock["decode_numpy"])
        else:
            row["stock"] = f"skipped: no peer venv at {args.peer} (tools/setup_airsim_peer.sh)"
        row["ours_ms_median"] = 1e3 * statistics.median(times)
        row["ours_ms_min"] = 1e3 * min(times)
        if "stock_decode_to_numpy_ms_median" in row:
            row["ratio_stock_to_numpy_over_ours"] = (
                row["stock_decode_to_numpy_ms_median"] / row["ours_ms_median"]
            )
        result[name] = row
    result["mixed_over_uniform"] = result["mixed"]["ours_ms_median"] / result["uniform"]["ours_ms_median"]
    result["load_average"] = os.getloadavg()
    result["note"] = "the load average says how busy the cores were (the run's own processes included)"
    write_json(args.out, result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
