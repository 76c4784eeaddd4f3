"""Pareto frontier and its area on a constructed set, against a hand computation."""
import pytest

from methods.uniscale.pareto import area, frontier


def test_frontier_by_hand():
    pts = [(1.0, 0.2), (2.0, 0.1), (2.0, 0.5), (3.0, 0.4), (4.0, 0.9), (5.0, 0.9)]
    # (2,0.1) dominated by (1,0.2); (3,0.4) by (2,0.5); (5,0.9) by (4,0.9)
    assert frontier(pts) == [(1.0, 0.2), (2.0, 0.5), (4.0, 0.9)]


def test_area_by_hand():
    pts = [(1.0, 0.2), (2.0, 0.5), (3.0, 0.4), (4.0, 0.9)]
    # staircase over [0, 6]: 0 on [0,1), 0.2 on [1,2), 0.5 on [2,4), 0.9 on [4,6]
    assert area(pts, 0.0, 6.0) == pytest.approx(0.2 + 2 * 0.5 + 2 * 0.9, abs=1e-12)
    # clipped range [1.5, 4.5]: 0.5·0.2 + 2·0.5 + 0.5·0.9
    assert area(pts, 1.5, 4.5) == pytest.approx(0.1 + 1.0 + 0.45, abs=1e-12)
    # a subset never has more area over the same range
    assert area(pts[:2], 0.0, 6.0) == pytest.approx(0.2 + 4 * 0.5, abs=1e-12)
    assert area(pts[:2], 0.0, 6.0) <= area(pts, 0.0, 6.0)
