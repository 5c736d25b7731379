"""rosbags' MCAP writer with fewer copies of each message: the same file, byte for byte.

A rig's bag takes a PointCloud2 of several MB a scan. rosbags' ``McapWriter`` copies each message five
times on the way to the file (into a record buffer, into the chunk, the chunk's value, a chunk record,
then the file), every copy under the GIL on the sinks' thread, beside the frame loop's. Here a message
goes into the chunk once and the chunk goes to the file from its own buffer: the records, their
lengths and their order are the ones ``McapWriter`` writes (``tests/rt_lidar/rig/test_bag_writer.py``
holds the two files equal). A large message (a cloud, :data:`_BY_REFERENCE_BYTES` or more) is not even
copied into the chunk: the chunk keeps the message's own buffer and writes it to the file from there
when it closes (so a caller must not change a message's bytes after :meth:`LeanMcapWriter.write`, as
the rig's bag never does: each message is a new buffer). Only uncompressed chunks (the rig's bag) take
the short way; a compressed chunk is closed by ``McapWriter`` itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from io import BytesIO
from types import MappingProxyType
from typing import Any

from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.storage_mcap import McapWriter, PendingChunk, write_record, write_uint16, write_uint64

__all__ = ["LeanMcapWriter", "LeanWriter"]

_CHUNK_BYTES = 2**20
"""McapWriter closes a chunk once it holds more than this."""
_MESSAGE_HEAD = 2 + 4 + 8 + 8
"""A message record's fields before its data: channel id, sequence, log time, publish time."""
_BY_REFERENCE_BYTES = 2**16
"""A message at least this large stays in its own buffer until its chunk is written (not copied)."""


class _ChunkBuffer:
    """A pending chunk's bytes as ``BytesIO`` holds them (``write``, ``tell``, ``getvalue``,
    ``getbuffer``) where large writes are kept as the caller's buffers, not copied: :meth:`pieces`
    gives the chunk's bytes in order without joining them."""

    def __init__(self) -> None:
        self._done: list[memoryview] = []
        self._small = BytesIO()
        self._size = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        n = view.nbytes
        if n >= _BY_REFERENCE_BYTES:
            if self._small.tell():
                self._done.append(self._small.getbuffer().toreadonly())
                self._small = BytesIO()
            self._done.append(view)
        else:
            self._small.write(view)
        self._size += n
        return n

    def tell(self) -> int:
        return self._size

    def pieces(self) -> list[memoryview]:
        """The chunk's bytes, in order."""
        tail = [self._small.getbuffer().toreadonly()] if self._small.tell() else []
        return [*self._done, *tail]

    def getvalue(self) -> bytes:
        return b"".join(self.pieces())

    def getbuffer(self) -> memoryview:
        return memoryview(self.getvalue())


def _new_chunk() -> PendingChunk:
    return PendingChunk(2**63 - 1, 0, _ChunkBuffer(), defaultdict(list))  # type: ignore[arg-type]


def _u64(v: int) -> bytes:
    return v.to_bytes(8, "little")


class LeanMcapWriter(McapWriter):
    """:class:`McapWriter` writing each message into its chunk once (a large one not at all: kept as
    its own buffer) and each chunk from its buffers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.chunk = _new_chunk()

    def write(self, connection: Any, timestamp: int, data: bytes | memoryview) -> None:
        """As :meth:`McapWriter.write`: the message record (op 0x05) appended to the pending chunk."""
        self.message_start_time = min(timestamp, self.message_start_time)
        self.message_end_time = max(timestamp, self.message_end_time)
        self.channel_stats[connection.id] += 1
        chunk = self.chunk
        chunk.message_start_time = min(timestamp, chunk.message_start_time)
        chunk.message_end_time = max(timestamp, chunk.message_end_time)
        bio = chunk.bio
        chunk.msgs[connection.id].append((timestamp, bio.tell()))
        size = _MESSAGE_HEAD + memoryview(data).nbytes
        head = b"\x05" + _u64(size) + connection.id.to_bytes(2, "little") + bytes(4) + _u64(timestamp) * 2
        bio.write(head)
        bio.write(data)
        if bio.tell() > _CHUNK_BYTES:
            self.close_chunk()

    def close_chunk(self) -> None:
        """As :meth:`McapWriter.close_chunk` (uncompressed): the chunk record (op 0x06) written from the
        chunk's own buffer, then its message indexes, and its chunk index kept for the summary."""
        if self.compression:
            super().close_chunk()
            return
        chunk = self.chunk
        size = chunk.bio.tell()
        fields = _u64(chunk.message_start_time) + _u64(chunk.message_end_time) + _u64(size) + bytes(4)
        fields += (0).to_bytes(4, "little") + _u64(size)  # compression "" and the chunk's length
        chunk_start = self.bio.tell()
        self.bio.write(b"\x06" + _u64(len(fields) + size) + fields)
        for piece in chunk.bio.pieces():  # type: ignore[attr-defined]
            self.bio.write(piece)
            piece.release()
        chunk_end = self.bio.tell()

        offsets: list[tuple[int, int]] = []
        for cid, msgs in chunk.msgs.items():
            offsets.append((cid, self.bio.tell()))
            rec = BytesIO()
            write_uint16(rec, cid)
            rec.write((len(msgs) * 16).to_bytes(4, "little"))
            for ts, offset in msgs:
                write_uint64(rec, ts)
                write_uint64(rec, offset)
            write_record(self.bio, 0x07, rec)

        rec = BytesIO()
        write_uint64(rec, chunk.message_start_time)
        write_uint64(rec, chunk.message_end_time)
        write_uint64(rec, chunk_start)
        write_uint64(rec, chunk_end - chunk_start)
        rec.write((len(offsets) * 10).to_bytes(4, "little"))
        for cid, offset in offsets:
            write_uint16(rec, cid)
            write_uint64(rec, offset)
        write_uint64(rec, self.bio.tell() - chunk_end)
        rec.write((0).to_bytes(4, "little"))  # compression ""
        write_uint64(rec, size)
        write_uint64(rec, size)
        self.chunks.append(rec)

        self.chunk = _new_chunk()


class LeanWriter(Writer):
    """rosbags' :class:`Writer` with :class:`LeanMcapWriter` for MCAP storage."""

    STORAGE_PLUGINS: Mapping[StoragePlugin, type[Any]] = MappingProxyType(
        {**Writer.STORAGE_PLUGINS, StoragePlugin.MCAP: LeanMcapWriter}
    )
