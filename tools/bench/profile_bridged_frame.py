"""Where one bridged HDL-64E sim frame's time goes, stage by stage, over TCP and over shared memory.

    .venv/bin/python tools/bench/profile_bridged_frame.py --out docs/bench/profile_bridged_frame.json \
        [--preset HDL-64E] [--frames 30]

The stages of ``rt-lidar demo`` over the bridge (embedded street, f_sim 20 Hz, the demo's physics and
its PCD + KITTI writers), each run by the function the bridge runs, timed one after the other in one
process (no stage overlaps another, unlike the real two-process loop):

1. **server cast**: ``EmbeddedSim.continue_for_time`` + ``prepare_lidar_hits(omit=...).run()`` (the ray
   cast and its ``hits_to_wire``, told the fields the controller omits, as our server tells it);
2. **pack**: ``encode_hits`` (without the fields the controller asks to omit, compact as it asks;
   ``--plain``: a plain answer, as before compact answers) and
   ``rpc.pack_parts`` of the response (with shared memory: the fields written into the client's
   segment, and the small header packed);
3. **transfer**: the packed response sent scatter-gather (``rpc.send_parts``, as our server sends it)
   over a loopback TCP connection and received whole (a thread sends, the caller receives as
   ``RpcClient`` does);
4. **decode**: ``fast_decode.decode`` of the message and ``decode_hits`` (with shared memory, the
   fields copied out of the segment), then ``hits_from_wire`` (given the controller's own firings of
   the frame, as in lockstep);
5. **physics**: ``SensorPhysics.apply``;
6. **sweep**: ``ScanAssembler.add``;
7. **sinks**: the PCD and KITTI writers of each completed scan (one every two frames), per frame.

Each stage is timed in wall time and in this process's CPU time (all its threads: the cast runs on
several, the transfer's sender is a thread): on a loaded machine the CPU times are the steadier figure.

The two transports profile the same frames (the sim is cast once per frame; both packings are made from
the same hits), and their decoded hits are checked to be identical.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.bridge.hits import hits_from_wire
from rt_lidar.physics.model import PhysicsConfig, SensorPhysics
from rt_lidar.pipeline.assembler import ScanAssembler
from rt_lidar.pipeline.builder import build_world
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sensor.scan_pattern import firings_between
from rt_lidar.server.embedded_sim import EmbeddedSim
from rt_lidar.session.realtime import tune_allocator
from rt_lidar.sinks.base import SinkContext, make_sink
from rt_lidar.unreal_bridge import fast_decode
from rt_lidar.unreal_bridge.hits_codec import decode_hits, encode_hits
from rt_lidar.unreal_bridge.rpc import Packed, pack_parts, send_parts
from rt_lidar.unreal_bridge.shm import ShmAttachments, ShmSegment
from rt_lidar.unreal_bridge.wire import LEAN_FIELDS

STAGES = ("server_cast", "pack", "transfer", "decode", "hits_from_wire", "physics", "sweep", "sinks")


class Loopback:
    """A loopback TCP connection: :meth:`move` sends bytes from a thread and receives them whole."""

    def __init__(self) -> None:
        listener = socket.create_server(("127.0.0.1", 0))
        self.tx = socket.create_connection(listener.getsockname())
        self.rx, _ = listener.accept()
        listener.close()
        for s in (self.tx, self.rx):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray(1 << 20)

    def move(self, data: Packed) -> memoryview:
        """Send ``data`` and receive it; returns a view of the received bytes."""
        if len(self.buf) < len(data):
            self.buf = bytearray(len(data))
        sender = threading.Thread(target=send_parts, args=(self.tx, data.parts, None))
        sender.start()
        view, got = memoryview(self.buf), 0
        while got < len(data):
            got += self.rx.recv_into(view[got : len(data)])
        sender.join()
        return view[: len(data)]

    def close(self) -> None:
        self.tx.close()
        self.rx.close()


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    """(wall s, process CPU s: every thread of this process) since ``t``."""
    return time.perf_counter() - t[0], time.process_time() - t[1]


def _same(a: Any, b: Any) -> bool:
    core = ("points", "normals", "segmentation", "ring", "time", "range", "miss")
    if any(getattr(a, f).tobytes() != getattr(b, f).tobytes() for f in core):
        return False
    return a.extras.keys() == b.extras.keys() and all(
        a.extras[k].tobytes() == b.extras[k].tobytes() for k in a.extras
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="HDL-64E")
    ap.add_argument("--frames", type=int, default=30, help="profiled sim frames (after 2 warm-up frames)")
    ap.add_argument("--out", type=Path, default=Path("docs/bench/profile_bridged_frame.json"))
    ap.add_argument("--plain", action="store_true", help="plain answers (before compact answers)")
    args = ap.parse_args()
    tune_allocator()
    preset = load_preset(args.preset)
    sim = EmbeddedSim(build_world("street", seed=0), preset, paused=True, cast_threads=1)  # as the demo's
    probe = sim.lidar_hits("", "")
    materials = list(probe.info["materials"])
    physics = {
        t: SensorPhysics.from_preset(preset, materials, config=PhysicsConfig()) for t in ("tcp", "shm")
    }
    assemblers = {t: ScanAssembler(preset) for t in ("tcp", "shm")}
    segment = ShmSegment(64 << 20)
    attachments = ShmAttachments()
    link = Loopback()
    times: dict[str, dict[str, list[tuple[float, float]]]] = {
        t: {s: [] for s in STAGES} for t in ("tcp", "shm")
    }
    sizes: dict[str, list[int]] = {"tcp": [], "shm": []}
    identical = True
    rays = []
    with tempfile.TemporaryDirectory() as tmp:
        sinks = {t: [make_sink(f"pcd:{tmp}/{t}"), make_sink(f"kitti:{tmp}/{t}")] for t in ("tcp", "shm")}
        for group in sinks.values():
            for s in group:
                s.open(SinkContext(preset, lockstep=True))
        for k in range(args.frames + 2):
            t = _now()
            sim.continue_for_time(0.05)
            # as the demo asks (its schedule is the server's): points, normals and firings left out
            wire_hits = sim.prepare_lidar_hits("", "", omit=LEAN_FIELDS).run()
            cast_s = _since(t)
            expected = firings_between(preset, int(wire_hits.info["t0_ns"]), int(wire_hits.info["t1_ns"]))
            decoded = {}
            for tr in ("tcp", "shm"):
                st: dict[str, tuple[float, float]] = {"server_cast": cast_s}
                rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([0, k])))
                t = _now()
                target = attachments.attach(segment.offer()) if tr == "shm" else None
                encoded = encode_hits(wire_hits, shm=target, omit=LEAN_FIELDS, compact=not args.plain)
                message = pack_parts([1, k, None, encoded])
                if target is not None:
                    target.release()  # written: the segment may be offered again
                st["pack"] = _since(t)
                t = _now()
                received = link.move(message)
                st["transfer"] = _since(t)
                t = _now()
                msg, _end = fast_decode.decode(received, 0, {})
                answer = decode_hits(msg[3], segment if tr == "shm" else None, LEAN_FIELDS)
                del received
                st["decode"] = _since(t)
                t = _now()
                hits = hits_from_wire(answer, expected=expected)
                st["hits_from_wire"] = _since(t)
                t = _now()
                out = physics[tr].apply(hits, rng)
                st["physics"] = _since(t)
                t = _now()
                t_end = int(answer.info["t1_ns"])
                scans = assemblers[tr].add(out.points, hits.firings.t_ns, t_end, out.extras())
                st["sweep"] = _since(t)
                t = _now()
                for scan in scans:
                    for s in sinks[tr]:
                        s.write(scan)
                st["sinks"] = _since(t)
                decoded[tr] = answer
                if k >= 2:
                    for name, v in st.items():
                        times[tr][name].append(v)
                    sizes[tr].append(len(message))
            identical = identical and _same(decoded["tcp"], decoded["shm"])
            if k >= 2:
                rays.append(len(wire_hits.points))
        for group in sinks.values():
            for s in group:
                s.close()
    link.close()
    attachments.close()
    segment.close()
    table = {tr: {n: statistics.median(w for w, _ in v) * 1e3 for n, v in times[tr].items()} for tr in times}
    cpu_table = {
        tr: {n: statistics.median(c for _, c in v) * 1e3 for n, v in times[tr].items()} for tr in times
    }
    for tab in (table, cpu_table):
        for tr in tab:
            tab[tr]["total"] = sum(tab[tr].values())
    result = {
        "bench": "profile_bridged_frame",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "preset": args.preset,
        "frames": args.frames,
        "rays_per_frame_median": statistics.median(rays),
        "message_bytes_median": {tr: statistics.median(v) for tr, v in sizes.items()},
        "stage_ms_median": table,
        "stage_cpu_ms_median": cpu_table,
        "stage_ms_p90": {
            tr: {name: float(np.percentile([w for w, _ in v], 90)) * 1e3 for name, v in times[tr].items()}
            for tr in times
        },
        "identical_hits": identical,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "note": "the load average says how busy the cores were (the run's own processes included); stages "
        "run one after the other in one process",
    }
    write_json(args.out, result)
    keys = ("stage_ms_median", "stage_cpu_ms_median", "identical_hits", "load_average")
    print(json.dumps({k: result[k] for k in keys}, indent=2))


if __name__ == "__main__":
    main()
