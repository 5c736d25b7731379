"""Where the shared real frames are (``../shared/reference/real`` above the checkout), or None."""

from __future__ import annotations

from pathlib import Path

REAL: Path | None = next(
    (
        p / "shared" / "reference" / "real"
        for p in Path(__file__).resolve().parents
        if (p / "shared" / "reference" / "real").is_dir()
    ),
    None,
)
