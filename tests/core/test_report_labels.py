"""Point labels of the asag and pid scatter plots: no two overlap, none leaves its axes, on
crowded synthetic layouts shaped like the tiny runs' (coincident policies in asag; pid's 12
configurations in tight clusters). Boxes are the labels' text extents from matplotlib's renderer
(`Text.get_window_extent`), after the figure's final layout, as `plots.save` leaves it."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from matplotlib.text import Text

from methods.asag.analysis import draw_figure
from methods.core import plots
from methods.pid.analysis import synergy_figure

# asag (tiny): seven policies, two pairs on the same point, three more within a few tokens, all
# at one accuracy but for NoThinking.
ASAG = [("vanilla", 89.03, 0.2133), ("nothink", 5.86, 0.0333), ("deer", 56.2, 0.2133),
        ("asag", 67.71, 0.2133), ("asag_noinject", 67.71, 0.2133), ("asag_nojump", 70.02, 0.2133),
        ("asag_nogate", 56.2, 0.2133)]
# pid (tiny): (config, S, U_txt, Δ_vision), clusters of three within 0.05 bits and 0.01 Δ.
PID = [("balanced_early", -0.036, 0.361, 0.135), ("balanced_mid", 0.400, 0.309, 0.323),
       ("balanced_final", 0.894, 0.067, 0.398), ("syn_heavy_early", 0.029, 0.207, 0.140),
       ("syn_heavy_mid", 0.382, 0.504, 0.406), ("syn_heavy_final", 0.922, 0.070, 0.407),
       ("syn_mid_early", -0.022, 0.364, 0.066), ("syn_mid_mid", 0.349, 0.473, 0.402),
       ("syn_mid_final", 0.938, 0.044, 0.408), ("txt_heavy_early", -0.124, 0.655, 0.038),
       ("txt_heavy_mid", 0.285, 0.459, 0.209), ("txt_heavy_final", 0.414, 0.062, 0.193)]


def asag_figure():
    return draw_figure([{"policy": p, "len": n, "acc": a} for p, n, a in ASAG], [])


def pid_figure():
    names, s, ut, dv = zip(*PID)
    return synergy_figure(list(names), list(s), list(ut), list(dv), 0.85, -0.36)


def label_boxes(fig):
    """Per axes with labels: (axes box, [(text, box)]), after the layout `plots.save` applies."""
    fig.tight_layout()
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        if ax.texts:
            out.append((ax.get_window_extent(r), [(t.get_text(), Text.get_window_extent(t, r)) for t in ax.texts]))
    return out


@pytest.mark.parametrize("make, n_labels", [(asag_figure, [5]), (pid_figure, [12, 12])])
def test_labels_do_not_overlap(make, n_labels):
    fig = make()
    try:
        boxes = label_boxes(fig)
        assert [len(b) for _, b in boxes] == n_labels
        for frame, labels in boxes:
            for text, bb in labels:
                assert bb.width > 0 and bb.height > 0
                assert frame.x0 <= bb.x0 and bb.x1 <= frame.x1 and frame.y0 <= bb.y0 and bb.y1 <= frame.y1, text
            for (ta, a), (tb, b) in itertools.combinations(labels, 2):
                assert not a.overlaps(b), f"labels {ta!r} and {tb!r} overlap: {a} {b}"
    finally:
        plots.plt.close(fig)


def test_coincident_points_share_a_label():
    fig = asag_figure()
    try:
        texts = sorted(t.get_text() for t in fig.axes[0].texts)
        assert texts == ["asag, asag_noinject", "asag_nojump", "deer, asag_nogate", "nothink", "vanilla"]
    finally:
        plots.plt.close(fig)


def test_the_layouts_are_crowded():
    """Negative control: the old placement (every label 3 pt up and right of its point) overlaps
    on both layouts, so the tests above test the placement, not an easy layout."""
    for pts in ([(p, n, 100 * a) for p, n, a in ASAG], [(c, s, d) for c, s, _, d in PID]):
        fig, ax = plots.figure(1, 1, figsize=(4.5, 3.6))
        ax.scatter([x for _, x, _ in pts], [y for _, _, y in pts])
        for name, x, y in pts:
            ax.annotate(name, (x, y), xytext=(3, 3), textcoords="offset points", fontsize=7)
        [(_, labels)] = label_boxes(fig)
        assert any(a.overlaps(b) for (_, a), (_, b) in itertools.combinations(labels, 2))
        plots.plt.close(fig)


def test_label_points_places_each_label_at_its_point():
    fig, ax = plots.figure(1, 1)
    xs, ys = np.array([0.0, 0.01, 0.02, 1.0]), np.array([0.0, 0.0, 0.01, 1.0])
    ax.scatter(xs, ys)
    fig.tight_layout()
    anns = plots.label_points(ax, xs, ys, ["a", "b", "c", "d"])
    assert sorted((a.get_text(), tuple(map(float, a.xy))) for a in anns) == [
        ("a", (0.0, 0.0)), ("b", (0.01, 0.0)), ("c", (0.02, 0.01)), ("d", (1.0, 1.0))]
    plots.plt.close(fig)
