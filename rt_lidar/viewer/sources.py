"""Where the viewer's frames come from (the live stream, or a recorded folder of PCDs) and the HUD's
figures (frame rate, sim -> screen latency, drops). No Qt here."""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rt_lidar.stream import StreamFrame, StreamSubscriber

__all__ = ["FrameSource", "HudStats", "LiveSource", "RecordingSource", "read_any_pcd"]


class FrameSource(Protocol):
    """What the viewer polls each tick: the newest frame of each kind, and the drop count so far."""

    label: str

    def poll(self) -> dict[str, StreamFrame]:
        """New frames since the last call (``{}`` when none)."""
        ...

    @property
    def dropped(self) -> int:
        """Frames that were published but never reached the screen."""
        ...

    def close(self) -> None:
        """Release sockets and files."""
        ...


class LiveSource:
    """Frames from a :class:`~rt_lidar.stream.StreamSubscriber` on ``address``."""

    def __init__(self, address: str, reconnect_after_s: float = 3.0) -> None:
        self.address = address
        self.label = f"live {address}"
        self.subscriber = StreamSubscriber(address, reconnect_after_s=reconnect_after_s, background=True)

    def poll(self) -> dict[str, StreamFrame]:
        """Drain the socket, keep the newest."""
        return self.subscriber.poll(0)

    @property
    def dropped(self) -> int:
        """Lost in transport plus skipped for a newer frame."""
        return self.subscriber.stats.dropped

    @property
    def connected(self) -> bool:
        """A frame came within the reconnect timeout."""
        return self.subscriber.silent_s < self.subscriber.reconnect_after_s

    def reconnect(self) -> None:
        """Make a new socket now."""
        self.subscriber.reconnect()

    def close(self) -> None:
        """Close the socket."""
        self.subscriber.close()


def read_any_pcd(path: str | Path) -> np.ndarray:
    """Read a PCD (binary or ascii, any fields) into POINT_DTYPE (``sinks.pcd.read_pcd_points``)."""
    from rt_lidar.sinks.pcd import read_pcd_points

    return read_pcd_points(path)


def _ring_elevations(points: np.ndarray) -> list[float]:
    """Per-ring elevation (deg) estimated from the points themselves (median per ring)."""
    if points.size == 0:
        return [0.0]
    elev = np.degrees(np.arctan2(points["z"], np.hypot(points["x"], points["y"])))
    rings = points["ring"].astype(np.int64)
    out = np.zeros(int(rings.max()) + 1)
    for r in np.unique(rings):
        out[r] = float(np.median(elev[rings == r]))
    return [float(v) for v in out]


@dataclass
class _RecordingMeta:
    preset: str = "recording"
    intensity_max: float = 255.0
    range_max_m: float = 120.0


class RecordingSource:
    """A folder of PCD files (sorted by name), or a rosbag2 recording of PointCloud2, played at
    ``rate_hz``, with seeking for the time slider.

    The folder's ``config.json`` (or its parent's, as ``rt-lidar demo`` writes it) names the preset.
    """

    def __init__(self, folder: str | Path, rate_hz: float = 10.0, loop: bool = False) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise FileNotFoundError(f"recording folder {self.folder} does not exist")
        self._bag: list[np.ndarray] | None = None
        if (self.folder / "metadata.yaml").is_file():
            from rt_lidar.replay import bag_scans

            self._bag = [scan.points for _stamp, scan in bag_scans(self.folder)]
            self.files = [self.folder / f"{i:06d}" for i in range(len(self._bag))]
        else:
            self.files = sorted(self.folder.glob("*.pcd"))
        if not self.files:
            raise FileNotFoundError(f"no .pcd files (and no rosbag2 metadata.yaml) in {self.folder}")
        self.label = f"recording {self.folder} ({len(self.files)} scans)"
        self.rate_hz = rate_hz
        self.loop = loop
        self.index = -1
        self.playing = True
        self._next_due = 0.0
        self._pending_seek: int | None = 0
        self._elevations: list[float] | None = None
        self.meta = self._read_meta()

    def _read_meta(self) -> _RecordingMeta:
        bag_cfg = self.folder.parent / f"{self.folder.name}_config" / "rt_lidar_config.json"
        for cfg in (self.folder / "config.json", self.folder.parent / "config.json", bag_cfg):
            if cfg.is_file():
                try:
                    preset = json.loads(cfg.read_text()).get("preset", {})
                    return _RecordingMeta(
                        str(preset.get("name", "recording")),
                        float(preset.get("output", {}).get("intensity_max", 255.0)),
                        float(preset.get("range", {}).get("max_m", 120.0)),
                    )
                except (ValueError, AttributeError):
                    break
        return _RecordingMeta()

    def __len__(self) -> int:
        return len(self.files)

    def seek(self, index: int) -> None:
        """Show scan ``index`` on the next poll."""
        self._pending_seek = int(np.clip(index, 0, len(self.files) - 1))

    def frame(self, index: int) -> StreamFrame:
        """Scan ``index`` as a stream frame."""
        pts = self._bag[index] if self._bag is not None else read_any_pcd(self.files[index])
        if self._elevations is None:
            self._elevations = _ring_elevations(pts)
        header: dict[str, Any] = {
            "kind": "scan",
            "seq": index,
            "sim_time_ns": round(index * 1e9 / self.rate_hz),
            "preset": self.meta.preset,
            "frame_id": self.files[index].name,
            "n": int(pts.size),
            "elevations_deg": self._elevations,
            "columns": 1024,
            "intensity_max": self.meta.intensity_max,
            "range_max_m": self.meta.range_max_m,
        }
        return StreamFrame(header, points=pts)

    def poll(self) -> dict[str, StreamFrame]:
        """The next scan when it is due (or a seeked one at once)."""
        now = time.monotonic()
        if self._pending_seek is not None:
            self.index, self._pending_seek = self._pending_seek, None
        elif self.playing and now >= self._next_due:
            if self.index + 1 >= len(self.files):
                if not self.loop:
                    return {}
                self.index = -1
            self.index += 1
        else:
            return {}
        self._next_due = now + 1.0 / self.rate_hz
        return {"scan": self.frame(self.index)}

    @property
    def dropped(self) -> int:
        """A recording drops nothing."""
        return 0

    def close(self) -> None:
        """Nothing to release."""


class HudStats:
    """Frame rate over the last second or so, sim -> screen latency percentiles of recent frames, and
    where a frame's time went: the viewer's own work on a scan (positions, colours, range panel) and
    the GL paint that shows it."""

    def __init__(self, window: int = 60) -> None:
        self._shown: deque[float] = deque(maxlen=window)
        self._latency_ms: deque[float] = deque(maxlen=window)
        self._prepare_ms: deque[float] = deque(maxlen=window)
        self._paint_ms: deque[float] = deque(maxlen=window)
        self.frames_shown = 0

    def prepared(self, seconds: float) -> None:
        """The viewer spent ``seconds`` turning a scan into GL arrays (and the range panel)."""
        self._prepare_ms.append(seconds * 1e3)

    def painted(self, seconds: float) -> None:
        """The paint of a new scan (``paintGL`` + ``glFinish``) took ``seconds``."""
        self._paint_ms.append(seconds * 1e3)

    def prepare_ms(self, q: float = 50.0) -> float | None:
        """Percentile ``q`` of recent scans' preparation time, ms (None before the first)."""
        return float(np.percentile(np.asarray(self._prepare_ms), q)) if self._prepare_ms else None

    def paint_ms(self, q: float = 50.0) -> float | None:
        """Percentile ``q`` of recent new-scan paints, ms (None before the first)."""
        return float(np.percentile(np.asarray(self._paint_ms), q)) if self._paint_ms else None

    def shown(self, wall_time_ns: int | None, now_ns: int | None = None) -> None:
        """A frame published at ``wall_time_ns`` (None for recordings) finished painting at ``now_ns``."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        self.frames_shown += 1
        self._shown.append(time.monotonic())
        if wall_time_ns is not None:
            self._latency_ms.append((now_ns - wall_time_ns) * 1e-6)

    @property
    def fps(self) -> float:
        """Frames painted per second over the recent window (0 with fewer than two)."""
        if len(self._shown) < 2:
            return 0.0
        span = self._shown[-1] - self._shown[0]
        if time.monotonic() - self._shown[-1] > 2.0:
            return 0.0
        return (len(self._shown) - 1) / span if span > 0 else 0.0

    def latency_ms(self, q: float = 50.0) -> float | None:
        """Percentile ``q`` of recent latencies, ms (None before the first live frame)."""
        if not self._latency_ms:
            return None
        return float(np.percentile(np.asarray(self._latency_ms), q))
