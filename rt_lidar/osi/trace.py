"""OSI trace files, as OSI's trace file formats define them (doc/architecture/trace_file_formats.adoc):

- ``.osi`` (single channel): each serialized message after its size, a 4-byte little-endian unsigned
  integer (what ``osi3trace.osi_trace.OSITrace`` reads, ``struct.unpack("<L")``);
- ``.mcap`` (multi channel): an indexed MCAP file with zstd chunks, the ``net.asam.osi.trace`` metadata
  record (trace format and OSI / protobuf versions), one ``osi3.<Type>`` protobuf schema (a
  FileDescriptorSet) and one channel with the ``net.asam.osi.trace.channel.*`` metadata; each message's
  log and publish time are its ``timestamp``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from rt_lidar.errors import ConfigError

__all__ = ["McapTraceWriter", "OsiTraceWriter", "open_trace_writer", "read_trace", "trace_messages"]

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


class McapTraceWriter:
    """An OSI multi-channel trace (``.mcap``) of one channel ``topic`` of ``message_type`` messages."""

    def __init__(self, path: str | Path, message_type: Any, topic: str, description: str = "") -> None:
        from google.protobuf import __version__ as protobuf_version
        from mcap.writer import CompressionType, Writer
        from mcap_protobuf.schema import build_file_descriptor_set

        from rt_lidar.osi.frames import osi_version

        self.path = Path(path)
        if self.path.suffix.lower() != ".mcap":
            raise ConfigError(f"{self.path}: an OSI multi-channel trace must end in .mcap")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: BinaryIO | None = open(self.path, "wb")  # noqa: SIM115 (closed by close())
        self._writer = Writer(self._file, compression=CompressionType.ZSTD)
        self._writer.start(profile="", library="rt-lidar")
        osi = osi_version()
        pb = ".".join([*protobuf_version.split("."), "0", "0"][:3])
        meta = {
            "version": osi,
            "min_osi_version": osi,
            "max_osi_version": osi,
            "min_protobuf_version": pb,
            "max_protobuf_version": pb,
            "data_sources": "rt-lidar",
        }
        if description:
            meta["description"] = description
        self._writer.add_metadata("net.asam.osi.trace", meta)
        name = message_type.DESCRIPTOR.full_name
        schema = self._writer.register_schema(
            name=name,
            encoding="protobuf",
            data=build_file_descriptor_set(message_type).SerializeToString(),
        )
        channel_meta = {
            "net.asam.osi.trace.channel.osi_version": osi,
            "net.asam.osi.trace.channel.protobuf_version": pb,
        }
        if description:
            channel_meta["net.asam.osi.trace.channel.description"] = description
        self._channel = self._writer.register_channel(topic, "protobuf", schema, channel_meta)
        self.messages = 0
        self.bytes = 0

    def write(self, message: Any) -> None:
        """Append one message (its ``timestamp`` is the log and publish time)."""
        if self._file is None:
            raise ValueError(f"{self.path}: trace already closed")
        t = int(message.timestamp.seconds) * 1_000_000_000 + int(message.timestamp.nanos)
        data = message.SerializeToString()
        self._writer.add_message(self._channel, log_time=t, data=data, publish_time=t, sequence=self.messages)
        self.messages += 1
        self.bytes += len(data)

    def close(self) -> None:
        """Write the summary and indexes, close (idempotent)."""
        if self._file is not None:
            self._writer.finish()
            self._file.close()
            self._file = None


def open_trace_writer(
    path: str | Path, message_type: Any, topic: str, description: str = ""
) -> OsiTraceWriter | McapTraceWriter:
    """The trace writer of ``path``'s format: ``.osi`` or ``.mcap``; anything else is a ConfigError."""
    suffix = Path(path).suffix.lower()
    if suffix == ".mcap":
        return McapTraceWriter(path, message_type, topic, description)
    if suffix == ".osi":
        return OsiTraceWriter(path)
    raise ConfigError(f"{path}: an OSI trace file ends in .osi (single channel) or .mcap (multi channel)")


def trace_messages(path: str | Path, schema: str = "osi3.SensorView") -> Iterator[bytes]:
    """The serialized messages of a ``.osi`` trace, in order (a cut-off last message is an error), or
    those of the first ``schema`` channel of a ``.mcap`` trace."""
    if Path(path).suffix.lower() == ".mcap":
        yield from _mcap_messages(path, schema)
        return
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


def _mcap_messages(path: str | Path, schema: str) -> Iterator[bytes]:
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        topics = [
            c.topic
            for c in (summary.channels.values() if summary else ())
            if summary is not None and summary.schemas[c.schema_id].name == schema
        ]
        if not topics:
            raise ConfigError(f"{path}: no channel of {schema} messages in this MCAP trace")
        for _schema, _channel, message in reader.iter_messages(topics=[topics[0]]):
            yield message.data


def read_trace(path: str | Path, message_type: Any) -> list[Any]:
    """Every message of a ``.osi`` or ``.mcap`` trace parsed as ``message_type`` (``osi3.SensorView`` ...)."""
    name = message_type.DESCRIPTOR.full_name
    return [message_type.FromString(data) for data in trace_messages(path, name)]
