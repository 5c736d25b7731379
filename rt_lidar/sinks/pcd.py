"""PCD (Point Cloud Library) files: binary, every field of the point type, plus optional extra fields
(``epw_ns``, the echo pulse width) appended after them when a scan carries them.

Intensity is written in the sensor's own type when the writer is given one (:func:`intensity_dtype` of
the preset's ``[output]``): a Velodyne's 8-bit integers as ``U 1``, an Ouster's photon counts as ``U 2``,
a continuous or fractional-step intensity as ``F 4`` (issue 40); without one, float32 as the point type
holds it."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from rt_lidar.errors import ConfigError, FieldError
from rt_lidar.points import POINT_DTYPE, POINT_FIELDS
from rt_lidar.sinks.atomic import atomic_write
from rt_lidar.sinks.field_copy import copy_same_fields, intensity_uint_compiled

__all__ = [
    "intensity_dtype",
    "lzf_decompress",
    "pcd_header",
    "read_pcd",
    "read_pcd_table",
    "with_extras",
    "with_intensity_type",
    "write_pcd",
]

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
    copy_same_fields(out, points, list(names))  # the point fields as one block
    for k, v in extras.items():
        out[k] = v
    return out


def intensity_dtype(intensity_max: int, intensity_step: float) -> np.dtype:
    """The type a sensor reports its intensity in: the smallest unsigned integer that holds
    ``intensity_max`` where the reporting step is a whole number (Velodyne's 8-bit intensity: uint8;
    Ouster's photon counts to 65,535: uint16; a 12-bit power: uint16), float32 where the step is 0
    (continuous) or fractional."""
    step = float(intensity_step)
    if step <= 0.0 or step != round(step):
        return np.dtype(np.float32)
    for t in (np.uint8, np.uint16, np.uint32):
        if intensity_max <= np.iinfo(t).max:
            return np.dtype(t)
    return np.dtype(np.float32)


def with_intensity_type(points: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``points`` with their ``intensity`` field as ``dtype`` (rounded and clipped to its range for an
    integer type); the same array when it already is."""
    names = points.dtype.names or ()
    if "intensity" not in names or points.dtype.fields is None:
        return points
    if points.dtype.fields["intensity"][0] == dtype:
        return points
    fields = [(n, dtype if n == "intensity" else points.dtype.fields[n][0]) for n in names]
    out = np.empty(points.shape, np.dtype(fields))
    around = [n for n in names if n != "intensity"]
    if intensity_uint_compiled(out, points, around):  # the lines below in one compiled pass, the same bytes
        return out
    copy_same_fields(out, points, around)  # the fields around it as blocks
    # float32 holds every value rint, clip and the cast give for a target of up to 16 bits: the same
    # results as in float64, from half the bytes
    work = np.float32 if dtype.itemsize <= 2 or dtype == np.float32 else np.float64
    values = np.nan_to_num(points["intensity"].astype(work), nan=0.0, posinf=0.0, neginf=0.0)
    if dtype.kind == "u":
        values = np.clip(np.rint(values), 0, np.iinfo(dtype).max)
    out["intensity"] = values.astype(dtype)
    return out


def write_pcd(
    path: str | Path,
    points: np.ndarray,
    extras: dict[str, np.ndarray] | None = None,
    intensity: np.dtype | None = None,
) -> Path:
    """Write structured ``points`` (and any per-point ``extras`` as further fields) as a binary PCD
    (little-endian, packed), ``intensity`` in that type when given (:func:`intensity_dtype`); returns the
    path."""
    if intensity is not None:
        points = with_intensity_type(points, np.dtype(intensity))
    points = with_extras(points, extras)
    packed = np.ascontiguousarray(points, dtype=points.dtype.newbyteorder("<"))
    header = pcd_header(packed.dtype, packed.size)
    with atomic_write(path, size_hint=len(header) + packed.nbytes) as fh:
        fh.write(header)
        fh.write(packed.reshape(-1).view(np.uint8).data)  # the array's own bytes, not a copy
    return Path(path)


def read_pcd(path: str | Path, dtype: np.dtype) -> np.ndarray:
    """Read a binary PCD this module wrote back into ``dtype`` (our own reader, for round trips): each
    field of ``dtype`` from the file's field of that name, in whatever type its header gives (an 8-bit
    intensity comes back as the float32 it stood for)."""
    data = Path(path).read_bytes()
    marker = b"DATA binary\n"
    pos = data.find(marker)
    if pos < 0:
        raise ConfigError(f"{path}: not a binary PCD file (no 'DATA binary' line)")
    header, start = _pcd_header(data, str(path))
    stored, _, _ = _pcd_dtype(header, str(path))
    if stored == np.dtype(dtype):
        return np.frombuffer(data, dtype=dtype, offset=start).copy()
    raw = np.frombuffer(data, dtype=stored, offset=start)
    out = np.zeros(raw.shape[0], dtype)
    for n in np.dtype(dtype).names or ():
        if n in (stored.names or ()):
            out[n] = raw[n]
    return out


_PCD_SIZES = {"F": (2, 4, 8), "I": (1, 2, 4, 8), "U": (1, 2, 4, 8)}
MAX_PCD_COUNT = 4096
"""Largest COUNT (values per field) a PCD may declare."""


def _pcd_header(data: bytes, path: str) -> tuple[dict[str, list[str]], int]:
    """The header lines of a PCD file by keyword, and the offset of the data after ``DATA``."""
    header: dict[str, list[str]] = {}
    pos = 0
    while True:
        end = data.find(b"\n", pos)
        if end < 0:
            raise FieldError(path, "DATA", "not a PCD file: no DATA line")
        line = data[pos:end].decode("ascii", "replace").strip()
        pos = end + 1
        if not line or line.startswith("#"):
            continue
        key, *values = line.split()
        header[key.upper()] = values
        if key.upper() == "DATA":
            if not values:
                raise FieldError(path, "DATA", "names no encoding (binary or ascii)")
            return header, pos


def _ints(header: dict[str, list[str]], key: str, path: str, n: int | None, lo: int, hi: int) -> list[int]:
    values = header.get(key)
    if values is None:
        raise FieldError(path, key, "is missing")
    if n is not None and len(values) != n:
        raise FieldError(path, key, f"has {len(values)} values for {n} FIELDS")
    try:
        out = [int(v) for v in values]
    except ValueError:
        raise FieldError(path, key, f"must hold whole numbers, got {' '.join(values)!r:.80}") from None
    bad = [v for v in out if not lo <= v <= hi]
    if bad:
        raise FieldError(path, key, f"must be in [{lo}, {hi}], got {bad[0]}")
    return out


def _pcd_dtype(header: dict[str, list[str]], path: str) -> tuple[np.dtype, list[str], list[int]]:
    names = header.get("FIELDS")
    if not names:
        raise FieldError(path, "FIELDS", "is missing or empty")
    sizes = _ints(header, "SIZE", path, len(names), 1, 8)
    counts = (
        _ints(header, "COUNT", path, len(names), 1, MAX_PCD_COUNT) if "COUNT" in header else [1] * len(names)
    )
    types = header.get("TYPE")
    if types is None or len(types) != len(names):
        raise FieldError(path, "TYPE", f"must give one of F, I, U for each of the {len(names)} FIELDS")
    names = [f"_pad{i}" if nm == "_" else nm for i, nm in enumerate(names)]  # PCL's padding fields
    if len(set(names)) != len(names):
        raise FieldError(path, "FIELDS", f"names a field twice: {' '.join(names)!r:.80}")
    fields = []
    for nm, size, tp, count in zip(names, sizes, types, counts, strict=True):
        if tp.upper() not in _PCD_SIZES:
            raise FieldError(path, "TYPE", f"field {nm!r}: must be F, I or U, got {tp!r:.20}")
        if size not in _PCD_SIZES[tp.upper()]:
            allowed = ", ".join(map(str, _PCD_SIZES[tp.upper()]))
            raise FieldError(path, "SIZE", f"field {nm!r} of TYPE {tp}: must be {allowed} bytes, got {size}")
        dt = f"<{tp.lower()}{size}"
        fields.append((nm, dt, (count,)) if count > 1 else (nm, dt))
    return np.dtype(fields), names, counts


def read_pcd_table(path: str | Path) -> np.ndarray:
    """A PCD file (binary or ascii) as a structured array of the fields it has, named and typed as its
    header says (``ring``, ``channel``, ``reflectivity``, ... as the writer named them).

    A header or data that is not PCD v0.7 (a bad TYPE or SIZE, short rows, more POINTS than the file
    holds, a DATA kind other than binary or ascii) gives a :class:`~rt_lidar.errors.FieldError` naming
    the file and the field, before anything of the declared size is allocated.
    """
    where = str(path)
    data = Path(path).read_bytes()
    header, pos = _pcd_header(data, where)
    dtype, names, counts = _pcd_dtype(header, where)
    n = _ints(header, "POINTS", where, None, 0, 2**62)
    if len(n) != 1:
        raise FieldError(where, "POINTS", f"must be one number, got {len(n)}")
    count = n[0]
    mode = header["DATA"][0].lower()
    body = len(data) - pos
    if mode == "binary":
        if count * dtype.itemsize > body:
            raise FieldError(
                where,
                "POINTS",
                f"{count:,} points of {dtype.itemsize} bytes need {count * dtype.itemsize:,} bytes; "
                f"the file holds {body:,} after DATA",
            )
        raw = np.frombuffer(data, dtype=dtype, count=count, offset=pos)
    elif mode == "ascii":
        raw = _ascii_rows(data[pos:], dtype, names, counts, count, where)
    elif mode == "binary_compressed":
        raw = _compressed_rows(data[pos:], dtype, count, where)
    else:
        raise FieldError(where, "DATA", f"'{mode}' is not supported (binary, binary_compressed or ascii)")
    return raw


def _compressed_rows(body: bytes, dtype: np.dtype, n: int, path: str) -> np.ndarray:
    """PCL's ``binary_compressed`` body: uint32 compressed and uncompressed sizes, then LZF data that
    holds the fields one after the other (all points' first field, then the second, ...)."""
    if len(body) < 8:
        raise FieldError(path, "DATA", "binary_compressed without its two 4-byte sizes")
    packed, size = struct.unpack("<II", body[:8])
    if size != n * dtype.itemsize or packed > len(body) - 8:
        raise FieldError(
            path,
            "DATA",
            f"binary_compressed sizes {packed:,} -> {size:,} bytes do not fit {n:,} points of "
            f"{dtype.itemsize} bytes in {len(body) - 8:,} bytes",
        )
    flat = lzf_decompress(body[8 : 8 + packed], size, path)
    raw = np.zeros(n, dtype)
    pos = 0
    for nm in dtype.names or ():
        sub = dtype.fields[nm][0] if dtype.fields else dtype
        width = n * sub.itemsize
        raw[nm] = np.frombuffer(flat[pos : pos + width], sub.base).reshape(raw[nm].shape)
        pos += width
    return raw


def lzf_decompress(src: bytes, size: int, path: str = "LZF data") -> bytes:
    """LZF (liblzf, as PCL compresses PCD bodies) decompressed to ``size`` bytes: a control byte below
    32 starts a run of that many plus one literal bytes; any other is a back reference of length
    ``ctrl >> 5`` (7: plus the next byte) plus 2, at distance ``(ctrl & 31) << 8`` plus the next byte
    plus 1. Data that runs past its end or refers before its start is a :class:`FieldError`."""
    out = bytearray()
    i, n = 0, len(src)
    while i < n:
        ctrl = src[i]
        i += 1
        if ctrl < 32:
            if i + ctrl + 1 > n:
                raise FieldError(path, "DATA", f"LZF literal run past the end at byte {i}")
            out += src[i : i + ctrl + 1]
            i += ctrl + 1
            continue
        length = ctrl >> 5
        if length == 7:
            if i >= n:
                raise FieldError(path, "DATA", f"LZF reference cut at byte {i}")
            length += src[i]
            i += 1
        if i >= n:
            raise FieldError(path, "DATA", f"LZF reference cut at byte {i}")
        ref = len(out) - ((ctrl & 31) << 8) - src[i] - 1
        i += 1
        length += 2
        if ref < 0:
            raise FieldError(path, "DATA", f"LZF reference before the start at byte {i}")
        if ref + length <= len(out):
            out += out[ref : ref + length]
        else:  # overlapping: the run repeats what it copies
            for k in range(length):
                out.append(out[ref + k])
        if len(out) > size:
            break
    if len(out) != size:
        raise FieldError(path, "DATA", f"LZF data gives {len(out):,} bytes, its header says {size:,}")
    return bytes(out)


def read_pcd_points(path: str | Path) -> np.ndarray:
    """A PCD file (binary or ascii, any subset of our fields) as :data:`POINT_DTYPE` points.

    Fields the file lacks stay zero; ``t`` may also come as ``time`` (seconds, float) as the ROS drivers
    write it. Bad headers or data are :class:`~rt_lidar.errors.FieldError` (:func:`read_pcd_table`).
    """
    raw = read_pcd_table(path)
    names = raw.dtype.names or ()
    count = raw.shape[0]
    out = np.zeros(count, POINT_DTYPE)
    for nm in POINT_FIELDS:
        if nm in names:
            out[nm] = raw[nm] if raw[nm].ndim == 1 else raw[nm][:, 0]
    if "t" not in names and "time" in names:
        out["t"] = np.round(raw["time"].astype(np.float64) * 1e9).astype(np.int64)
    return out


def _ascii_rows(
    body: bytes, dtype: np.dtype, names: list[str], counts: list[int], n: int, path: str
) -> np.ndarray:
    width = sum(counts)
    if n * (2 * width - 1) > len(body) + 1:  # each value takes a digit and a separator at least
        raise FieldError(path, "POINTS", f"{n:,} points of {width} values cannot fit in {len(body):,} bytes")
    lines = [ln for ln in body.decode("ascii", "replace").splitlines() if ln.strip()]
    if len(lines) < n:
        raise FieldError(path, "POINTS", f"says {n:,} points; the file has {len(lines):,} data rows")
    for i, ln in enumerate(lines[:n]):
        if len(ln.split()) != width:
            raise FieldError(
                path, "DATA", f"row {i + 1} has {len(ln.split())} values, FIELDS/COUNT need {width}"
            )
    try:
        table = np.loadtxt(lines[:n], ndmin=2) if n else np.zeros((0, width))
    except ValueError as exc:
        raise FieldError(path, "DATA", f"a row is not numbers: {exc}") from None
    raw = np.zeros(n, dtype)
    col = 0
    for nm, c in zip(names, counts, strict=True):
        raw[nm] = table[:, col] if c == 1 else table[:, col : col + c]
        col += c
    return raw
