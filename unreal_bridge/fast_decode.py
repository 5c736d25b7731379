"""Fast msgpack array codec: numeric arrays straight between msgpack bytes and NumPy.

A 100k-point ``getLidarData`` answer is one map holding a 300k-element ``point_cloud`` array of
float32 values (each ``0xca`` + 4 big-endian bytes) and a 100k-element ``segmentation`` array of ints.
Decoding that with a generic msgpack decoder makes 400k Python objects. Here the response is walked
token by token in Python only for its small parts; a numeric array is checked for a uniform element
type with one strided NumPy comparison (``0xca`` every 5 bytes, ``0xcb`` every 9, one byte per fixint,
...) and read as a strided big-endian view. Arrays that are not uniform (mixed widths, mixed
float32/float64) fall back to msgpack's C decoder for that one array, which is always correct, except
the common mix msgpack-c writes for small ints (fixints with ``0xcc``/``0xd0`` elements, e.g. segmentation
ids 0..255 and -1), which :func:`_decode_narrow_ints` reads vectorised.

The encoders do the inverse for the server: an array header plus fixed-width elements, built by NumPy.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt

from .errors import WireFormatError

_compiled_narrow_ints: Callable[[Buffer, int, int, np.ndarray], tuple[int, int]] | None
try:
    from ._narrow_ints import narrow_ints as _compiled_narrow_ints
except ImportError:  # built without a C compiler: the NumPy version gives the same answers, ~3x slower
    _compiled_narrow_ints = None

__all__ = [
    "Buffer",
    "Truncated",
    "array_header",
    "decode",
    "decode_array",
    "pack_float32_array",
    "pack_float32_rows",
    "pack_int32_array",
    "pack_int_array",
]

#: Anything NumPy and ``struct`` can read bytes from.
Buffer = bytes | bytearray | memoryview

# Element type byte -> big-endian NumPy dtype of the payload that follows it.
_TYPED: dict[int, str] = {
    0xCA: ">f4",
    0xCB: ">f8",
    0xCC: "u1",
    0xCD: ">u2",
    0xCE: ">u4",
    0xCF: ">u8",
    0xD0: "i1",
    0xD1: ">i2",
    0xD2: ">i4",
    0xD3: ">i8",
}
_SCALAR_FMT: dict[int, str] = {
    0xCA: ">f",
    0xCB: ">d",
    0xCC: ">B",
    0xCD: ">H",
    0xCE: ">I",
    0xCF: ">Q",
    0xD0: ">b",
    0xD1: ">h",
    0xD2: ">i",
    0xD3: ">q",
}
_FIXEXT_LEN = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
# Arrays longer than this that are not requested as NumPy go through msgpack's C decoder.
_C_DECODE_MIN = 32


class Truncated(WireFormatError):
    """The data ends inside the object: more bytes are needed.

    Raised only when the data surely ends too early. ``need`` is the total size the decoder expects
    (exact for uniform numeric arrays, a hint otherwise): a stream reader may wait for that many bytes
    before trying again, but should also try again whenever the stream pauses.
    """

    def __init__(self, need: int, have: int, least: int | None = None) -> None:
        self.need = need
        self.least = need if least is None else min(least, need)
        """Bytes the object surely takes at least (``need`` itself unless ``need`` is only a hint)."""
        super().__init__(f"msgpack data truncated: need {need} bytes, have {have}")


def _need(buf: Buffer, end: int) -> None:
    if end > len(buf):
        raise Truncated(end, len(buf))


def _array_header(buf: Buffer, pos: int) -> tuple[int, int]:
    """Return ``(length, payload_offset)`` of the array starting at ``pos``."""
    _need(buf, pos + 1)
    b = buf[pos]
    if 0x90 <= b <= 0x9F:
        return b & 0x0F, pos + 1
    if b == 0xDC:
        _need(buf, pos + 3)
        return struct.unpack_from(">H", buf, pos + 1)[0], pos + 3
    if b == 0xDD:
        _need(buf, pos + 5)
        return struct.unpack_from(">I", buf, pos + 1)[0], pos + 5
    raise WireFormatError(f"expected a msgpack array at offset {pos}, found type byte 0x{b:02x}")


def _c_decode(buf: Buffer, pos: int) -> tuple[Any, int]:
    """Decode one object at ``pos`` with msgpack's C decoder; return it and its end offset."""
    view = memoryview(buf)[pos:]
    big = 0x7FFFFFFF  # lengths are checked against the data, not against the buffer's size so far
    unpacker = msgpack.Unpacker(
        raw=False,
        max_buffer_size=max(len(view), 1),
        strict_map_key=False,
        max_str_len=big,
        max_bin_len=big,
        max_array_len=big,
        max_map_len=big,
        max_ext_len=big,
    )
    unpacker.feed(view)
    try:
        obj = unpacker.unpack()
    except msgpack.OutOfData as exc:
        raise Truncated(len(buf) + 1, len(buf)) from exc
    except (ValueError, msgpack.UnpackException) as exc:
        raise WireFormatError(f"invalid msgpack data at offset {pos}: {exc}") from exc
    return obj, pos + unpacker.tell()


def decode_array(buf: Buffer, pos: int, dtype: npt.DTypeLike) -> tuple[np.ndarray, int]:
    """Decode the numeric msgpack array at ``pos`` into a 1-D array of ``dtype``.

    Returns the array and the offset just past the msgpack array. Uniform float32, float64, sized-int
    and fixint arrays are read by strided views without per-element Python work; anything else is
    decoded by msgpack and converted, so the result always equals ``np.asarray(msgpack_value, dtype)``.
    """
    n, p = _array_header(buf, pos)
    out_dtype = np.dtype(dtype)
    if n == 0:
        return np.empty(0, out_dtype), p
    _need(buf, p + 1)
    first = buf[p]
    typed = _TYPED.get(first)
    if typed is not None:
        elem = np.dtype([("t", "u1"), ("v", typed)])
        end = p + n * elem.itemsize
        if p + n > len(buf):  # surely short (every element takes a byte); ``end`` if uniform (a hint)
            raise Truncated(end, len(buf), least=p + n)
        if end <= len(buf):
            rec = np.frombuffer(buf, dtype=elem, count=n, offset=p)
            if bool((rec["t"] == first).all()):
                return rec["v"].astype(out_dtype), end
        else:  # incomplete for a uniform array: if what is here is uniform, it surely is incomplete
            k = (len(buf) - p) // elem.itemsize
            uniform = bool((np.frombuffer(buf, dtype=elem, count=k, offset=p)["t"] == first).all())
            if uniform and n - k > len(buf) - p - k * elem.itemsize:  # the rest needs >= 1 byte each
                raise Truncated(end, len(buf), least=p + k * elem.itemsize + n - k)  # ``end``: a hint
    elif first < 0x80 or first >= 0xE0:
        end = p + n
        _need(buf, end)
        raw = np.frombuffer(buf, dtype=np.uint8, count=n, offset=p)
        if bool(((raw < 0x80) | (raw >= 0xE0)).all()):
            return raw.view(np.int8).astype(out_dtype), end
    if first < 0x80 or first >= 0xE0 or first in (0xCC, 0xD0):
        narrow = _decode_narrow_ints(buf, p, n)
        if narrow is not None:
            return narrow[0].astype(out_dtype), narrow[1]
    values, end = _c_decode(buf, pos)
    try:
        return np.asarray(values, dtype=out_dtype).reshape(-1), end
    except (TypeError, ValueError) as exc:
        raise WireFormatError(f"msgpack array at offset {pos} is not numeric: {exc}") from exc


def _decode_narrow_ints(buf: Buffer, p: int, n: int) -> tuple[np.ndarray, int] | None:
    """Read ``n`` ints of 1 or 2 bytes each (fixints, ``0xcc`` uint8, ``0xd0`` int8) at ``p``.

    Uses the compiled one-pass loop (``unreal_bridge/_narrow_ints.c``) where it was built, else
    :func:`_narrow_ints_numpy`. Returns ``None`` when the array holds anything else (the caller falls
    back); raises :class:`Truncated` when what is here is such an array cut short.
    """
    if _compiled_narrow_ints is None:
        return _narrow_ints_numpy(buf, p, n)
    out = np.empty(n, dtype=np.int16)
    status, value = _compiled_narrow_ints(buf, p, n, out)
    if status == 1:
        return None
    if status == 2:
        raise Truncated(len(buf) + n - value, len(buf))  # at least one byte per missing element
    return out, value


def _narrow_ints_numpy(buf: Buffer, p: int, n: int) -> tuple[np.ndarray, int] | None:
    """:func:`_decode_narrow_ints` vectorised with NumPy (the twin of the compiled loop).

    In such an array every byte other than ``0xcc``/``0xd0`` ends an element (a fixint or a payload),
    so in each run of ``0xcc``/``0xd0`` bytes the type bytes are those at even places from the run's
    start (runs longer than one byte are rare: a payload that is itself 204, 208 or -48). Type byte
    ``k`` (in order) starts element ``t_k - k``; element ``i`` ends at byte ``i`` plus the number of
    type bytes up to it, so the elements are gathered with one cumulative sum and one ``take`` (a
    boolean mask over the bytes is ~10x slower: its branches are unpredictable). Each element is
    checked against the alphabet, so the result is msgpack's. Returns ``None`` when the array holds
    anything else (the caller falls back); raises :class:`Truncated` when what is here is such an
    array cut short.
    """
    stop = min(len(buf), p + 2 * n)
    raw = np.frombuffer(buf, dtype=np.uint8, count=stop - p, offset=p)
    candidate = raw == 0xCC
    candidate |= raw == 0xD0
    types = _type_bytes(np.flatnonzero(candidate))
    starts = types - np.arange(types.size)  # the element each type byte starts (non-decreasing)
    inside = int(np.searchsorted(starts, n))  # type bytes within the first n elements
    if n + inside <= raw.size:
        values = _narrow_elements(raw, types[:inside], starts[:inside], n)
        return None if values is None else (values, p + n + inside)
    complete = raw.size - types.size  # an element is complete with its one non-type byte
    if _narrow_elements(raw, types, starts, complete) is None:
        return None
    raise Truncated(p + raw.size + n - complete, len(buf))  # at least one byte per missing element


def _type_bytes(candidates: np.ndarray) -> np.ndarray:
    """The ``0xcc``/``0xd0`` bytes that are type bytes: in a run of them, those at even places."""
    if candidates.size < 2:
        return candidates
    inner = np.flatnonzero(candidates[1:] - candidates[:-1] == 1) + 1  # continue a run (few)
    if not inner.size:
        return candidates
    fresh = np.diff(inner, prepend=np.intp(-2)) != 1  # the first continuing byte of each run
    run_start = (inner[fresh] - 1)[np.cumsum(fresh.view(np.uint8), dtype=np.int32) - 1]
    keep = np.ones(candidates.size, dtype=bool)
    keep[inner[(inner - run_start) & 1 == 1]] = False  # odd places in the run: payloads
    return candidates[keep]


def _narrow_elements(raw: np.ndarray, types: np.ndarray, starts: np.ndarray, count: int) -> np.ndarray | None:
    """The first ``count`` elements given the type bytes' places, or ``None`` if one is not a narrow int."""
    kind = np.zeros(count, dtype=np.uint8)  # the element's type byte, 0 for a fixint
    inside = starts < count
    kind[starts[inside]] = raw.take(types[inside])
    last = np.cumsum((kind != 0).view(np.uint8), dtype=np.int32)  # int64 accumulation is ~10x slower
    last += np.arange(count, dtype=np.int32)
    tail = raw.take(last)  # each element's last byte: the fixint or the payload
    if not bool(((kind != 0) | (tail < 0x80) | (tail >= 0xE0)).all()):
        return None  # another element type: not this alphabet
    values = tail.view(np.int8).astype(np.int16)
    values += ((kind == 0xCC) & (tail >= 0x80)).view(np.uint8).astype(np.int16) << 8  # uint8 payloads
    return values


def decode(buf: Buffer, pos: int = 0, arrays: Mapping[str, npt.DTypeLike] | None = None) -> tuple[Any, int]:
    """Decode the msgpack object at ``pos``; return it and the offset just past it.

    Equal to ``msgpack.unpackb(..., raw=False)`` except that an array stored under a map key named in
    ``arrays`` (at any depth) comes back as a NumPy array of the dtype given there.
    """
    return _decode(buf, pos, arrays or {})


def _decode(buf: Buffer, pos: int, arrays: Mapping[str, npt.DTypeLike]) -> tuple[Any, int]:
    _need(buf, pos + 1)
    b = buf[pos]
    p = pos + 1
    if b < 0x80:
        return b, p
    if b >= 0xE0:
        return b - 0x100, p
    if 0xA0 <= b <= 0xBF:
        return _str(buf, p, b & 0x1F)
    if 0x80 <= b <= 0x8F:
        return _map(buf, p, b & 0x0F, arrays)
    if 0x90 <= b <= 0x9F or b in (0xDC, 0xDD):
        n, q = _array_header(buf, pos)
        if n > _C_DECODE_MIN:
            return _c_decode(buf, pos)
        items = []
        for _ in range(n):
            item, q = _decode(buf, q, arrays)
            items.append(item)
        return items, q
    if b == 0xC0:
        return None, p
    if b == 0xC2:
        return False, p
    if b == 0xC3:
        return True, p
    fmt = _SCALAR_FMT.get(b)
    if fmt is not None:
        size = struct.calcsize(fmt)
        _need(buf, p + size)
        return struct.unpack_from(fmt, buf, p)[0], p + size
    if b in (0xD9, 0xDA, 0xDB, 0xC4, 0xC5, 0xC6):
        fmt = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}[b]
        size = struct.calcsize(fmt)
        _need(buf, p + size)
        n = struct.unpack_from(fmt, buf, p)[0]
        if b >= 0xD9:
            return _str(buf, p + size, n)
        _need(buf, p + size + n)
        return bytes(buf[p + size : p + size + n]), p + size + n
    if b in (0xDE, 0xDF):
        fmt = ">H" if b == 0xDE else ">I"
        size = struct.calcsize(fmt)
        _need(buf, p + size)
        return _map(buf, p + size, struct.unpack_from(fmt, buf, p)[0], arrays)
    if b in _FIXEXT_LEN or b in (0xC7, 0xC8, 0xC9):
        return _c_decode(buf, pos)
    raise WireFormatError(f"invalid msgpack type byte 0x{b:02x} at offset {pos}")


def _str(buf: Buffer, pos: int, n: int) -> tuple[str, int]:
    _need(buf, pos + n)
    try:
        return bytes(buf[pos : pos + n]).decode("utf-8"), pos + n
    except UnicodeDecodeError as exc:
        raise WireFormatError(f"invalid UTF-8 string at offset {pos}") from exc


def _map(buf: Buffer, pos: int, n: int, arrays: Mapping[str, npt.DTypeLike]) -> tuple[dict[Any, Any], int]:
    out: dict[Any, Any] = {}
    for _ in range(n):
        key, pos = _decode(buf, pos, arrays)
        _need(buf, pos + 1)
        head = buf[pos]
        if isinstance(key, str) and key in arrays and (0x90 <= head <= 0x9F or head in (0xDC, 0xDD)):
            out[key], pos = decode_array(buf, pos, arrays[key])
        else:
            out[key], pos = _decode(buf, pos, arrays)
    return out, pos


def array_header(n: int) -> bytes:
    """The msgpack header of an ``n``-element array."""
    if n < 16:
        return bytes((0x90 | n,))
    if n < 0x10000:
        return b"\xdc" + struct.pack(">H", n)
    return b"\xdd" + struct.pack(">I", n)


def _pack_fixed(values: npt.ArrayLike, type_byte: int, be_dtype: str, src_dtype: type) -> bytes:
    flat: np.ndarray = np.ascontiguousarray(values, dtype=src_dtype).reshape(-1)
    rec = np.empty(flat.size, dtype=[("t", "u1"), ("v", be_dtype)])
    rec["t"] = type_byte
    rec["v"] = flat
    return array_header(flat.size) + rec.tobytes()


def pack_float32_array(values: npt.ArrayLike) -> bytes:
    """msgpack bytes of ``values`` (flattened) as an array of float32 (``0xca``) elements."""
    return _pack_fixed(values, 0xCA, ">f4", np.float32)


def pack_float32_rows(rows: npt.ArrayLike, negate: Sequence[bool]) -> bytearray:
    """msgpack bytes of the (N, k) ``rows`` flattened as float32 elements, negating the columns flagged.

    Negation flips the sign bit of the packed bytes (exactly ``-x`` for every float, NaN and 0 too),
    so a frame change costs no extra pass over the floats. One allocation, no intermediate copies.
    """
    arr: np.ndarray = np.asarray(rows, dtype=np.float32)
    arr = arr.reshape(-1, len(negate))
    n = arr.size
    header = array_header(n)
    out = bytearray(len(header) + 5 * n)
    out[: len(header)] = header
    rec = np.frombuffer(out, dtype=[("t", "u1"), ("v", ">f4")], count=n, offset=len(header))
    rec["t"] = 0xCA
    rec["v"] = arr.reshape(-1)
    raw = np.frombuffer(out, dtype=np.uint8, count=5 * n, offset=len(header))
    width = 5 * len(negate)
    for col, flag in enumerate(negate):
        if flag:
            raw[5 * col + 1 :: width] ^= 0x80  # the sign bit: first payload byte (big-endian)
    del rec, raw
    return out


def pack_int32_array(values: npt.ArrayLike) -> bytes:
    """msgpack bytes of ``values`` (flattened) as an array of int32 (``0xd2``) elements."""
    return _pack_fixed(values, 0xD2, ">i4", np.int32)


def pack_int_array(values: npt.ArrayLike) -> bytes:
    """msgpack bytes of int ``values`` in the narrowest uniform encoding that holds them all.

    Positive/negative fixints (1 byte each) for -32..127, else uint8, int16 or int32 elements; every
    msgpack reader (msgpack-c's ``std::vector<int>`` included) reads them as the same ints.
    """
    flat: np.ndarray = np.asarray(values).reshape(-1)
    if flat.size == 0:
        return array_header(0)
    lo, hi = int(flat.min()), int(flat.max())
    if lo >= -32 and hi <= 127:
        return array_header(flat.size) + flat.astype(np.int8).tobytes()
    if lo >= 0 and hi <= 0xFF:
        return _pack_fixed(flat, 0xCC, "u1", np.uint8)
    if lo >= -0x8000 and hi <= 0x7FFF:
        return _pack_fixed(flat, 0xD1, ">i2", np.int16)
    if lo < -0x80000000 or hi > 0x7FFFFFFF:
        raise OverflowError(f"ints {lo}..{hi} do not fit int32")
    return _pack_fixed(flat, 0xD2, ">i4", np.int32)
