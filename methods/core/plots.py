"""One matplotlib style for every figure. Imports no torch (plots and reports never do)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .results import atomic_path  # noqa: E402

STYLE = {
    "figure.dpi": 110, "savefig.dpi": 110, "figure.figsize": (6.4, 3.6),
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
    "grid.alpha": 0.3, "lines.linewidth": 1.6, "lines.markersize": 5,
    "axes.prop_cycle": matplotlib.cycler(color=["#1b6ca8", "#d1495b", "#66a182", "#edae49",
                                                "#6b4e9b", "#2e4057", "#8d96a3"]),
}


def figure(nrows: int = 1, ncols: int = 1, **kw):
    plt.rcParams.update(STYLE)
    return plt.subplots(nrows, ncols, **kw)


def save(fig, path: str | Path, caption: str | None = None) -> None:
    """Atomically write the PNG (and `<stem>.caption.txt`, which the HTML report shows)."""
    path = Path(path)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    if caption is not None:
        with atomic_path(path.with_name(path.stem + ".caption.txt")) as tmp:
            tmp.write_text(caption.strip() + "\n")
