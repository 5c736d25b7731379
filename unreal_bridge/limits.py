"""What one RPC server lets its clients cost it: sizes, counts, time; and the checks of decoded requests.

:class:`ServerLimits` bounds a request's bytes and decoded containers, the connections (and so the
threads), the bytes pending over all connections, the idle, read and write times, the reply bytes in
flight. :func:`check_params` walks a decoded request once, without recursion: nesting deeper than
``max_depth`` and non-finite floats are refused with a message. :func:`safe_pattern` compiles AirSim's
name patterns with RE2 (linear time: no pattern can make a match run long).
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import Any

import re2

__all__ = ["RequestRefused", "ServerLimits", "check_params", "is_loopback", "safe_pattern"]


class RequestRefused(ValueError):
    """A decoded request that breaks a limit; answered as an error, the connection stays open."""


@dataclass(frozen=True)
class ServerLimits:
    """Bounds of one :class:`~rt_lidar.unreal_bridge.rpc.RpcServer` (defaults fit every AirSim call)."""

    max_request_bytes: int = 1 << 20
    """Bytes of one request (no AirSim call needs more than a few KiB)."""
    max_containers: int = 65_536
    """Arrays plus maps in one decoded request (bounds its memory at a few MB)."""
    max_array_len: int = 65_536
    max_map_len: int = 4_096
    max_depth: int = 32
    """Nesting of one request's arguments."""
    max_connections: int = 32
    """Open connections (one thread each); more are accepted and closed at once, unless one of the
    open ones can make room: the oldest that has not sent a whole first request yet (whatever its
    age), else one that has sent no whole request for ``evict_idle_after_s``."""
    first_request_timeout_s: float = 10.0
    """A connection whose first request has not arrived whole within this time of its accept is
    closed (held or dripping sockets cannot keep a slot)."""
    evict_idle_after_s: float = 1.0
    """At the connection cap, the connection longest without a whole request (idle, or dripping one
    byte by byte; never one in a call) is closed for a newcomer once that has lasted this long, so held
    or slow sockets cannot lock clients out."""
    max_pending_bytes: int = 16 << 20
    """Bytes of unanswered requests over all connections; the connection that goes over is closed."""
    idle_timeout_s: float = 600.0
    """A connection that sends nothing for this long is closed."""
    read_timeout_s: float = 10.0
    """A request must arrive whole within this time of its first byte."""
    write_timeout_s: float = 30.0
    """A reply must be taken by the client within this time."""
    max_reply_bytes_in_flight: int = 512 << 20
    """Reply bytes being sent over all connections; a reply beyond is answered as an error."""
    accept_backoff_s: float = 0.1
    """Pause of the accept loop when the process is out of file descriptors."""


def _walk_error(params: list[Any], max_depth: int) -> str | None:
    stack: list[tuple[Any, int, str]] = [(v, 1, f"argument {i}") for i, v in enumerate(params)]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                return f"{where} is not a finite number ({value})"
        elif isinstance(value, list):
            if depth > max_depth:
                return f"{where} nests deeper than {max_depth} levels"
            stack.extend((v, depth + 1, where) for v in value)
        elif isinstance(value, dict):
            if depth > max_depth:
                return f"{where} nests deeper than {max_depth} levels"
            for k, v in value.items():
                stack.append((k, depth + 1, where))
                stack.append((v, depth + 1, f"{where}.{k!s:.40}"))
    return None


def check_params(params: list[Any], max_depth: int = 32) -> None:
    """Raise :class:`RequestRefused` when ``params`` nest deeper than ``max_depth`` or hold a NaN/inf."""
    error = _walk_error(params, max_depth)
    if error is not None:
        raise RequestRefused(error)


MAX_PATTERN_LEN = 1024


def safe_pattern(pattern: Any, ignore_case: bool = False) -> re2._Regexp:
    """``pattern`` compiled by RE2 (linear-time matching, bounded memory).

    AirSim's name patterns (``Car.*``, ``Cone[\\w]*``) compile unchanged; back-references and
    look-around, which need backtracking, are refused with ``ValueError`` naming the pattern.
    """
    text = str(pattern)
    if len(text) > MAX_PATTERN_LEN:
        raise ValueError(f"name pattern of {len(text)} characters; at most {MAX_PATTERN_LEN}")
    options = re2.Options()
    options.max_mem = 8 << 20
    options.case_sensitive = not ignore_case
    try:
        return re2.compile(text, options)
    except re2.error as exc:
        raise ValueError(f"bad name pattern {text!r:.80}: {exc}") from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) serves this machine only."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
