"""A run's output folder: an existing non-empty one is refused unless overwriting was asked for (then it
is cleared first), and a run that fails before it wrote a scan leaves no folder behind."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from rt_lidar.errors import ConfigError

__all__ = ["output_folder"]


def _protected(path: Path) -> bool:
    resolved = path.resolve()
    return resolved in {Path.cwd().resolve(), Path.home().resolve(), Path(resolved.anchor)}


def _has_scans(path: Path) -> bool:
    return any(path.rglob("*.pcd")) or any(path.rglob("*.bin")) or (path / "summary.json").exists()


def _clear(path: Path) -> None:
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


@contextlib.contextmanager
def output_folder(out: str | Path, overwrite: bool = False, option: str = "--out") -> Iterator[Path]:
    """Check ``out`` for a run and make it; on an error before any scan was written, remove what the
    run made. ``overwrite`` clears an existing non-empty folder (never the working directory, the
    home directory or a root)."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: exists and is not a folder")
    existed = path.exists()
    if existed and any(path.iterdir()):
        if not overwrite:
            raise ConfigError(
                f"{option} {path}: the folder is not empty; give --overwrite to clear it, or another {option}"
            )
        if _protected(path):
            raise ConfigError(f"{option} {path}: will not clear the working, home or root folder")
        _clear(path)
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path
    except BaseException:
        if not _has_scans(path):
            if existed:
                _clear(path)
            else:
                shutil.rmtree(path, ignore_errors=True)
        raise
