"""Every test directory may import the helpers beside this file (``from waiting import until``), and the
hostile clients of ``tools/fuzz/attacks.py`` (``from attacks import ...``: a tool, not the product)."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
_FUZZ = str(Path(__file__).resolve().parents[1] / "tools" / "fuzz")
for _path in (_FUZZ, _HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)
