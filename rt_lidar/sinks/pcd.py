"""PCD (Point Cloud Library) files: binary, every field of the point type, plus optional extra fields
(``epw_ns``, the echo pulse width) appended after them when a scan carries them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rt_lidar.errors import ConfigError
from rt_lidar.points import POINT_DTYPE, POINT_FIELDS
from rt_lidar.sinks.atomic import atomic_write

__all__ = ["pcd_header", "read_pcd", "with_extras", "write_pcd"]

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


def with_extras(points: np.ndarray, extras: dict[str, np.ndarray] | None) -> np.ndarray:
    """``points`` with the per-point ``extras`` appended as fields (the same array when there are none)."""
    if not extras:
        return points
    names = points.dtype.names or ()
    clash = [k for k in extras if k in names]
    if clash:
        raise ValueError(f"extra fields {clash} clash with the point fields")
    for k, v in extras.items():
        if v.shape != points.shape:
            raise ValueError(f"extra field {k!r} has {v.shape[0]} values for {points.size} points")
    fields = [(n, points.dtype.fields[n][0]) for n in names] if points.dtype.fields else []
    dtype = np.dtype(fields + [(k, v.dtype) for k, v in extras.items()])
    out = np.empty(points.shape, dtype)
    for n in names:
        out[n] = points[n]
    for k, v in extras.items():
        out[k] = v
    return out


def write_pcd(path: str | Path, points: np.ndarray, extras: dict[str, np.ndarray] | None = None) -> Path:
    """Write structured ``points`` (and any per-point ``extras`` as further fields) as a binary PCD
    (little-endian, packed); returns the path."""
    points = with_extras(points, extras)
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
        raise ConfigError(f"{path}: not a binary PCD file (no 'DATA binary' line)")
    return np.frombuffer(data, dtype=dtype, offset=pos + len(marker)).copy()


def read_pcd_points(path: str | Path) -> np.ndarray:
    """A PCD file (binary or ascii, any subset of our fields) as :data:`POINT_DTYPE` points.

    Fields the file lacks stay zero; ``t`` may also come as ``time`` (seconds, float) as the ROS drivers
    write it. Anything else about the file that is not PCD v0.7 gives a ConfigError naming it.
    """
    data = Path(path).read_bytes()
    header: dict[str, list[str]] = {}
    pos = 0
    while True:
        end = data.find(b"\n", pos)
        if end < 0:
            raise ConfigError(f"{path}: not a PCD file (no DATA line)")
        line = data[pos:end].decode("ascii", "replace").strip()
        pos = end + 1
        if not line or line.startswith("#"):
            continue
        key, *values = line.split()
        header[key.upper()] = values
        if key.upper() == "DATA":
            break
    try:
        names = header["FIELDS"]
        sizes = [int(v) for v in header["SIZE"]]
        types = header["TYPE"]
        counts = [int(v) for v in header.get("COUNT", ["1"] * len(names))]
        n = int(header["POINTS"][0])
    except (KeyError, ValueError, IndexError) as exc:
        raise ConfigError(f"{path}: PCD header lacks or garbles {exc}") from None
    kinds = {"F": "f", "I": "i", "U": "u"}
    fields = [
        (nm, f"<{kinds[t]}{s}", (c,) if c > 1 else ())
        for nm, s, t, c in zip(names, sizes, types, counts, strict=True)
    ]
    dtype = np.dtype([(nm, dt, shape) if shape else (nm, dt) for nm, dt, shape in fields])
    mode = header["DATA"][0].lower()
    if mode == "binary":
        raw = np.frombuffer(data, dtype=dtype, count=n, offset=pos)
    elif mode == "ascii":
        table = np.loadtxt(data[pos:].decode().splitlines(), ndmin=2) if n else np.zeros((0, len(names)))
        raw = np.zeros(n, dtype)
        for i, nm in enumerate(names):
            raw[nm] = table[:, i]
    else:
        raise ConfigError(f"{path}: PCD 'DATA {mode}' is not supported (binary or ascii)")
    out = np.zeros(n, POINT_DTYPE)
    for nm in POINT_FIELDS:
        if nm in names:
            out[nm] = raw[nm]
    if "t" not in names and "time" in names:
        out["t"] = np.round(raw["time"].astype(np.float64) * 1e9).astype(np.int64)
    return out
