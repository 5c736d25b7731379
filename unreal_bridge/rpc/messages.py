"""rpclib's message kinds and its fixed error strings (AirSim's servers answer in these words)."""

from __future__ import annotations

__all__ = ["NOTIFY", "REQUEST", "RESPONSE", "arity_message", "exception_message", "not_found_message"]

REQUEST, RESPONSE, NOTIFY = 0, 1, 2


def not_found_message(method: str, argc: int) -> str:
    """rpclib's error for a call to a function the server does not bind."""
    return f"rpclib: server could not find function '{method}' with argument count {argc}."


def arity_message(method: str, expected: int, got: int) -> str:
    """rpclib's error for a call with the wrong number of arguments."""
    return (
        f"rpclib: Function '{method}' was called with an invalid number of arguments. "
        f"Expected: {expected}, got: {got}"
    )


def exception_message(method: str, argc: int, info: str) -> str:
    """rpclib's error for a handler that threw (AirSim's servers answer their refusals this way)."""
    return (
        f"rpclib: function '{method}' (called with {argc} arg(s)) threw an exception. "
        f"The exception contained this information: {info}."
    )
