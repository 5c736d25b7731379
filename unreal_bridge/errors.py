"""Errors raised by the AirSim bridge (msgpack-RPC transport, wire types, client and server)."""

from __future__ import annotations

__all__ = [
    "BackendError",
    "BridgeError",
    "ConnectionLost",
    "MessageTooLarge",
    "ProtocolError",
    "RpcError",
    "RpcTimeout",
    "WireFormatError",
]


class BridgeError(Exception):
    """Base class of every error the bridge raises."""


class RpcError(BridgeError):
    """The server answered a call with an error (rpclib's ``[1, id, error, nil]``).

    ``method`` is the called method; ``error`` is the error object exactly as the server sent it
    (rpclib and AirSim send a string).
    """

    def __init__(self, method: str, error: object) -> None:
        self.method = method
        self.error = error
        super().__init__(f"RPC call '{method}' failed: {error}")

    @property
    def unbound(self) -> bool:
        """True when the server binds no ``method`` with the argument count sent: rpclib's "could not
        find function" and "invalid number of arguments" errors (how an absent extension answers)."""
        text = str(self.error)
        return "could not find function" in text or "invalid number of arguments" in text


class ConnectionLost(BridgeError):
    """The connection to the server could not be made, or broke before the answer to a call arrived."""

    def __init__(self, method: str | None, reason: str) -> None:
        self.method = method
        self.reason = reason
        where = f"during RPC call '{method}'" if method else "while idle"
        super().__init__(f"connection to the RPC server lost {where}: {reason}")


class RpcTimeout(ConnectionLost):
    """No answer to a call came within the client's timeout; the connection is closed."""


class ProtocolError(BridgeError):
    """A peer sent bytes that are not a valid msgpack-RPC message."""


class MessageTooLarge(ProtocolError):
    """A message exceeded the configured maximum size."""


class WireFormatError(BridgeError):
    """A msgpack value does not have the shape of the AirSim struct it should encode."""


class BackendError(BridgeError):
    """Raised by a :class:`~rt_lidar.unreal_bridge.server.SimBackend` to refuse a call with a message.

    The server answers the call with rpclib's "threw an exception" error string carrying this message
    (as AirSim does, e.g. "No lidar with name X exist on vehicle").
    """
