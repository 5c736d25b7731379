"""``rt-lidar replay RECORDING --sink ...``: resend a recording at its recorded rate.

Done: pcap recordings (ours or a real sensor's) resent as UDP to a ``udp:HOST:PORT`` target, each
datagram at its recorded time offset, keeping the recorded destination ports unless one is given.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.sinks.pacing import Pacer, PacingStats
from rt_lidar.sinks.pcap import read_pcap_udp

__all__ = ["replay_pcap"]


def replay_pcap(path: str | Path, host: str = "127.0.0.1", port: int | None = None) -> PacingStats:
    """Send every UDP datagram of ``path`` to ``host`` (its recorded port, or ``port``) on its recorded
    schedule."""
    import socket

    records = list(read_pcap_udp(path))
    if not records:
        raise ConfigError(f"{path}: no UDP datagrams")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(dport: str, data: bytes) -> None:
        sock.sendto(data, (host, port if port is not None else int(dport)))

    pacer = Pacer(send, clock="wall", latency_ns=20_000_000, max_batches=1 << 20)
    pacer.start()
    t0 = records[0].stamp_ns
    batches = [(str(r.dst_port), np.frombuffer(r.payload, np.uint8)[None, :], np.array([r.stamp_ns - t0]))
               for r in records]  # fmt: skip
    step = 500
    for i in range(0, len(batches), step):
        pacer.put_many(batches[i : i + step])
    stats = pacer.close()
    sock.close()
    return stats
