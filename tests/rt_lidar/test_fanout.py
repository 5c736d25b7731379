import threading
import time

import numpy as np
import pytest

from rt_lidar.pipeline.assembler import Scan
from rt_lidar.sensor.presets import load_preset
from rt_lidar.sinks.base import SinkContext
from rt_lidar.sinks.fanout import SinkError, SinkFanout


class _Recorder:
    def __init__(self, delay=0.0, fail_on=None):
        self.seen: list[int] = []
        self.threads: set[str] = set()
        self.delay, self.fail_on = delay, fail_on
        self.opened = self.closed = False

    def open(self, context):
        self.opened = True

    def write(self, scan):
        if scan.index == self.fail_on:
            raise OSError("disk full")
        time.sleep(self.delay)
        self.threads.add(threading.current_thread().name)
        self.seen.append(scan.index)

    def close(self):
        self.closed = True


def _scan(i):
    return Scan(i, i * 100, np.zeros(0), 1, 1)


def test_fanout_writes_every_scan_in_order_off_the_loop_thread():
    a, b = _Recorder(delay=0.01), _Recorder()
    fan = SinkFanout([a, b], queue_size=2)
    fan.open(SinkContext(load_preset("VLP-16")))
    for i in range(10):
        fan.write(_scan(i))
        assert fan._queue.qsize() <= 2  # bounded: the loop waits rather than queueing without end
    fan.close()
    assert a.seen == b.seen == list(range(10))
    assert a.threads == {"rt-lidar-sinks"}
    assert a.opened and a.closed


def test_a_failing_sink_is_reported_with_its_name():
    fan = SinkFanout([_Recorder(fail_on=2)])
    fan.open(SinkContext(load_preset("VLP-16")))
    with pytest.raises(SinkError, match=r"_Recorder failed on scan 2: disk full"):
        for i in range(50):
            fan.write(_scan(i))
            time.sleep(0.002)
        fan.close()


def test_a_sink_failing_to_open_closes_the_ones_before_it():
    class _Refuses(_Recorder):
        def open(self, context):
            raise ValueError("bad target")

    first = _Recorder()
    fan = SinkFanout([first, _Refuses()])
    with pytest.raises(ValueError, match="bad target"):
        fan.open(SinkContext(load_preset("VLP-16")))
    assert first.opened and first.closed


class _Tracking:
    """A sink that records whether it was closed; raises on scan ``fail_at`` when given."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at, self.seen, self.closed = fail_at, 0, False

    def open(self, context) -> None:
        pass

    def write(self, scan) -> None:
        if self.seen == self.fail_at:
            raise OSError("disk full")
        self.seen += 1

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("background", [True, False])
def test_a_sink_failing_mid_run_closes_every_sink_and_leaves_complete_files(tmp_path, background):
    from scenes import wall_scene

    from rt_lidar.pipeline.builder import build_pipeline
    from rt_lidar.pipeline.scan_loop import run_scans
    from rt_lidar.sinks.base import make_sink
    from rt_lidar.sinks.fanout import SinkError
    from rt_lidar.sinks.pcd import read_pcd_points
    from rt_lidar.sinks.recording import CloudRecording

    built = build_pipeline("VLP-16", wall_scene(20.0))
    bag = tmp_path / "bag"
    before, failing, after = _Tracking(), _Tracking(fail_at=2), _Tracking()
    pcd = make_sink(f"pcd:{tmp_path / 'pcd'}")
    rosbag = make_sink(f"rosbag2:{bag}")
    sinks = [before, pcd, failing, rosbag, after]
    with pytest.raises(SinkError, match="_Tracking failed on scan 2: disk full"):
        run_scans(built.pipeline, 10, sinks, background=background)
    assert before.closed and failing.closed and after.closed
    assert built.pipeline.on_sector is None
    pcds = sorted((tmp_path / "pcd").glob("*.pcd"))  # scans 0, 1, 2 (it came before the failing sink)
    assert len(pcds) == 3 and not list((tmp_path / "pcd").glob("*.part"))
    assert all(read_pcd_points(p).size > 1000 for p in pcds)
    with CloudRecording(bag) as rec:  # closed: the bag is finished and readable, scans 0 and 1
        assert len(rec) == 2 and all(scan.points.size > 1000 for _, scan in rec)
