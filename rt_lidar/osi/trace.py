"""OSI trace files in OSI's binary ``.osi`` format: each serialized message after its size, a 4-byte
little-endian unsigned integer (what ``osi3trace.osi_trace.OSITrace`` reads, ``struct.unpack("<L")``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from rt_lidar.errors import ConfigError

__all__ = ["OsiTraceWriter", "read_trace", "trace_messages"]

_SIZE = struct.Struct("<I")


class OsiTraceWriter:
    """Appends messages to a new ``.osi`` file (created with its folder; an existing file is replaced)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.suffix.lower() != ".osi":
            raise ConfigError(f"{self.path}: an OSI trace file must end in .osi (OSI's binary trace format)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: BinaryIO | None = open(self.path, "wb")  # noqa: SIM115 (closed by close())
        self.messages = 0
        self.bytes = 0

    def write(self, message: Any) -> None:
        """Append one protobuf message (or its serialized bytes)."""
        if self._file is None:
            raise ValueError(f"{self.path}: trace already closed")
        data = message if isinstance(message, bytes | bytearray) else message.SerializeToString()
        if len(data) > 0xFFFFFFFF:
            raise ValueError(f"{self.path}: a message of {len(data)} bytes does not fit the 4-byte size")
        self._file.write(_SIZE.pack(len(data)))
        self._file.write(data)
        self.messages += 1
        self.bytes += len(data) + _SIZE.size

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if self._file is not None:
            self._file.close()
            self._file = None


def trace_messages(path: str | Path) -> Iterator[bytes]:
    """The serialized messages of a ``.osi`` trace, in order; a cut-off last message is an error."""
    with open(path, "rb") as f:
        while True:
            head = f.read(_SIZE.size)
            if not head:
                return
            if len(head) < _SIZE.size:
                raise ConfigError(f"{path}: trace ends inside a message size")
            (size,) = _SIZE.unpack(head)
            data = f.read(size)
            if len(data) < size:
                raise ConfigError(f"{path}: trace ends inside a message ({len(data)} of {size} bytes)")
            yield data


def read_trace(path: str | Path, message_type: Any) -> list[Any]:
    """Every message of a ``.osi`` trace parsed as ``message_type`` (e.g. ``osi3.SensorView``)."""
    return [message_type.FromString(data) for data in trace_messages(path)]
