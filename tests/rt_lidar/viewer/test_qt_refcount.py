"""The Qt binding must keep Python's reference counts: PySide6 6.12.0 drops one reference of ``None`` on
every call of a void method (``processEvents``, ``setPixmap``, ``update``...), and on Python 3.11,
where ``None`` is not immortal, a viewer then aborts with "deallocating None" after some 30,000
calls: about three minutes of a live session. The viewer extra pins PySide6 below 6.12."""

from __future__ import annotations

import sys

import numpy as np
import pyqtgraph.opengl as gl
from pyqtgraph.Qt import QtGui, QtWidgets


def test_void_qt_calls_keep_the_refcount_of_none(qtbot) -> None:
    view = gl.GLViewWidget()
    qtbot.addWidget(view)
    view.resize(320, 240)
    scatter = gl.GLScatterPlotItem()
    view.addItem(scatter)
    label = QtWidgets.QLabel()
    qtbot.addWidget(label)
    view.show()
    label.show()
    qtbot.waitExposed(view)
    app = QtWidgets.QApplication.instance()
    pos = np.random.default_rng(0).random((500, 3), dtype=np.float32)
    img = np.zeros((32, 64, 3), np.uint8)
    before = sys.getrefcount(None)
    for _ in range(200):
        scatter.setData(pos=pos, size=2)
        label.setPixmap(
            QtGui.QPixmap.fromImage(QtGui.QImage(img.data, 64, 32, 192, QtGui.QImage.Format.Format_RGB888))
        )
        view.update()
        app.processEvents()
    lost = before - sys.getrefcount(None)
    assert lost < 50, f"{lost} references of None lost in 200 frames: the Qt binding corrupts refcounts"
