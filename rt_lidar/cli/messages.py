"""How the command line prints warnings: one line each, ``rt-lidar COMMAND: warning: ...``."""

from __future__ import annotations

import warnings

__all__ = ["one_line_warnings"]


def one_line_warnings(prog: str) -> None:
    """Make every ``warnings.warn`` print as one line on stderr, prefixed with ``prog`` (no source
    file or code line: the message says what happened; a DeprecationWarning keeps Python's form)."""
    default = warnings.formatwarning

    def format_one_line(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        line: str | None = None,
    ) -> str:
        if issubclass(category, DeprecationWarning):
            return default(message, category, filename, lineno, line)
        text = " ".join(str(message).split())
        return f"{prog}: warning: {text}\n"

    warnings.formatwarning = format_one_line
