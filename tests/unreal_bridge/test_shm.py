"""The same-host fast path's segments (unreal_bridge.shm): ownership, stale cleanup, what a server maps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from unreal_bridge.shm import (
    HEADER_BYTES,
    SHM_DIR,
    ShmAttachments,
    ShmRefused,
    ShmSegment,
    cleanup_stale,
    list_segments,
    shm_available,
)

pytestmark = pytest.mark.skipif(not shm_available(), reason="no writable /dev/shm")


def test_a_segment_is_named_for_its_owner_and_gone_after_close():
    seg = ShmSegment(1 << 20)
    try:
        assert seg.name in list_segments(pid=os.getpid())
        assert (SHM_DIR / seg.name).stat().st_size == seg.size
    finally:
        seg.close()
    assert seg.closed
    assert seg.name not in list_segments()


def test_cleanup_leaves_a_live_segment_and_removes_one_whose_owner_was_killed():
    script = textwrap.dedent(
        """
        import sys, time
        from unreal_bridge.shm import ShmSegment
        seg = ShmSegment(1 << 20)
        print(seg.name, flush=True)
        time.sleep(60)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    name = child.stdout.readline().strip()
    mine = ShmSegment(1 << 20)
    try:
        assert name in list_segments(pid=child.pid)
        assert name not in cleanup_stale()  # its owner lives and holds the lock
        assert name in list_segments()
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert name in list_segments()  # nobody unlinked it: the owner had no chance
        assert name in cleanup_stale()
        assert list_segments(pid=child.pid) == []
        assert mine.name in list_segments()  # our live one stays
    finally:
        child.kill()
        child.wait()
        mine.close()


def test_a_server_maps_only_an_offer_whose_token_is_in_the_segment(tmp_path):
    seg = ShmSegment(1 << 20)
    shm = ShmAttachments()
    try:
        target = shm.attach(seg.offer())
        data = np.arange(1000, dtype=np.float32)
        off, n = target.write(data)
        assert off == HEADER_BYTES and n == data.nbytes
        assert seg.read(off, n) == data.tobytes()
        forged = {**seg.offer(), "token": "0" * 32}
        with pytest.raises(ShmRefused, match="token"):
            shm.attach(forged)
        with pytest.raises(ShmRefused, match="not a segment name"):
            shm.attach({**seg.offer(), "shm": "../etc/passwd"})
        with pytest.raises(ShmRefused, match="offered"):
            ShmAttachments().attach({**seg.offer(), "size": seg.size + 4096})
        with pytest.raises(ShmRefused, match="no such segment"):  # another host's /dev/shm
            ShmAttachments(directory=tmp_path).attach(seg.offer())
        with pytest.raises(ShmRefused, match="too small"):
            target.write(np.zeros(seg.size, np.uint8))
        with pytest.raises(ValueError, match="outside"):
            seg.read(seg.size - 8, 16)
    finally:
        shm.close()
        seg.close()


def test_the_server_forgets_a_segment_its_owner_removed():
    seg = ShmSegment(1 << 20)
    shm = ShmAttachments()
    try:
        shm.attach(seg.offer())
        assert len(shm._maps) == 1
        seg.close()
        shm.forget_gone()
        assert shm._maps == {}
        with pytest.raises(ShmRefused, match="no such segment"):
            shm.attach(seg.offer())
    finally:
        shm.close()
        seg.close()
