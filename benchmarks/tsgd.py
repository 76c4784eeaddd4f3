"""TSGD cost figures (CPU): simulated-solver chat calls per second through the LLM layer, and
the math-answer checker's exact-rational fast path vs its sympy path (same verdicts).

    python benchmarks/tsgd.py [--n 1000]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from methods.tsgd.answer import equivalent  # noqa: E402
from methods.tsgd.library import Library
from methods.tsgd.optim import Agent, TSGDConfig
from methods.tsgd.sim import GOOD, SimSolver, SolverParams
from methods.tsgd.synth import SynthConfig, generate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    a = ap.parse_args()
    data = generate(SynthConfig(a.n, 12, 12, 12, 0))
    index = {r["question"]: r for s in data.values() for r in s}
    solver = SimSolver(SolverParams(-0.619, 2.354, 1.5, 0.4, 1.0, 1.2), index)
    cfg = TSGDConfig(30, "dual", 16, 32, 2, 3, 0.7, 1, 30, 8, 0.5, 5, 64, 0)
    lib = Library(30, [GOOD[t][0] for t in GOOD])
    agent = Agent(solver, None, None, cfg)
    t0 = time.perf_counter()
    acc, _ = agent.accuracy(data["train"], lib)
    dt = time.perf_counter() - t0
    print(f"simulated solver, 12 rules in context: {a.n / dt:,.0f} chat calls/s "
          f"({dt / a.n * 1e6:.0f} us/call incl. prompt build, parse, answer check); acc {acc:.3f}")
    pairs = [("\\frac{7}{4}", "1.75"), ("x = 3", "3.0"), ("-6", "3"), ("13/10", "1.3")] * 250
    t0 = time.perf_counter()
    fast = [equivalent(x, y) for x, y in pairs]
    t_fast = time.perf_counter() - t0
    import sympy

    from methods.tsgd.answer import normalise
    t0 = time.perf_counter()
    slow = [sympy.simplify(normalise(x) - normalise(y)) == 0 for x, y in pairs]
    t_slow = time.perf_counter() - t0
    assert fast == slow
    print(f"answer check: rational fast path {t_fast / len(pairs) * 1e6:.1f} us/pair, sympy path "
          f"{t_slow / len(pairs) * 1e6:.0f} us/pair ({t_slow / t_fast:.0f}x), verdicts identical")


if __name__ == "__main__":
    main()
