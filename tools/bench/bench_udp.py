"""Live VLP-16 UDP to a loopback listener: packet count against the real sensor's, and pacing jitter.

    .venv/bin/python tools/bench/bench_udp.py --seconds 60 [--json out.json]

The producer feeds real pipeline scans (street scene, the first 20 repeated with shifted times) on a
real-time schedule, as a simulation keeping up would; the sink packetizes them in the producer's thread
and paces them in its sender process. A listener process records each datagram's arrival time.
Reports: packets received vs the count a real VLP-16 sends in the same time (one per 24 firing cycles
of 55.296 us: 753.6/s), the sender's lateness against each deadline (p50/p99/max), and the
inter-arrival jitter at the listener (|gap - nominal|, p99).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import socket
import time
from multiprocessing.connection import Connection

import numpy as np
from machine_record import write_json  # tools/bench, beside this script

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.pipeline.builder import BuiltPipeline, build_pipeline
from rt_lidar.sensor.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.udp import UdpPacketSink
from rt_lidar.sinks.velodyne import velodyne_udp_sink

REAL_VLP16_PACKET_S = 24 * 55.296e-6
OPTS: dict[str, str] = {}


def _listen(port_out: Connection, result: Connection) -> None:
    """Child process: receive on a loopback port, record each data packet's arrival (perf_counter_ns)."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(60.0)  # the producer builds its pipeline first; after the first packet, 2 s of silence ends
    port_out.send(rx.getsockname()[1])
    arrivals: list[int] = []
    while True:
        try:
            data = rx.recv(2048)
        except TimeoutError:
            break
        if len(data) == 1206:
            arrivals.append(time.perf_counter_ns())
            rx.settimeout(2.0)
    result.send(arrivals)


def _scan_cycle(built: BuiltPipeline, n_distinct: int, n: int) -> list[Scan]:
    """``n`` consecutive scans: the pipeline's first ``n_distinct``, repeated with shifted times."""
    base = list(built.pipeline.scans(n_distinct))
    period = scan_period_ns(built.preset)
    return [dataclasses.replace(base[i % n_distinct], index=i, start_ns=i * period) for i in range(n)]


def run(seconds: float) -> dict[str, float]:
    """Stream ``seconds`` of VLP-16 packets to a loopback listener process; return the measurements."""
    ctx = mp.get_context("spawn")
    port_rx, port_tx = ctx.Pipe(duplex=False)
    res_rx, res_tx = ctx.Pipe(duplex=False)
    listener = ctx.Process(target=_listen, args=(port_tx, res_tx), daemon=True)
    listener.start()
    port = port_rx.recv()
    built = build_pipeline("VLP-16", "street", seed=0)
    hz = built.preset.scan.rotation_hz or 10.0
    n_scans = round(seconds * hz)
    # The sim's own step time varies (a step can take seconds while a scene structure is rebuilt); this
    # bench measures the pacing, so it feeds real pipeline scans on a real-time schedule.
    scans = _scan_cycle(built, min(20, n_scans), n_scans)
    sink = velodyne_udp_sink(f"127.0.0.1:{port}", dict(OPTS))
    sink.open(SinkContext(built.preset))
    t0 = time.perf_counter()
    pk_ms: list[float] = []
    for i, scan in enumerate(scans):
        ready = t0 + (i + 1) / hz  # scan i is complete one period later
        time.sleep(max(0.0, ready - time.perf_counter()))
        t = time.perf_counter()
        sink.write(scan)
        pk_ms.append((time.perf_counter() - t) * 1e3)
    sink.close()
    arrivals = res_rx.recv()
    listener.join()
    assert isinstance(sink, UdpPacketSink) and sink.stats is not None
    sent = sink.stats.summary()
    gaps: np.ndarray = np.diff(np.asarray(arrivals, np.float64)) / 1e3
    nominal = float(np.median(gaps)) if gaps.size else 0.0
    jitter = np.abs(gaps - nominal) if gaps.size else np.zeros(1)
    covered_s = n_scans / hz
    expected = covered_s / REAL_VLP16_PACKET_S
    return {
        "seconds": covered_s,
        "packets_received": len(arrivals),
        "packets_real_sensor": expected,
        "count_error_pct": 100.0 * (len(arrivals) - expected) / expected,
        "write_ms_p50": float(np.median(pk_ms)),
        "write_ms_max": float(np.max(pk_ms)),
        "gap_nominal_us": nominal,
        "interarrival_jitter_p99_us": float(np.percentile(jitter, 99)),
        "interarrival_jitter_max_us": float(jitter.max()),
        **{f"sender_{k}": v for k, v in sent.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args()
    res = run(args.seconds)
    text = json.dumps(res, indent=2)
    print(text)
    if args.json:
        write_json(args.json, res)


if __name__ == "__main__":
    main()
