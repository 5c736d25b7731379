"""The GL view of the cloud: reports each finished paint, routes keys, turns a click into a pick, and
gives the camera's projection for picking."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyqtgraph.opengl as gl
from OpenGL import GL
from pyqtgraph.Qt import QtCore, QtGui

__all__ = ["CloudView", "key_name"]


def key_name(event: Any) -> str:
    """Lower-case name of a key event's key: ``"w"``, ``"up"``, ``"space"``, ``"f1"``, ``"+"``."""
    text = QtGui.QKeySequence(int(event.key())).toString().lower()
    return text or (event.text() or "").lower()


class CloudView(gl.GLViewWidget):
    """GLViewWidget that reports each finished paint (after ``glFinish``), routes keys, and reports a
    click (a left press and release without a drag) for picking."""

    def __init__(
        self,
        on_painted: Callable[[], None],
        on_key: Callable[[Any, bool], bool],
        on_click: Callable[[float, float], object],
    ) -> None:
        super().__init__()
        self._on_painted = on_painted
        self._on_key = on_key
        self._on_click = on_click
        self._press: tuple[float, float] | None = None
        self.paint_s = 0.0
        """How long the last paint took, to the end of ``glFinish``."""

    def mvp(self) -> np.ndarray:
        """The camera's 4x4 model-view-projection matrix (row-major), as the last paint used it."""
        viewport = (0, 0, self.width(), self.height())
        m = self.projectionMatrix(viewport, viewport) * self.viewMatrix()
        return np.asarray(m.data(), np.float64).reshape(4, 4).T  # Qt stores columns

    def mousePressEvent(self, ev: Any) -> None:
        """Remember where a left press was (a release there is a click)."""
        pos = ev.position()
        self._press = (pos.x(), pos.y()) if ev.button() == QtCore.Qt.MouseButton.LeftButton else None
        super().mousePressEvent(ev)

    def mouseReleaseEvent(self, ev: Any) -> None:
        """A left release within 3 px of its press picks the point there."""
        pos = ev.position()
        press, left = self._press, ev.button() == QtCore.Qt.MouseButton.LeftButton
        if press is not None and left and abs(pos.x() - press[0]) <= 3 and abs(pos.y() - press[1]) <= 3:
            self._on_click(pos.x(), pos.y())
        self._press = None
        super().mouseReleaseEvent(ev)

    def paintGL(self) -> None:
        """Draw, wait for the GL pipeline to finish, then report."""
        t0 = time.perf_counter()
        super().paintGL()
        GL.glFinish()
        self.paint_s = time.perf_counter() - t0
        self._on_painted()

    def keyPressEvent(self, ev: Any) -> None:
        """Viewer keys first; the rest (camera orbit) to pyqtgraph."""
        if not self._on_key(ev, True):
            super().keyPressEvent(ev)

    def keyReleaseEvent(self, ev: Any) -> None:
        """Release of a driving key."""
        if not self._on_key(ev, False):
            super().keyReleaseEvent(ev)
