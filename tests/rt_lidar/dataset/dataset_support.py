"""Shared pieces of the dataset tests (imported by name: this folder is on sys.path): tiny sweeps and a
byte-level tree comparison."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
SMALL_SWEEP = ROOT / "tools" / "sweeps" / "small.toml"


def tiny_sweep_dict(**sweep: Any) -> dict[str, Any]:
    """A 2-run sweep (one street, clear and rain) of 2 VLP-16 scans, no camera."""
    return {
        "sweep": {"name": "tiny", "frames": 2, "seeds": [3], **sweep},
        "scenes": [{"name": "street", "kind": "street", "seed": 5, "length_m": 80.0}],
        "sensors": [{"preset": "VLP-16"}],
        "weather": {"rain_mm_h": [0.0, 30.0]},
    }


def tree_digest(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` by relative path (temporary folders would show up too)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
