"""Packing messages as rpclib packs them: float32 floats, NumPy arrays as uniform msgpack arrays of the
narrowest width, :class:`Raw` values spliced in verbatim, big bins kept where they are
(:class:`Packed`) and sent scatter-gather (:func:`send_parts`)."""

from __future__ import annotations

import socket
import time
from typing import Any

import msgpack
import numpy as np

from .. import fast_decode

__all__ = ["Packed", "Raw", "new_packer", "pack", "pack_parts", "send_parts"]


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot msgpack an object of type {type(obj).__name__}")


def new_packer(single_float: bool = True) -> msgpack.Packer:
    """A packer as rpclib packs: float32 floats, str as str, bytes as bin; NumPy values as plain ones.

    ``single_float=False`` packs Python floats as float64, as rpclib packs C++ ``double`` arguments.
    """
    return msgpack.Packer(use_single_float=single_float, use_bin_type=True, default=_default)


class Raw:
    """Bytes that are already one msgpack value, spliced verbatim into a message by :func:`pack`."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | bytearray) -> None:
        self.data = data


def _map_header(n: int) -> bytes:
    if n < 16:
        return bytes((0x80 | n,))
    if n < 0x10000:
        return b"\xde" + n.to_bytes(2, "big")
    return b"\xdf" + n.to_bytes(4, "big")


_CONTAINERS = (Raw, dict, list, tuple, np.ndarray, memoryview)
_INT32 = np.iinfo(np.int32)


def _pack_ndarray(arr: np.ndarray, packer: msgpack.Packer) -> bytes:
    """A numeric array as rpclib sends ``std::vector<float>`` / ``std::vector<int>``, built by NumPy."""
    if arr.dtype.kind == "f":
        return fast_decode.pack_float32_array(arr)
    if arr.dtype.kind in "iu" and (arr.size == 0 or (arr.min() >= _INT32.min and arr.max() <= _INT32.max)):
        return fast_decode.pack_int_array(arr)
    return bytes(packer.pack(arr.tolist()))


def _bin_header(n: int) -> bytes:
    if n < 0x100:
        return bytes((0xC4, n))
    if n < 0x10000:
        return b"\xc5" + n.to_bytes(2, "big")
    return b"\xc6" + n.to_bytes(4, "big")


def _pack_into(out: list[bytes | memoryview], obj: Any, packer: msgpack.Packer) -> None:
    if isinstance(obj, Raw):
        out.append(obj.data)
    elif isinstance(obj, memoryview):  # bin, as msgpack packs it, without copying the bytes twice
        view = obj if obj.ndim == 1 and obj.format == "B" else memoryview(obj.tobytes())
        out.append(_bin_header(view.nbytes))
        out.append(view)
    elif isinstance(obj, np.ndarray):
        out.append(_pack_ndarray(obj, packer))
    elif isinstance(obj, dict):
        out.append(_map_header(len(obj)))
        for key, value in obj.items():
            _pack_into(out, key, packer)
            _pack_into(out, value, packer)
    elif isinstance(obj, list | tuple) and any(isinstance(v, _CONTAINERS) for v in obj):
        out.append(fast_decode.array_header(len(obj)))
        for value in obj:
            _pack_into(out, value, packer)
    else:
        out.append(packer.pack(obj))


def pack(obj: Any, packer: msgpack.Packer | None = None) -> bytes:
    """msgpack bytes of ``obj`` as rpclib packs it, splicing any :class:`Raw` values in verbatim.

    NumPy float arrays go as float32 arrays, int arrays that fit int32 as uniform int arrays of the
    narrowest width (no per-element work).
    """
    return bytes(pack_parts(obj, packer))


class Packed:
    """A packed message as pieces, in order: the bytes :func:`pack` would join, with each big bin
    (a memoryview of an answer's array) left where it is, so a server sends it without a copy."""

    __slots__ = ("nbytes", "parts")

    def __init__(self, parts: list[bytes | memoryview]) -> None:
        self.parts = parts
        self.nbytes = sum(_size(p) for p in parts)

    def __len__(self) -> int:
        return self.nbytes

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)


def _size(piece: bytes | bytearray | memoryview) -> int:
    return piece.nbytes if isinstance(piece, memoryview) else len(piece)


_SMALL_PART = 1 << 16
"""Pieces of a packed message shorter than this are joined with their neighbours (fewer, bigger
buffers to send); longer ones are sent from where they are."""


def pack_parts(obj: Any, packer: msgpack.Packer | None = None) -> Packed:
    """:func:`pack` of ``obj`` as a :class:`Packed` (its big bins not copied)."""
    out: list[bytes | memoryview] = []
    _pack_into(out, obj, packer or new_packer())
    parts: list[bytes | memoryview] = []
    small: list[bytes | memoryview] = []
    for piece in out:
        if _size(piece) < _SMALL_PART:
            small.append(piece)
            continue
        if small:
            parts.append(b"".join(small))
            small = []
        parts.append(piece)
    if small:
        parts.append(b"".join(small))
    return Packed(parts)


_IOV_MAX = 512
"""Most buffers handed to one ``sendmsg`` (Linux takes 1024)."""


def send_parts(sock: socket.socket, parts: list[bytes | memoryview], timeout: float | None) -> None:
    """Send ``parts`` in order with scatter-gather writes (no joined copy); ``timeout`` (s) bounds the
    whole send, as ``sendall``'s does."""
    if not hasattr(sock, "sendmsg"):  # (Windows): one joined copy
        sock.settimeout(timeout)
        sock.sendall(b"".join(parts))
        return
    deadline = None if timeout is None else time.monotonic() + timeout
    views = [memoryview(p).cast("B") for p in parts if _size(p)]
    while views:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out")
            sock.settimeout(left)
        sent = sock.sendmsg(views[:_IOV_MAX])
        while views and sent >= views[0].nbytes:
            sent -= views[0].nbytes
            views.pop(0)
        if sent:
            views[0] = views[0][sent:]
