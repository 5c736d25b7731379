"""Type stub of the compiled field copy (``_field_copy.c``)."""

from typing import Any

def copy_runs(dst: Any, src: Any, n: int, dst_itemsize: int, src_itemsize: int, runs: Any, /) -> None:
    """Each of ``n`` records' runs (dst offset, src offset, size; int64) of bytes, in one pass."""

def seconds_f32(
    dst: Any, src: Any, n: int, dst_itemsize: int, src_itemsize: int, dst_offset: int, src_offset: int, /
) -> None:
    """Each record's int64 ns at ``src_offset`` as float32 seconds at ``dst_offset``, in one pass."""

def intensity_uint(
    dst: Any,
    src: Any,
    n: int,
    dst_itemsize: int,
    src_itemsize: int,
    dst_offset: int,
    src_offset: int,
    out_size: int,
    max_value: int,
    runs: Any,
    /,
) -> None:
    """Each record's float32 at ``src_offset`` as a rounded, clipped uint8 or uint16 at ``dst_offset``, and
    its runs (as :func:`copy_runs`), in one pass."""
