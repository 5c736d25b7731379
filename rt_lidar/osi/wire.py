"""Protobuf wire encoding of many small messages at once, with NumPy (the Python protobuf API builds
~10^4-10^5 reflections or detections a frame one attribute at a time, several times slower).

:class:`Rows` holds one message per row as byte columns with a validity mask; :meth:`Rows.flat` is the
rows' encodings one after another, what a repeated field of them is on the wire. The caller merges the
bytes into a real message with ``MergeFromString`` (protobuf's own parser checks them), so field
numbers come from the message descriptors (:func:`field_tag`), never typed in.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Rows", "field_tag", "length_delimited", "read_doubles", "read_varints", "varints"]

_WIRE_TYPES = {"double": 1, "varint": 0, "message": 2}


def field_tag(descriptor: Any, name: str, kind: str) -> bytes:
    """The wire tag of field ``name`` of a message ``descriptor`` (``kind``: double, varint, message)."""
    number = descriptor.fields_by_name[name].number
    value = (number << 3) | _WIRE_TYPES[kind]
    enc, lens = varints(np.array([value], np.uint64))
    return bytes(enc[0, : lens[0]])


def varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, 10) uint8 base-128 varint bytes of unsigned ``values`` and each one's length (1..10)."""
    v = np.asarray(values, np.uint64).copy()
    n = v.shape[0]
    out = np.zeros((n, 10), np.uint8)
    lens = np.ones(n, np.int64)
    for k in range(10):
        low = (v & np.uint64(0x7F)).astype(np.uint8)
        v >>= np.uint64(7)
        more = v != 0
        out[:, k] = low | np.where(more, np.uint8(0x80), np.uint8(0))
        lens += more
        if not more.any():
            break
    return out, lens


class Rows:
    """``n`` messages being encoded field by field, in field order."""

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self.cols: list[tuple[np.ndarray, np.ndarray | None, np.ndarray | int]] = []
        self._len = np.zeros(self.n, np.int64)

    def _add(
        self,
        arr: np.ndarray,
        valid: np.ndarray | None,
        present: np.ndarray | None,
        row_len: np.ndarray | int | None = None,
    ) -> None:
        """A column of bytes: ``valid`` (n, w) marks the bytes that are there (None: all), ``present``
        (n,) the rows that have the field at all (None: all); ``row_len`` the valid bytes a row when
        known."""
        if row_len is None:
            row_len = arr.shape[1] if valid is None else valid.sum(axis=1)
        if present is not None:
            p = np.asarray(present, bool)
            valid = p[:, None] if valid is None else valid & p[:, None]
            row_len = np.where(p, row_len, 0)
        self.cols.append((arr, valid, row_len))
        self._len = self._len + row_len

    def _const(self, tag: bytes) -> np.ndarray:
        return np.broadcast_to(np.frombuffer(tag, np.uint8), (self.n, len(tag)))

    def double(self, tag: bytes, values: np.ndarray, present: np.ndarray | None = None) -> Rows:
        """A ``double`` field (8 bytes little-endian)."""
        raw = np.ascontiguousarray(np.asarray(values, "<f8")).view(np.uint8).reshape(self.n, 8)
        self._add(np.concatenate([self._const(tag), raw], axis=1), None, present)
        return self

    def varint(self, tag: bytes, values: np.ndarray, present: np.ndarray | None = None) -> Rows:
        """An unsigned integer field (``uint32``, ``uint64``)."""
        enc, lens = varints(values)
        self._add(self._const(tag), None, present)
        self._add(enc, np.arange(10)[None, :] < lens[:, None], present, lens)
        return self

    def message(self, tag: bytes, inner: Rows, present: np.ndarray | None = None) -> Rows:
        """A sub-message field: each row's ``inner`` message after its length."""
        enc, lens = varints(inner.lengths().astype(np.uint64))
        self._add(self._const(tag), None, present)
        self._add(enc, np.arange(10)[None, :] < lens[:, None], present, lens)
        for arr, valid, row_len in inner.cols:
            self._add(arr, valid, present, row_len)
        return self

    def lengths(self) -> np.ndarray:
        """Encoded length of each row's message."""
        return self._len

    def flat(self) -> bytes:
        """Every row's encoding, one after another."""
        if not self.cols or self.n == 0:
            return b""
        arr = np.concatenate([a for a, _, _ in self.cols], axis=1)
        if all(v is None for _, v, _ in self.cols):
            return arr.tobytes()
        mask = np.concatenate(
            [np.ones(a.shape, bool) if v is None else np.broadcast_to(v, a.shape) for a, v, _ in self.cols],
            axis=1,
        )
        return arr[mask].tobytes()


def length_delimited(data: bytes, tag: bytes) -> tuple[np.ndarray, np.ndarray] | None:
    """(start, length) of each entry of a run of one length-delimited field ``tag`` filling ``data``
    (a repeated sub-message serialized alone); None when ``data`` is anything else."""
    starts: list[int] = []
    lens: list[int] = []
    t = tag[0] if len(tag) == 1 else -1
    pos, end = 0, len(data)
    while pos < end:
        if data[pos] != t or pos + 1 >= end:
            return None
        length = data[pos + 1]
        if length & 0x80:  # a long entry: not the small messages this reads
            return None
        starts.append(pos + 2)
        lens.append(length)
        pos += 2 + length
    if pos != end:
        return None
    return np.array(starts, np.int64), np.array(lens, np.int64)


def read_doubles(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """float64 values of the 8 little-endian bytes at offsets ``at`` of ``buf`` (uint8)."""
    idx = at[:, None] + np.arange(8)[None, :]
    return np.ascontiguousarray(buf[idx]).view("<f8").reshape(-1)


def read_varints(buf: np.ndarray, at: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values uint64, lengths) of the varints at offsets ``at`` of ``buf``, each within ``limit``
    bytes; a length of 0 marks a varint that does not end there."""
    n = at.shape[0]
    value = np.zeros(n, np.uint64)
    length = np.zeros(n, np.int64)
    going = np.ones(n, bool)
    for k in range(10):
        ok = going & (k < limit)
        b = np.where(ok, buf[np.minimum(at + k, buf.shape[0] - 1)], 0).astype(np.uint64)
        value |= (b & np.uint64(0x7F)) << np.uint64(7 * k)
        ended = ok & (b < 0x80)
        length[ended] = k + 1
        going &= ok & ~ended
        if not going.any():
            break
    return value, length
