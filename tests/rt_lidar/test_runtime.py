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
