"""``rt-lidar replay RECORDING --sink ...``: resend a recording at its recorded rate.

A pcap recording (ours or a real sensor's) is resent as UDP to a ``udp:HOST:PORT`` target, each
datagram at its recorded time offset, keeping the recorded destination ports unless one is given.
A cloud recording (a folder of PCD scans, or a rosbag2 bag of PointCloud2) is fed scan by scan to any
``--sink`` (packets, stream, files) at its recorded times.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.points import POINT_DTYPE
from rt_lidar.presets import SensorPreset, preset_from_dict
from rt_lidar.scan_pattern import scan_period_ns
from rt_lidar.sinks.base import SinkContext, make_sink
from rt_lidar.sinks.fanout import SinkFanout
from rt_lidar.sinks.pacing import Pacer, PacingStats
from rt_lidar.sinks.pcap import read_pcap_udp
from rt_lidar.sinks.pcd import read_pcd_points
from rt_lidar.sweep import Scan

__all__ = ["bag_scans", "recorded_scans", "replay_clouds", "replay_pcap"]


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


def _config_preset(folder: Path) -> SensorPreset | None:
    cfg = folder / "rt_lidar_config.json"
    if not cfg.exists():
        return None
    return preset_from_dict(json.loads(cfg.read_text())["preset"], source=str(cfg))


def recorded_scans(
    path: str | Path, preset: SensorPreset | None = None
) -> tuple[SensorPreset, list[tuple[int, Scan]]]:
    """The scans of a recording with their recorded times (ns): a folder of PCD files (the sensor's scan
    period apart) or a rosbag2 folder (its message stamps). The sensor comes from the recording's
    ``rt_lidar_config.json`` unless ``preset`` is given."""
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder of PCD scans or a rosbag2 recording")
    if (folder / "metadata.yaml").exists():
        preset = preset or _config_preset(folder.parent / f"{folder.name}_config")
        if preset is None:
            raise ConfigError(
                f"{folder}: no {folder.name}_config/rt_lidar_config.json beside it: give --preset"
            )
        return preset, bag_scans(folder)
    pcds = sorted(folder.glob("*.pcd"))
    if not pcds:
        raise ConfigError(f"{folder}: no .pcd files and no metadata.yaml (not a recording)")
    preset = preset or _config_preset(folder)
    if preset is None:
        raise ConfigError(f"{folder}: no rt_lidar_config.json in it: give --preset")
    period = scan_period_ns(preset)
    return preset, [(i * period, Scan(i, i * period, read_pcd_points(p), 0, 0)) for i, p in enumerate(pcds)]


def bag_scans(folder: Path) -> list[tuple[int, Scan]]:
    """The PointCloud2 scans of a rosbag2 recording (its first cloud topic) with their stamps (ns)."""
    from rosbags.highlevel import AnyReader

    out: list[tuple[int, Scan]] = []
    with AnyReader([folder]) as reader:
        conns = [c for c in reader.connections if c.msgtype == "sensor_msgs/msg/PointCloud2"]
        if not conns:
            raise ConfigError(f"{folder}: no sensor_msgs/msg/PointCloud2 topic in the bag")
        for conn, stamp, raw in reader.messages(connections=conns[:1]):
            msg: Any = reader.deserialize(raw, conn.msgtype)
            spec: Any = {
                "names": [f.name for f in msg.fields],
                "formats": [_PF_DTYPES[f.datatype] for f in msg.fields],
                "offsets": [f.offset for f in msg.fields],
                "itemsize": msg.point_step,
            }
            layout = np.dtype(spec)
            cloud: Any = np.frombuffer(bytes(msg.data), dtype=layout, count=msg.width * msg.height)
            pts = np.zeros(cloud.size, POINT_DTYPE)
            for nm in ("x", "y", "z", "intensity", "ring"):
                if nm in layout.names:
                    pts[nm] = cloud[nm]
            if "time" in layout.names:
                pts["t"] = np.round(cloud["time"].astype(np.float64) * 1e9).astype(np.int64)
            out.append((int(stamp), Scan(len(out), int(stamp), pts, 0, 0)))
    return out


_PF_DTYPES = {1: "i1", 2: "u1", 3: "<i2", 4: "<u2", 5: "<i4", 6: "<u4", 7: "<f4", 8: "<f8"}


def replay_clouds(
    path: str | Path, sinks: list[str], preset: SensorPreset | None = None, rate: float = 1.0
) -> dict[str, Any]:
    """Feed every scan of a recording to ``sinks`` at its recorded time (``rate`` x real time)."""
    if not rate > 0:
        raise ConfigError(f"replay: --rate must be > 0, got {rate}")
    sensor, scans = recorded_scans(path, preset)
    fan = SinkFanout([make_sink(s) for s in sinks])
    fan.open(SinkContext(preset=sensor, scenario={"replay": str(path)}))
    t_wall0 = time.perf_counter()
    late = 0
    try:
        t_rec0 = scans[0][0] if scans else 0
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
