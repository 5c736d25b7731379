"""msgpack-RPC as rpclib (and so AirSim) speaks it, on msgpack 1.x: a blocking client and a threaded server.

Wire format (https://github.com/msgpack-rpc/msgpack-rpc/blob/master/spec.md, rpclib's flavour):

- request ``[0, msgid, method, params]``, response ``[1, msgid, error, result]``,
  notification ``[2, method, params]``; ``params`` is an array, ``error`` is nil on success;
- floats are packed as float32 (rpclib packs C++ ``float``; we pack Python floats with
  ``use_single_float=True``), strings as str, ``bytes`` as bin;
- replies on one connection come in the order of the requests;
- rpclib's fixed error strings for an unknown function, a wrong argument count and a throwing handler
  (:func:`not_found_message`, :func:`arity_message`, :func:`exception_message`).

The server runs one thread per connection (a capped number), bounds each request's size, decoded
containers, nesting and time (:mod:`rt_lidar.unreal_bridge.limits`), and closes a connection that
sends malformed or oversized input without disturbing the others. Nothing is ever unpickled.
"""

from ..later import Later
from .client import DEFAULT_MAX_MESSAGE_SIZE, HINT_PAUSE_S, RpcClient
from .messages import NOTIFY, REQUEST, RESPONSE, arity_message, exception_message, not_found_message
from .packing import Packed, Raw, new_packer, pack, pack_parts, send_parts
from .server import RpcServer

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "HINT_PAUSE_S",
    "NOTIFY",
    "REQUEST",
    "RESPONSE",
    "Later",
    "Packed",
    "Raw",
    "RpcClient",
    "RpcServer",
    "arity_message",
    "exception_message",
    "new_packer",
    "not_found_message",
    "pack",
    "pack_parts",
    "send_parts",
]
