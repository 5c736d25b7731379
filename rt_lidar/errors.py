"""Errors raised by rt_lidar; each names what was wrong so a user can fix it."""

from __future__ import annotations

__all__ = ["ConfigError", "FieldError", "PresetError", "RecordingError", "RtLidarError", "SceneError"]


class RtLidarError(Exception):
    """Base class of every error rt_lidar raises on purpose."""


class ConfigError(RtLidarError, ValueError):
    """User input is invalid: a command-line option, a run configuration, a preset, material table,
    sweep file, sink option or input file. The CLI prints it as one line; a plain ``ValueError`` is a
    bug and keeps its traceback. (A ``ValueError`` too, for callers that catch those.)"""


class FieldError(ConfigError):
    """A field of an input file or table is invalid: names the source, the field and what is allowed."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        super().__init__(f"{source}: field '{field}': {problem}")


class PresetError(FieldError):
    """A sensor preset is invalid: names the file, the field and what is allowed."""


class SceneError(ConfigError):
    """A scene the embedded world cannot use: a missing, unreadable or empty mesh file (the world's own
    ``WorldError``, which the bridge package raises without knowing of ours, told as one of ours)."""


class RecordingError(ConfigError):
    """A recording (a scan file, a bag, a pcap) that cannot be read as a whole: names the file."""
