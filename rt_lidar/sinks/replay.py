"""``rt-lidar replay RECORDING --sink ...``: resend a recording at its recorded rate.

A pcap recording (ours or a real sensor's) is resent as UDP to a ``udp:HOST:PORT`` target, each
datagram at its recorded time offset, keeping the recorded destination ports unless one is given.
A cloud recording (a folder of PCD or KITTI ``.bin`` scans, or a rosbag2 bag of PointCloud2, read one
scan at a time: :mod:`rt_lidar.sinks.recording`) is fed scan by scan to any ``--sink`` (packets, stream,
files) at its recorded times.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.sensor.presets import SensorPreset
from rt_lidar.sinks.base import SinkContext, make_sink
from rt_lidar.sinks.fanout import SinkFanout
from rt_lidar.sinks.pacing import Pacer, PacingStats
from rt_lidar.sinks.pcap import read_pcap_udp
from rt_lidar.sinks.recording import CloudRecording

__all__ = ["recorded_scans", "replay_clouds", "replay_pcap"]


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


# -- clouds: a folder of PCD scans, or a rosbag2 recording --------------------------------------------


def recorded_scans(
    path: str | Path, preset: SensorPreset | None = None
) -> tuple[SensorPreset, CloudRecording]:
    """The scans of a recording with their recorded times (ns), read lazily: a folder of PCD files (the
    sensor's scan period apart) or a rosbag2 folder (its message stamps). The sensor comes from the
    recording's ``rt_lidar_config.json`` unless ``preset`` is given."""
    recording = CloudRecording(path, preset)
    if recording.preset is None:
        recording.close()
        where = (
            f"no {recording.path.name}_config/rt_lidar_config.json beside it"
            if recording.kind == "rosbag2"
            else "no rt_lidar_config.json in it"
        )
        raise ConfigError(f"{recording.path}: {where}: give --preset")
    return recording.preset, recording


def replay_clouds(
    path: str | Path, sinks: list[str], preset: SensorPreset | None = None, rate: float = 1.0
) -> dict[str, Any]:
    """Feed every scan of a recording to ``sinks`` at its recorded time (``rate`` x real time)."""
    if not rate > 0:
        raise ConfigError(f"replay: --rate must be > 0, got {rate}")
    sensor, scans = recorded_scans(path, preset)
    t_wall0 = time.perf_counter()
    late = 0
    with scans:
        fan = SinkFanout([make_sink(s) for s in sinks])
        fan.open(SinkContext(preset=sensor, scenario={"replay": str(path)}))
        try:
            t_rec0 = int(scans.stamps_ns[0])
            for stamp, scan in scans:
                wait = (stamp - t_rec0) * 1e-9 / rate - (time.perf_counter() - t_wall0)
                if wait > 0:
                    time.sleep(wait)
                else:
                    late += wait < -0.01
                fan.write(scan)
        finally:
            fan.close()
    return {"scans": len(scans), "wall_s": time.perf_counter() - t_wall0, "late_scans": late,
            "preset": sensor.name}  # fmt: skip
