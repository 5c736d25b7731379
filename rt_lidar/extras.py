"""Optional dependencies: importing one that is not installed is a one-line error naming the extra
(``pip install 'rt-lidar[viewer]'``), not a traceback.

Every place that imports an optional package goes through :func:`require`; the CLI also turns a
:class:`ModuleNotFoundError` of a package listed in :data:`EXTRA_OF` into the same message
(:func:`missing_extra`), for a module-level import that a code path reached first.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from rt_lidar.errors import ConfigError

__all__ = ["EXTRA_OF", "MissingExtraError", "missing_extra", "require"]

EXTRA_OF: dict[str, str] = {
    "pyqtgraph": "viewer",
    "PySide6": "viewer",
    "OpenGL": "viewer",
    "pyvirtualdisplay": "viewer",
    "torch": "train",
    "onnx": "train",
    "ray": "dataset",
    "cupy": "gpu",
    "tensorrt": "trt",
    "cyclonedds": "ros2",
    "open3d": "bench",
    "mitsuba": "bench",
    "matplotlib": "validate",
}
"""Top-level package -> the ``rt-lidar[EXTRA]`` that installs it (pyproject.toml's optional deps)."""


class MissingExtraError(ConfigError):
    """An optional package a command needs is not installed; names the ``pip install`` that brings it."""

    def __init__(self, package: str, extra: str, needed_for: str = "") -> None:
        self.package = package
        self.extra = extra
        what = f"{needed_for} needs {package}, which is" if needed_for else f"{package} is"
        super().__init__(f"{what} not installed: pip install 'rt-lidar[{extra}]'")


def require(module: str, needed_for: str = "", extra: str | None = None) -> ModuleType:
    """Import ``module`` (e.g. ``"pyqtgraph.opengl"``) or raise :class:`MissingExtraError` naming the
    extra that installs it (``extra``, else looked up in :data:`EXTRA_OF`) and what needed it
    (``needed_for``, e.g. ``"rt-lidar view"``). An ImportError inside an installed package is left as is."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if extra is not None and top == module.split(".")[0]:
            raise MissingExtraError(top, extra, needed_for) from None
        error = missing_extra(exc, needed_for)
        if error is None:
            raise
        raise error from None


def missing_extra(exc: ModuleNotFoundError, needed_for: str = "") -> MissingExtraError | None:
    """The :class:`MissingExtraError` for ``exc`` when the missing module is an optional package of
    ours; None for any other module (a bug or a broken install: its traceback stays)."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF.get(top)
    return None if extra is None else MissingExtraError(top, extra, needed_for)
