"""``rt-lidar replay RECORDING --sink ...``: resend a recording at its recorded rate.

A pcap recording (ours or a real sensor's) is resent as UDP to a ``udp:HOST:PORT`` target, each
datagram at its recorded time offset, keeping the recorded destination ports unless one is given.
A cloud recording (a folder of PCD or KITTI ``.bin`` scans, or a rosbag2 bag of PointCloud2, read one
scan at a time: :mod:`rt_lidar.sinks.recording`) is fed scan by scan to any ``--sink`` (packets, stream,
files) at its recorded times.
"""

from __future__ import annotations

import logging
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

__all__ = ["DEFAULT_MAX_GAP_S", "recorded_scans", "replay_clouds", "replay_offsets_ns", "replay_pcap"]

DEFAULT_MAX_GAP_S = 1.0
"""Longest wait between two recorded items; a longer gap (a pause in the capture, a damaged stamp)
is replayed as this long, so a record stamped 1e6 s later cannot hang a replay."""
_log = logging.getLogger(__name__)


def replay_offsets_ns(stamps_ns: Any, max_gap_s: float = DEFAULT_MAX_GAP_S) -> tuple[np.ndarray, int]:
    """Send offsets (ns from the first item) of recorded ``stamps_ns``: each gap clipped to
    ``[0, max_gap_s]`` (a stamp going backwards is sent at once). Returns them and how many gaps were cut."""
    if not max_gap_s > 0:
        raise ConfigError(f"replay: --max-gap must be > 0 s, got {max_gap_s}")
    stamps = np.asarray(stamps_ns, np.int64)
    if stamps.size == 0:
        return np.zeros(0, np.int64), 0
    gaps = np.diff(stamps)
    cap = int(max_gap_s * 1e9)
    cut = int(np.count_nonzero(gaps > cap))
    offsets = np.concatenate(([0], np.cumsum(np.clip(gaps, 0, cap))))
    if cut:
        _log.warning("replay: %d gap(s) longer than %g s replayed as %g s", cut, max_gap_s, max_gap_s)
    return offsets.astype(np.int64), cut


def replay_pcap(
    path: str | Path, host: str = "127.0.0.1", port: int | None = None, max_gap_s: float = DEFAULT_MAX_GAP_S
) -> PacingStats:
    """Send every UDP datagram of ``path`` to ``host`` (its recorded port, or ``port``) on its recorded
    schedule (gaps longer than ``max_gap_s`` shortened to it)."""
    import socket

    records = list(read_pcap_udp(path))
    if not records:
        raise ConfigError(f"{path}: no UDP datagrams")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(dport: str, data: bytes) -> None:
        sock.sendto(data, (host, port if port is not None else int(dport)))

    pacer = Pacer(send, clock="wall", latency_ns=20_000_000, max_batches=1 << 20)
    pacer.start()
    offsets, _cut = replay_offsets_ns([r.stamp_ns for r in records], max_gap_s)
    batches = [
        (str(r.dst_port), np.frombuffer(r.payload, np.uint8)[None, :], np.array([off]))
        for r, off in zip(records, offsets, strict=True)
    ]
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
    path: str | Path,
    sinks: list[str],
    preset: SensorPreset | None = None,
    rate: float = 1.0,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
) -> dict[str, Any]:
    """Feed every scan of a recording to ``sinks`` at its recorded time (``rate`` x real time; gaps
    longer than ``max_gap_s`` of replay time shortened to it)."""
    if not rate > 0:
        raise ConfigError(f"replay: --rate must be > 0, got {rate}")
    sensor, scans = recorded_scans(path, preset)
    t_wall0 = time.perf_counter()
    late = 0
    with scans:
        fan = SinkFanout([make_sink(s) for s in sinks])
        fan.open(SinkContext(preset=sensor, scenario={"replay": str(path)}))
        offsets, cut = replay_offsets_ns(np.asarray(scans.stamps_ns) / rate, max_gap_s)
        try:
            for offset, (_stamp, scan) in zip(offsets, scans, strict=True):
                wait = int(offset) * 1e-9 - (time.perf_counter() - t_wall0)
                if wait > 0:
                    time.sleep(wait)
                else:
                    late += wait < -0.01
                fan.write(scan)
        finally:
            fan.close()
    return {
        "scans": len(scans),
        "wall_s": time.perf_counter() - t_wall0,
        "late_scans": late,
        "gaps_cut": cut,
        "preset": sensor.name,
    }
