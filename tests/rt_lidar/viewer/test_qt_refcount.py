"""The Qt binding must keep Python's reference counts: PySide6 6.12.0 drops one reference of ``None`` on
every call of a void method (``processEvents``, ``setPixmap``, ``update``...), and on Python 3.11,
where ``None`` is not immortal, a viewer then aborts with "deallocating None" after some 30,000
calls: about three minutes of a live session. The viewer extra pins PySide6 below 6.12.

The count is taken in a fresh interpreter: in the test process, objects that earlier tests left for
the garbage collector release references of ``None`` of their own while the frames run."""

from __future__ import annotations

import subprocess
import sys

PROBE = r"""
import gc, sys
import numpy as np
import pyqtgraph as pg
import pyqtgraph.opengl as gl
from pyqtgraph.Qt import QtGui, QtWidgets

app = pg.mkQApp("refcount probe")
view = gl.GLViewWidget()
view.resize(320, 240)
scatter = gl.GLScatterPlotItem()
view.addItem(scatter)
label = QtWidgets.QLabel()
view.show()
label.show()
for _ in range(20):
    app.processEvents()
pos = np.random.default_rng(0).random((500, 3), dtype=np.float32)
img = np.zeros((32, 64, 3), np.uint8)
gc.collect()
gc.disable()
before = sys.getrefcount(None)
for _ in range(200):
    scatter.setData(pos=pos, size=2)
    qimg = QtGui.QImage(img.data, 64, 32, 192, QtGui.QImage.Format.Format_RGB888)
    label.setPixmap(QtGui.QPixmap.fromImage(qimg))
    view.update()
    app.processEvents()
print(before - sys.getrefcount(None))
"""


def test_void_qt_calls_keep_the_refcount_of_none(qtbot) -> None:  # qtbot: the X display is up
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lost = int(out.stdout.strip().splitlines()[-1])
    assert lost < 50, f"{lost} references of None lost in 200 frames: the Qt binding corrupts refcounts"
