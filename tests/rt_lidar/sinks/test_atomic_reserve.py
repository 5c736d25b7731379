"""``atomic_write``'s ``size_hint``: the blocks reserved before the data, the file the same, and blocks
reserved beyond what was written given back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rt_lidar.sinks import atomic
from rt_lidar.sinks.atomic import atomic_write, reserve_blocks

_MB = 1 << 20


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def test_reserve_blocks_allocates_without_growing_the_file(tmp_path: Path) -> None:
    with open(tmp_path / "f", "wb") as fh:
        if not reserve_blocks(fh.fileno(), 2 * _MB):
            pytest.skip("this filesystem does not reserve blocks (fallocate)")
        assert os.fstat(fh.fileno()).st_size == 0 and os.fstat(fh.fileno()).st_blocks * 512 >= 2 * _MB
        assert not reserve_blocks(fh.fileno(), 0)


@pytest.mark.parametrize("hint", [3 * _MB, _MB + 7, 8 * _MB, _MB // 2, None])
def test_a_hinted_file_is_the_bytes_written_and_keeps_no_spare_blocks(
    tmp_path: Path, hint: int | None
) -> None:
    data = os.urandom(_MB + 7)
    target = tmp_path / "scan.bin"
    with atomic_write(target, size_hint=hint) as fh:
        fh.write(data[:100])
        fh.write(data[100:])
    assert target.read_bytes() == data
    assert _allocated(target) < len(data) + 64 * 1024  # an over-reservation went back
    assert [p.name for p in tmp_path.iterdir()] == ["scan.bin"]


def test_a_failed_hinted_write_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), atomic_write(tmp_path / "x.pcd", size_hint=4 * _MB) as fh:
        fh.write(b"half")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_without_fallocate_the_hint_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(atomic, "_fallocate", lambda: None)
    with atomic_write(tmp_path / "a.bin", size_hint=2 * _MB) as fh:
        fh.write(b"abc")
    assert (tmp_path / "a.bin").read_bytes() == b"abc"
