"""The book's figure style: white background (readable in dark mode), lw=2,
lower-case labels, no titles (captions say it), reference slopes on log-log axes."""

from __future__ import annotations

import numpy as np

BOOK_RC = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "figure.figsize": (6.4, 3.8),
    "figure.dpi": 100,
    "savefig.dpi": 110,
    "font.size": 11,
    "axes.labelsize": 11,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "lines.linewidth": 2.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def use_book_style() -> None:
    """Apply the book's matplotlib style (call once, in a notebook's imports cell)."""
    import matplotlib

    matplotlib.rcParams.update(BOOK_RC)


def slope_guide(
    ax, x, slope: float, anchor: tuple[float, float], *, label: str | None = None, **kwargs
):
    """Draw ``y = y0 (x/x0)^slope`` through ``anchor=(x0, y0)`` as a dashed reference line."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or x.size < 2 or np.any(x <= 0):
        raise ValueError("x must be a 1-D array of at least two positive values")
    x0, y0 = anchor
    if x0 <= 0 or y0 <= 0:
        raise ValueError(f"anchor must be positive, got {anchor}")
    kwargs.setdefault("color", "0.35")
    kwargs.setdefault("ls", "--")
    kwargs.setdefault("lw", 1.5)
    return ax.plot(x, y0 * (x / x0) ** slope, label=label, **kwargs)
