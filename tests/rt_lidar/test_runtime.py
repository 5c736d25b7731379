"""The allocator setting the CLI applies: freed frame-sized blocks are reused, not faulted in anew."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = r"""
import resource, sys
import numpy as np
if sys.argv[1] == "tuned":
    from rt_lidar.session.realtime import tune_allocator
    assert tune_allocator() and tune_allocator()  # idempotent
a = np.random.default_rng(0).random(600_000)  # 4.8 MB, like a frame's temporaries
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    b = a * 2.0
    c = b + a
    del b, c
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt (Linux)")
def test_tuned_allocator_stops_per_frame_page_faults() -> None:
    def faults(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True)
        return int(out.stdout.strip())

    plain, tuned = faults("plain"), faults("tuned")
    assert tuned * 10 < plain, (plain, tuned)  # plain: fresh pages every loop (~24k); tuned: reused (<1k)


PREFAULT_CHILD = r"""
import os, sys
import numpy as np
from rt_lidar.allocator import allocator_tuned, prefault_heap, tune_allocator
if sys.argv[1] != "untuned":
    assert tune_allocator()
assert allocator_tuned() == (sys.argv[1] != "untuned")
touched = prefault_heap(48 << 20) if sys.argv[1] != "tuned" else 0
def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = resident()
blocks = [np.ones(1 << 20) for _ in range(4)]  # 32 MB of frame-sized temporaries, touched
print(touched, resident() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt (Linux)")
def test_prefaulted_heap_serves_the_first_frames_from_memory_already_there() -> None:
    def run(mode: str) -> tuple[int, int]:
        out = subprocess.run(
            [sys.executable, "-c", PREFAULT_CHILD, mode], capture_output=True, text=True, check=True
        )
        touched, grown = out.stdout.split()
        return int(touched), int(grown)

    touched, cold = run("tuned")  # tuned, nothing touched before: the arrays take fresh pages
    assert touched == 0 and cold > 30 << 20, cold
    touched, warm = run("prefaulted")  # they reuse the pages touched before
    assert touched == 48 << 20 and warm < 2 << 20, (warm, cold)
    touched, _ = run("untuned")  # the blocks would go back to the system: nothing is done
    assert touched == 0
