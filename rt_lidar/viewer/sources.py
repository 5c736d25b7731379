"""Where the viewer's frames come from (the live stream, or a recorded folder of PCDs) and the HUD's
figures (frame rate, sim -> screen latency, drops). No Qt here."""

from __future__ import annotations

import time
import warnings
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rt_lidar.errors import ConfigError, RtLidarError
from rt_lidar.sinks.stream import StreamFrame, StreamSubscriber, scan_header_figures

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
    """Frames from a :class:`~rt_lidar.sinks.stream.StreamSubscriber` on ``address``."""

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
    def bad_frames(self) -> int:
        """Messages that were not valid frames (or over the size cap), skipped."""
        return self.subscriber.stats.bad

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


class RecordingSource:
    """A recording (a folder of PCD or KITTI ``.bin`` scans, or a rosbag2 bag of PointCloud2) played at
    its recorded times (``speed`` x real time) or at a fixed ``rate_hz``, with seeking for the slider.

    Playback keeps to the clock: when the viewer is slower than the recording, the scans whose time has
    passed are skipped (and counted in :attr:`dropped`), as a video player drops frames, so the picture
    and the time slider stay at the recorded time. Scans are read when shown
    (:class:`~rt_lidar.sinks.recording.CloudRecording`), so a recording of any length opens in bounded
    memory. The sensor comes from the recording's config file (``rt_lidar_config.json``, or the
    ``config.json`` that ``rt-lidar demo`` writes).
    """

    def __init__(
        self,
        folder: str | Path,
        rate_hz: float | None = None,
        loop: bool = False,
        speed: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from rt_lidar.sinks.recording import CloudRecording

        if rate_hz is not None and not rate_hz > 0:
            raise ConfigError(f"recording playback rate must be > 0 Hz, got {rate_hz}")
        if not speed > 0:
            raise ConfigError(f"recording playback speed must be > 0, got {speed}")
        self.recording = CloudRecording(folder)
        self.folder = self.recording.path
        self.label = f"recording {self.folder} ({len(self.recording)} scans)"
        self.rate_hz = rate_hz
        self.speed = speed
        self.loop = loop
        self.clock = clock
        """Wall-clock seconds (monotonic) that playback keeps to."""
        self.index = -1
        self.skipped = 0
        """Scans passed over to keep to the clock."""
        stamps = self.recording.stamps_ns
        self._play_s = (
            np.arange(len(self.recording)) / rate_hz if rate_hz is not None else (stamps - stamps[0]) * 1e-9
        )
        """When each scan is due, s of playback from the first."""
        self._playing = True
        self._anchor = (0.0, 0.0)  # (wall s, playback s) at the last seek or resume
        self._pending_seek: int | None = 0
        self.unreadable: dict[int, str] = {}
        """Scans that could not be read (index -> why, naming the file): skipped, each warned once."""
        preset = self.recording.preset
        self._figures: dict[str, Any] | None = scan_header_figures(preset) if preset is not None else None

    def __len__(self) -> int:
        return len(self.recording)

    def time_s(self, index: int) -> float:
        """Recorded time of scan ``index`` from the first scan, s."""
        stamps = self.recording.stamps_ns
        return float(stamps[index] - stamps[0]) * 1e-9

    @property
    def duration_s(self) -> float:
        """Recorded time from the first scan to the last, s."""
        return self.time_s(len(self) - 1)

    @property
    def playing(self) -> bool:
        """Playing (True) or paused; resuming plays on from the scan on screen."""
        return self._playing

    @playing.setter
    def playing(self, value: bool) -> None:
        if value and not self._playing:
            self._anchor_at(max(self.index, 0))
        self._playing = bool(value)

    def _anchor_at(self, index: int) -> None:
        self._anchor = (self.clock(), float(self._play_s[index]))

    def _due_index(self, now: float) -> int:
        """The newest scan whose playback time has come."""
        wall0, play0 = self._anchor
        return int(np.searchsorted(self._play_s, play0 + (now - wall0) * self.speed, side="right")) - 1

    def _past_the_end(self, now: float) -> bool:
        """The last scan has been on screen for one scan period (its time to loop)."""
        play = self._play_s
        period = (play[-1] - play[0]) / (len(play) - 1) if len(play) > 1 else 0.1
        wall0, play0 = self._anchor
        return bool(play0 + (now - wall0) * self.speed >= play[-1] + max(period, 1e-3))

    def seek(self, index: int) -> None:
        """Show scan ``index`` on the next poll (and play on from there)."""
        self._pending_seek = int(np.clip(index, 0, len(self) - 1))

    def frame(self, index: int) -> StreamFrame:
        """Scan ``index`` as a stream frame."""
        pts = self.recording.points(index)
        if self._figures is None:  # a recording that does not name its sensor: figures from its points
            self._figures = {
                "preset": "recording",
                "elevations_deg": _ring_elevations(pts),
                "columns": 1024,
                "intensity_max": 255.0,
                "range_max_m": 120.0,
            }
        header: dict[str, Any] = {
            "kind": "scan",
            "seq": index,
            "sim_time_ns": int(self.recording.stamps_ns[index]),
            "frame_id": self.recording.name(index),
            "n": int(pts.size),
            **self._figures,
        }
        return StreamFrame(header, points=pts)

    def _readable_frame(self, index: int) -> dict[str, StreamFrame]:
        """``{"scan": frame}`` of scan ``index``, or ``{}`` when its file cannot be read: the viewer
        names the file (a warning, once) and goes on with the next scan."""
        if index in self.unreadable:
            return {}
        try:
            return {"scan": self.frame(index)}
        except (RtLidarError, OSError, ValueError) as exc:
            why = str(exc) if str(self.recording.name(index)) in str(exc) else f"{self._where(index)}: {exc}"
            self.unreadable[index] = why
            warnings.warn(f"skipped an unreadable scan: {why}", stacklevel=2)
            return {}

    def _where(self, index: int) -> str:
        return str(self.recording.files[index]) if self.recording.files else f"{self.folder} scan {index}"

    @property
    def bad_frames(self) -> int:
        """Scans skipped because their file could not be read."""
        return len(self.unreadable)

    @property
    def last_bad(self) -> str:
        """Why the latest unreadable scan was skipped ('' when none was)."""
        return next(reversed(self.unreadable.values()), "")

    @property
    def last_bad_name(self) -> str:
        """The file name of the latest unreadable scan ('' when none was)."""
        last = next(reversed(self.unreadable), None)
        return "" if last is None else self.recording.name(last)

    @property
    def ended(self) -> bool:
        """Playback reached the last scan and does not loop: no scan will come any more."""
        return not self.loop and self._pending_seek is None and self.index >= len(self) - 1

    def poll(self) -> dict[str, StreamFrame]:
        """The newest scan whose time has come (or a seeked one at once); ``{}`` when none is new."""
        if self._pending_seek is not None:
            self.index, self._pending_seek = self._pending_seek, None
            self._anchor_at(self.index)
            return self._readable_frame(self.index)
        if not self._playing:
            return {}
        now = self.clock()
        due = min(self._due_index(now), len(self) - 1)
        if due <= self.index:
            if self.index < len(self) - 1 or not self.loop or not self._past_the_end(now):
                return {}
            self.index, due = -1, 0  # loop: from the start, one scan period after the last
            self._anchor_at(0)
        self.skipped += max(0, due - self.index - 1)
        self.index = due
        return self._readable_frame(due)

    @property
    def dropped(self) -> int:
        """Scans skipped to keep to the recorded time."""
        return self.skipped

    def close(self) -> None:
        """Close the recording's files."""
        self.recording.close()


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
