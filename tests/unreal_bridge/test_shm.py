"""The same-host fast path's segments (unreal_bridge.shm): ownership, stale cleanup, what a server maps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from rt_lidar.unreal_bridge.shm import (
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
        from rt_lidar.unreal_bridge.shm import ShmSegment
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


def test_several_segments_of_one_client_are_written_from_threads_at_once():
    """The ring: each answer in flight writes its own segment, at the same time as the others."""
    segs = [ShmSegment(8 << 20) for _ in range(3)]
    shm = ShmAttachments()
    start = threading.Barrier(len(segs))
    offsets: dict[int, list[list[int]]] = {}

    def answer(i: int) -> None:
        target = shm.attach(segs[i].offer())
        start.wait()
        try:
            offsets[i] = [target.write(np.full(1 << 19, i * 10 + k, np.float32)) for k in range(3)]
        finally:
            target.release()

    try:
        threads = [threading.Thread(target=answer, args=(i,)) for i in range(len(segs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(shm._maps) == sorted(s.name for s in segs)
        for i, seg in enumerate(segs):
            for k, (off, n) in enumerate(offsets[i]):
                got = np.frombuffer(seg.read(off, n), np.float32)
                assert got.size == 1 << 19 and (got == i * 10 + k).all()
    finally:
        shm.close()
        for seg in segs:
            seg.close()


def test_a_segment_an_answer_is_writing_is_refused_to_another_until_released():
    seg = ShmSegment(1 << 20)
    shm = ShmAttachments()
    try:
        first = shm.attach(seg.offer())
        with pytest.raises(ShmRefused, match="in use"):
            shm.attach(seg.offer())
        first.release()
        first.release()  # a second release does nothing
        second = shm.attach(seg.offer())
        assert second.write(np.arange(4, dtype=np.uint8))[0] == HEADER_BYTES  # its own write position
        second.release()
    finally:
        shm.close()
        seg.close()


def test_the_server_keeps_a_bounded_number_mapped_and_unmaps_one_in_use_once_written():
    segs = [ShmSegment(1 << 20) for _ in range(4)]
    per_owner = ShmAttachments(max_per_owner=2)
    in_all = ShmAttachments(max_segments=3)
    try:
        writing = per_owner.attach(segs[0].offer())  # dropped from the table while it is written
        for seg in segs[1:]:
            per_owner.attach(seg.offer()).release()
            in_all.attach(seg.offer()).release()
        in_all.attach(segs[0].offer()).release()
        assert list(per_owner._maps) == [segs[2].name, segs[3].name]  # the two most recently used
        assert list(in_all._maps) == [segs[2].name, segs[3].name, segs[0].name]
        assert per_owner.mapped == 3  # and the one being written
        writing.write(np.ones(16, np.float32))  # still mapped
        writing.release()
        assert per_owner.mapped == 2
    finally:
        per_owner.close()
        in_all.close()
        for seg in segs:
            seg.close()


def test_mapping_a_new_segment_drops_the_mappings_of_segments_gone():
    """A client that grows its ring removes its old segments: the server lets go of them at once."""
    old, new = ShmSegment(1 << 20), ShmSegment(2 << 20)
    shm = ShmAttachments()
    try:
        shm.attach(old.offer()).release()
        old.close()
        shm.attach(new.offer()).release()
        assert list(shm._maps) == [new.name]
    finally:
        shm.close()
        new.close()


def test_a_segment_dropped_from_the_table_while_written_is_still_refused_to_another_answer():
    """Evicted while an answer writes it (the table is full), the segment is not mapped afresh for a
    second answer: two answers never write one segment."""
    segs = [ShmSegment(1 << 20) for _ in range(3)]
    shm = ShmAttachments(max_segments=2)
    try:
        writing = shm.attach(segs[0].offer())
        for seg in segs[1:]:
            shm.attach(seg.offer()).release()
        assert segs[0].name not in shm._maps and shm.mapped == 3  # dropped, still being written
        with pytest.raises(ShmRefused, match="in use"):
            shm.attach(segs[0].offer())
        writing.release()
        shm.attach(segs[0].offer()).release()  # written: it may be mapped again
    finally:
        shm.close()
        for seg in segs:
            seg.close()
