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
