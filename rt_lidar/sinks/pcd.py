"""PCD (Point Cloud Library) files: binary, every field of the point type."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rt_lidar.sinks.atomic import atomic_write

__all__ = ["pcd_header", "read_pcd", "write_pcd"]

_PCD_TYPE = {"f": "F", "i": "I", "u": "U"}


def pcd_header(dtype: np.dtype, count: int, viewpoint: tuple[float, ...] = (0, 0, 0, 1, 0, 0, 0)) -> bytes:
    """The ASCII header of a binary PCD v0.7 file for structured ``dtype``."""
    names = dtype.names or ()
    fields = [dtype.fields[n][0] for n in names] if dtype.fields else []
    lines = [
        "# .PCD v0.7 - Point Cloud Data file format (written by rt-lidar)",
        "VERSION 0.7",
        "FIELDS " + " ".join(names),
        "SIZE " + " ".join(str(f.itemsize) for f in fields),
        "TYPE " + " ".join(_PCD_TYPE[f.kind] for f in fields),
        "COUNT " + " ".join("1" for _ in fields),
        f"WIDTH {count}",
        "HEIGHT 1",
        "VIEWPOINT " + " ".join(f"{v:g}" for v in viewpoint),
        f"POINTS {count}",
        "DATA binary",
    ]
    return ("\n".join(lines) + "\n").encode("ascii")


def write_pcd(path: str | Path, points: np.ndarray) -> Path:
    """Write structured ``points`` as a binary PCD (little-endian, packed); returns the path."""
    packed = np.ascontiguousarray(points, dtype=points.dtype.newbyteorder("<"))
    with atomic_write(path) as fh:
        fh.write(pcd_header(packed.dtype, packed.size))
        fh.write(packed.tobytes())
    return Path(path)


def read_pcd(path: str | Path, dtype: np.dtype) -> np.ndarray:
    """Read a binary PCD this module wrote back into ``dtype`` (our own reader, for round trips)."""
    data = Path(path).read_bytes()
    marker = b"DATA binary\n"
    pos = data.find(marker)
    if pos < 0:
        raise ValueError(f"{path}: not a binary PCD file (no 'DATA binary' line)")
    return np.frombuffer(data, dtype=dtype, offset=pos + len(marker)).copy()
