"""The bridge tests may import the hostile clients of ``tools/fuzz/attacks.py`` (``from attacks import
...``): a tool, not part of the product."""

from __future__ import annotations

import sys
from pathlib import Path

_FUZZ = str(Path(__file__).resolve().parents[2] / "tools" / "fuzz")
if _FUZZ not in sys.path:
    sys.path.insert(0, _FUZZ)
