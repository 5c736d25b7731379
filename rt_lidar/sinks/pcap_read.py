"""Reading UDP datagrams back from capture files: classic libpcap (micro- or nanosecond stamps, either byte
order) and pcapng (Wireshark's default since 1.8: sections of either byte order, interfaces of any
timestamp resolution, enhanced, simple and obsolete packet blocks), over the link types a lidar capture
is taken on (Ethernet with VLAN tags, Linux cooked capture v1/v2, raw IPv4, BSD loopback).
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from rt_lidar.errors import FieldError

__all__ = ["MAGIC_US", "MAX_PCAP_RECORD", "PCAPNG_MAGIC", "PCAP_MAGICS", "PcapRecord", "read_pcap_udp"]

MAGIC_US = 0xA1B2C3D4
MAGIC_NS = 0xA1B23C4D
PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
"""The first four bytes of a classic pcap file (micro- and nanosecond stamps, little and big endian)."""
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
"""The first four bytes of a pcapng file (its section header block's type, the same in either order)."""
MAX_PCAP_RECORD = 262_144
"""Largest captured length of one record (libpcap's largest snap length)."""
MAX_PCAPNG_BLOCK = 16 * 1024 * 1024
"""Largest pcapng block read (Wireshark's own limit for a block is 16 MiB)."""

_BYTE_ORDER_MAGIC = 0x1A2B3C4D
_SHB, _IDB, _EPB, _SPB, _OPB = 0x0A0D0D0A, 1, 6, 3, 2
_IP_OFFSET_OF_LINK = {1: 14, 113: 16, 276: 20, 101: 0, 228: 0, 12: 0, 0: 4}
"""Link types read (Ethernet, Linux cooked capture v1 and v2 as ``tcpdump -i any`` writes them, raw IPv4,
BSD loopback) -> where the IPv4 header starts after the link header."""
_LINKS = "Ethernet, Linux cooked v1/v2, raw IP, BSD loopback"


@dataclass(frozen=True)
class PcapRecord:
    """One UDP datagram read from a pcap file."""

    stamp_ns: int
    src: str
    dst: str
    src_port: int
    dst_port: int
    payload: bytes


@dataclass
class _Frame:
    """One captured link-layer frame: its stamp, link type and bytes."""

    stamp_ns: int
    link: int
    data: bytes


class _Cut(Exception):
    """The file ends inside a record: what was read stands, the rest is lost."""

    def __init__(self, how: str, whole: int) -> None:
        super().__init__(how)
        self.how, self.whole = how, whole


def read_pcap_udp(path: str | Path) -> Iterator[PcapRecord]:
    """Yield the UDP datagrams of a pcap or pcapng file in order; a file cut mid-record (a capture that
    was killed, a copy that stopped) yields what came before the cut and warns what was read.

    Frames that are not IPv4/UDP, and IP fragments, are passed over. A header that cannot be (an
    unknown magic, a record longer than libpcap's snap length, an IPv4 header or UDP length past the
    end of its frame, a link type not read here) raises :class:`~rt_lidar.errors.FieldError` naming
    the file, record and field.
    """
    where = str(path)
    with Path(path).open("rb") as fh:
        magic = fh.read(4)
        if len(magic) < 4:
            return
        frames = _pcapng_frames(fh, where) if magic == PCAPNG_MAGIC else _pcap_frames(fh, where, magic)
        index, udp = -1, 0
        while True:
            index += 1
            try:
                frame = next(frames)
            except StopIteration:
                return
            except _Cut as cut:
                _warn_cut(where, index, udp, cut.whole, cut.how)
                return
            rec = _udp_of(where, index, frame)
            if rec is not None:
                udp += 1
                yield rec


def _pcap_frames(fh: BinaryIO, where: str, magic: bytes) -> Iterator[_Frame]:
    """The frames of a classic pcap file whose first four bytes were ``magic``."""
    head = magic + fh.read(20)
    if len(head) < 24:
        return
    magic_le = struct.unpack("<I", magic)[0]
    if magic_le in (MAGIC_US, MAGIC_NS):
        endian = "<"
    elif struct.unpack(">I", magic)[0] in (MAGIC_US, MAGIC_NS):
        endian = ">"
    else:
        raise FieldError(where, "magic", f"0x{magic_le:08x} is neither a pcap nor a pcapng file's")
    nano = struct.unpack(endian + "I", magic)[0] == MAGIC_NS
    link = struct.unpack(endian + "I", head[20:24])[0] & 0xFFFF
    _check_link(where, "linktype", link)
    index = -1
    while True:
        index += 1
        whole = fh.tell()
        rh = fh.read(16)
        if len(rh) < 16:
            if rh:
                raise _Cut(f"its 16-byte record header is {len(rh)} bytes", whole)
            return
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", rh)
        if incl > MAX_PCAP_RECORD:
            raise FieldError(
                where, f"record {index}.incl_len", f"{incl:,} bytes; at most {MAX_PCAP_RECORD:,}"
            )
        buf = fh.read(incl)
        if len(buf) < incl:
            raise _Cut(f"it holds {len(buf):,} of its {incl:,} bytes", whole)
        yield _Frame(sec * 1_000_000_000 + (frac if nano else frac * 1000), link, buf)


def _pcapng_frames(fh: BinaryIO, where: str) -> Iterator[_Frame]:
    """The frames of a pcapng file (its first block type already read): each section's byte order from
    its header, each interface's link type and timestamp resolution from its description block."""
    endian = "<"
    links: list[tuple[int, int, int]] = []  # per interface of the section: link, ticks a second, offset s
    block_type = _SHB
    index = -1
    while True:
        index += 1
        whole = fh.tell() - (0 if index else 4)
        if index:
            raw = fh.read(4)
            if len(raw) < 4:
                if raw:
                    raise _Cut(f"its block header is {len(raw)} bytes", whole)
                return
            block_type = struct.unpack(endian + "I", raw)[0]
        raw_len = fh.read(4)
        if len(raw_len) < 4:
            raise _Cut("its block length is missing", whole)
        if block_type == _SHB:
            bom = fh.read(4)
            if len(bom) < 4:
                raise _Cut("its byte-order magic is missing", whole)
            if struct.unpack("<I", bom)[0] == _BYTE_ORDER_MAGIC:
                endian = "<"
            elif struct.unpack(">I", bom)[0] == _BYTE_ORDER_MAGIC:
                endian = ">"
            else:
                raise FieldError(where, f"block {index}.byte_order_magic", f"0x{bom.hex()} is not 1a2b3c4d")
            links = []
            length = struct.unpack(endian + "I", raw_len)[0]
            body = _block_body(fh, where, index, length, 12, whole)
        else:
            length = struct.unpack(endian + "I", raw_len)[0]
            body = _block_body(fh, where, index, length, 8, whole)
        if block_type == _IDB:
            links.append(_interface(where, index, body, endian))
        elif block_type in (_EPB, _OPB):
            fields = "IIII" if block_type == _EPB else "HxxIII"  # the obsolete block: a u16 id, u16 drops
            iface, hi, lo, cap = struct.unpack(endian + fields, body[:16])
            start = 20
            if iface >= len(links):
                raise FieldError(
                    where, f"block {index}.interface_id", f"{iface}; the section describes {len(links)}"
                )
            if start + cap > len(body):
                raise FieldError(
                    where, f"block {index}.captured_len", f"{cap:,} bytes run past the {length:,}-byte block"
                )
            link, per_s, offset_s = links[iface]
            ticks = (hi << 32) | lo
            stamp = (ticks // per_s + offset_s) * 1_000_000_000 + (ticks % per_s) * 1_000_000_000 // per_s
            yield _Frame(stamp, link, body[start : start + cap])
        elif block_type == _SPB:
            if not links:
                raise FieldError(where, f"block {index}", "a simple packet block before any interface")
            (orig,) = struct.unpack(endian + "I", body[:4])
            yield _Frame(0, links[0][0], body[4 : 4 + min(orig, len(body) - 4)])


def _block_body(fh: BinaryIO, where: str, index: int, length: int, read: int, whole: int) -> bytes:
    """The rest of a pcapng block of total ``length`` after its first ``read`` bytes, without its
    trailing length."""
    if length % 4 or length < read + 4 or length > MAX_PCAPNG_BLOCK:
        raise FieldError(
            where, f"block {index}.total_length", f"{length:,} bytes (a multiple of 4, {read + 4}..16 MiB)"
        )
    rest = fh.read(length - read)
    if len(rest) < length - read:
        raise _Cut(f"it holds {len(rest) + read:,} of its {length:,} bytes", whole)
    return rest[:-4]


def _interface(where: str, index: int, body: bytes, endian: str) -> tuple[int, int, int]:
    """(link type, timestamp ticks a second, timestamp offset in s) of an interface description."""
    link = struct.unpack(endian + "H", body[:2])[0]
    _check_link(where, f"block {index}.linktype", link)
    per_s, offset_s = 1_000_000, 0
    at = 8
    while at + 4 <= len(body):
        code, size = struct.unpack(endian + "HH", body[at : at + 4])
        value = body[at + 4 : at + 4 + size]
        if code == 0:
            break
        if code == 9 and size >= 1:  # if_tsresol: 10^-v, or 2^-v with the top bit set
            v = value[0]
            per_s = 2 ** (v & 0x7F) if v & 0x80 else 10**v
        elif code == 14 and size >= 8:  # if_tsoffset: seconds added to every stamp
            offset_s = struct.unpack(endian + "q", value[:8])[0]
        at += 4 + (size + 3) // 4 * 4
    return link, per_s, offset_s


def _check_link(where: str, field: str, link: int) -> None:
    if link not in _IP_OFFSET_OF_LINK:
        raise FieldError(where, field, f"{link} is not one read here ({_LINKS})")


def _udp_of(where: str, index: int, frame: _Frame) -> PcapRecord | None:
    """The UDP datagram a frame carries, or None where it carries none (not IPv4/UDP, a fragment)."""
    buf = frame.data
    ip = _ipv4_offset(buf, frame.link)
    if ip < 0 or len(buf) < ip + 28 or buf[ip] >> 4 != 4 or buf[ip + 9] != 17:
        return None
    if struct.unpack(">H", buf[ip + 6 : ip + 8])[0] & 0x3FFF:  # an IP fragment: not a whole datagram
        return None
    ihl = (buf[ip] & 0x0F) * 4
    u = ip + ihl
    if ihl < 20 or u + 8 > len(buf):
        raise FieldError(
            where,
            f"record {index}.ipv4.ihl",
            f"an IPv4 header of {ihl} bytes (20..60) leaves no UDP header in a {len(buf)}-byte frame",
        )
    sport, dport, ulen = struct.unpack(">HHH", buf[u : u + 6])
    if ulen < 8 or u + ulen > len(buf):
        raise FieldError(
            where,
            f"record {index}.udp.length",
            f"{ulen} bytes (8 at least) from offset {u} runs past the {len(buf)}-byte frame",
        )
    src = ".".join(str(b) for b in buf[ip + 12 : ip + 16])
    dst = ".".join(str(b) for b in buf[ip + 16 : ip + 20])
    return PcapRecord(frame.stamp_ns, src, dst, sport, dport, buf[u + 8 : u + ulen])


def _ipv4_offset(buf: bytes, link: int) -> int:
    """Where the IPv4 header of a frame of link type ``link`` starts, -1 where the frame holds no IPv4
    (ARP, IPv6, ...). 802.1Q VLAN tags on Ethernet are stepped over."""
    if link == 1:
        off, ether = 12, buf[12:14]
        while ether in (b"\x81\x00", b"\x88\xa8") and len(buf) >= off + 6:
            off += 4
            ether = buf[off : off + 2]
        return off + 2 if ether == b"\x08\x00" else -1
    if link == 113:
        return 16 if buf[14:16] == b"\x08\x00" else -1
    if link == 276:
        return 20 if buf[0:2] == b"\x08\x00" else -1
    if link == 0:
        return 4 if buf[:4] in (b"\x02\x00\x00\x00", b"\x00\x00\x00\x02") else -1
    return 0


def _warn_cut(where: str, index: int, udp: int, read: int, how: str) -> None:
    """Warn (one line) that the capture ``where`` ends inside record ``index``: what was read before."""
    warnings.warn(
        f"{where}: the file is cut short inside record {index} ({how}): read {index:,} whole records "
        f"({udp:,} UDP datagrams, {read:,} bytes); the rest is lost",
        stacklevel=3,
    )
