"""One matplotlib style for every figure. Imports no torch (plots and reports never do)."""
from __future__ import annotations

import math
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


# Candidate directions for a point label, in order of preference: (unit x, unit y) in points;
# the label's corner (or edge centre) nearest the point sits at the offset.
_LABEL_DIRS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1))
_HA = {1: "left", 0: "center", -1: "right"}
_VA = {1: "bottom", 0: "center", -1: "top"}


def _overlap(a, b) -> float:
    """Overlap area of two (x0, y0, x1, y1) boxes; 0 when they only touch or are apart."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _dist(box, x, y) -> float:
    """Distance from the point (x, y) to the box (0 inside it)."""
    return math.hypot(max(box[0] - x, 0.0, x - box[2]), max(box[1] - y, 0.0, y - box[3]))


def _crosses(a, b, boxes, samples: int = 32) -> int:
    """How many of `boxes` the segment a→b passes through (sampled, end points excluded)."""
    pts = [(a[0] + (b[0] - a[0]) * i / samples, a[1] + (b[1] - a[1]) * i / samples) for i in range(1, samples)]
    return sum(any(bx[0] < x < bx[2] and bx[1] < y < bx[3] for x, y in pts) for bx in boxes)


def label_points(ax, xs, ys, labels, fontsize: float = 7, marker_pt: float = 6.0, rings: int = 12,
                 merge_pt: float = 1.0, gap_px: float = 1.0) -> list:
    """Label scatter points so that no two labels overlap, no label covers a point and every
    label stays inside the axes; returns the annotations.

    Greedy, in display space: points from top to bottom (ties left to right); each label tries
    offsets on rings around its point (ring k at marker_pt/2 + 1.5 + k·(text height) points) in
    eight directions, nearest ring first, and takes the first box clear of the labels placed so
    far (by `gap_px`), of every point's marker box and of the axes' edges (else the least
    overlap), preferring a box nearer its own point than any other on the first ring and a
    leader line (drawn beyond the first ring) that runs through no other marker or label. Points
    closer than `merge_pt` share one label, "a, b" (coincident results). The layout is for the
    axes as placed now: call it after every other artist and `fig.tight_layout()`; the labels
    are left out of later layouts (`set_in_layout(False)`), so `save`'s tight_layout keeps it.
    """
    import numpy as np
    from matplotlib.text import Text

    fig = ax.figure
    fig.canvas.draw()  # settles autoscaled limits and the layout: the transforms below are final
    renderer = fig.canvas.get_renderer()
    px_per_pt = fig.dpi / 72.0
    pix = ax.transData.transform(np.column_stack([np.asarray(xs, float), np.asarray(ys, float)]))
    groups: list[list] = []  # [px, py, labels, (x, y)]
    for (px, py), lab, x, y in zip(pix, labels, xs, ys):
        for g in groups:
            if abs(g[0] - px) <= merge_pt * px_per_pt and abs(g[1] - py) <= merge_pt * px_per_pt:
                g[2].append(str(lab))
                break
        else:
            groups.append([px, py, [str(lab)], (x, y)])
    half = marker_pt / 2 * px_per_pt
    markers = [(px - half, py - half, px + half, py + half) for px, py in pix]
    frame = ax.get_window_extent(renderer)
    placed: list[tuple] = []
    out = []
    for px, py, labs, xy in sorted(groups, key=lambda g: (-g[1], g[0])):
        text = ", ".join(labs)
        probe = ax.text(0, 0, text, fontsize=fontsize)
        bb = Text.get_window_extent(probe, renderer)
        probe.remove()
        w, h = bb.width, bb.height
        best = None
        for k in range(rings):
            r = marker_pt / 2 + 1.5 + k * h / px_per_pt  # points
            for ux, uy in _LABEL_DIRS:
                ox, oy = px + ux * r * px_per_pt, py + uy * r * px_per_pt
                x0 = ox - (w if ux < 0 else w / 2 if ux == 0 else 0)
                y0 = oy - (h if uy < 0 else h / 2 if uy == 0 else 0)
                box = (x0, y0, x0 + w, y0 + h)
                grown = (x0 - gap_px, y0 - gap_px, x0 + w + gap_px, y0 + h + gap_px)
                outside = ((max(0.0, frame.x0 - box[0]) + max(0.0, box[2] - frame.x1)) * h
                           + (max(0.0, frame.y0 - box[1]) + max(0.0, box[3] - frame.y1)) * w)  # exactly 0 inside
                hard = sum(_overlap(grown, p) for p in placed) + sum(_overlap(box, m) for m in markers) + outside
                if k == 0:  # no leader line: the label must be nearer its own point than any other
                    own = _dist(box, px, py)
                    soft = sum(_dist(box, qx, qy) <= own + px_per_pt for qx, qy, *_ in groups if (qx, qy) != (px, py))
                else:  # a leader line that runs through another marker or label misleads
                    soft = _crosses((px, py), (ox, oy), [m for m, (mx, my) in zip(markers, pix)
                                                         if (mx, my) != (px, py)] + placed)
                if best is None or (hard, soft) < best[0]:
                    best = ((hard, soft), k, ux, uy, r, box)
            if best[0] == (0, 0):
                break
        _, k, ux, uy, r, box = best
        placed.append(box)
        arrow = dict(arrowstyle="-", lw=0.5, color="0.45", shrinkA=0, shrinkB=half / px_per_pt) if k else None
        ann = ax.annotate(text, xy, xytext=(ux * r, uy * r), textcoords="offset points", fontsize=fontsize,
                          ha=_HA[ux], va=_VA[uy], arrowprops=arrow, annotation_clip=False)
        ann.set_in_layout(False)
        out.append(ann)
    return out
