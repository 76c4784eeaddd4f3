"""Accuracy-vs-log-cost Pareto frontier and the area under it (no torch)."""
from __future__ import annotations


def frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Non-dominated (cost, quality) points, by increasing cost: lower cost and higher quality
    are better; a point is kept iff its quality beats every cheaper (or equal-cost) point's."""
    out, best = [], float("-inf")
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best:
            out.append((x, y))
            best = y
    return out


def area(points: list[tuple[float, float]], x_lo: float, x_hi: float) -> float:
    """∫_{x_lo}^{x_hi} f(x) dx with f(x) = best quality reachable at cost ≤ x (0 before the
    cheapest point): the staircase under the frontier over a common cost range."""
    f = frontier(points)
    total = 0.0
    for i, (x, y) in enumerate(f):
        a = max(x, x_lo)
        b = min(f[i + 1][0] if i + 1 < len(f) else x_hi, x_hi)
        if b > a:
            total += (b - a) * y
    return total
