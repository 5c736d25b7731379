"""The viewer yields the CPU to the simulation: every thread of the process (those started before the
call too: Linux schedules per thread) takes the idle class or the niceness, and so do threads started
later; a child started before keeps the normal priority. Each case runs in a fresh interpreter, since a
process cannot take a lowered priority back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = r"""
import json, os, sys, threading, time
from rt_lidar.viewer.app import lower_priority
stop = threading.Event()
early = threading.Thread(target=stop.wait)
early.start()
child = __import__("subprocess").Popen([sys.executable, "-c", "import time; time.sleep(30)"])
applied = lower_priority(sys.argv[1], 7)
late = threading.Thread(target=stop.wait)
late.start()
tids = sorted(int(t) for t in os.listdir("/proc/self/task"))
out = {
    "applied": applied,
    "policies": [os.sched_getscheduler(t) for t in tids],
    "nices": [os.getpriority(os.PRIO_PROCESS, t) for t in tids],
    "child_policy": os.sched_getscheduler(child.pid),
    "child_nice": os.getpriority(os.PRIO_PROCESS, child.pid),
    "threads": len(tids),
}
stop.set()
child.kill()
print(json.dumps(out))
"""

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux scheduler classes")


def _probe(priority: str) -> dict[str, object]:
    run = subprocess.run([sys.executable, "-c", PROBE, priority], capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr.decode()
    result: dict[str, object] = json.loads(run.stdout.decode().splitlines()[-1])
    return result


@linux_only
def test_idle_class_on_every_thread() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    got = _probe("idle")
    assert got["applied"] == "idle"
    assert got["threads"] >= 3  # main, one thread from before the call, one from after
    assert set(got["policies"]) == {os.SCHED_IDLE}  # type: ignore[arg-type]
    assert got["child_policy"] == os.SCHED_OTHER and got["child_nice"] == base


@linux_only
def test_nice_on_every_thread() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    got = _probe("nice")
    assert got["applied"] == "nice+7"
    assert set(got["nices"]) == {min(19, base + 7)}  # type: ignore[arg-type]
    assert set(got["policies"]) == {os.SCHED_OTHER}  # type: ignore[arg-type]
    assert got["child_nice"] == base


def test_normal_and_bad_priority() -> None:
    from rt_lidar.viewer.app import lower_priority

    assert lower_priority("normal") == "normal"
    with pytest.raises(ValueError, match="priority must be one of idle, nice, normal, got 'fast'"):
        lower_priority("fast")
