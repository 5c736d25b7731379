"""The plot every validation experiment draws: named series of points against one x axis, as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["plot_series"]


def plot_series(
    path: Path, title: str, xlabel: str, ylabel: str, series: dict[str, tuple[list, list]], **kw: Any
) -> None:
    """Write a line plot of ``series`` (label -> (x, y)) to ``path``; ``kw`` goes to ``Axes.set``."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for label, (x, y) in series.items():
        ax.plot(x, y, marker="o", label=label)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel, **kw)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
