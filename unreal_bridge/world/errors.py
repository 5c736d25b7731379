"""Errors raised by the embedded world."""

from __future__ import annotations

__all__ = ["WorldError"]


class WorldError(Exception):
    """A scene, mesh file, trajectory or query the embedded world cannot use.

    The message names the file, object or field at fault and what was expected.
    """
