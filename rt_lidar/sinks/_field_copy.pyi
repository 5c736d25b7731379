"""Type stub of the compiled field copy (``_field_copy.c``)."""

from typing import Any

def copy_runs(dst: Any, src: Any, n: int, dst_itemsize: int, src_itemsize: int, runs: Any, /) -> None:
    """Each of ``n`` records' runs (dst offset, src offset, size; int64) of bytes, in one pass."""
