"""Errors of the dataset generator; each names the file, the field and what is allowed."""

from __future__ import annotations

from rt_lidar.errors import FieldError, RtLidarError

__all__ = ["DatasetError", "SweepError"]


class SweepError(FieldError):
    """A sweep file is invalid: ``source`` (the file), ``field`` (dotted path) and the problem."""


class DatasetError(RtLidarError):
    """A dataset folder does not fit the sweep (e.g. a sequence holds a different run), or a file of one
    being read is malformed (named with what is wrong)."""
